// Command lines counts a Go package's non-test lines by kind, for issue
// 36's goal of engine/ as a small core (bench/RESULTS.md): the public
// API's declarations with their doc comments (an exported func's
// signature, an exported type, const or var block), the bodies of
// exported funcs and methods, unexported code (with its comments), and
// the rest (package clause, imports, file comments, blank lines between
// declarations). The four add up to `wc -l` of the package's non-test
// files.
//
//	go run ./bench/lines ./engine
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: lines DIR")
		os.Exit(2)
	}
	fset := token.NewFileSet()
	notTest := func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }
	pkgs, err := parser.ParseDir(fset, os.Args[1], notTest, parser.ParseComments)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var files []string
	per := map[string]*count{}
	var sum count
	for _, pkg := range pkgs {
		for name, f := range pkg.Files {
			c := &count{lines: fset.File(f.Pos()).LineCount()}
			for _, d := range f.Decls {
				c.add(fset, d)
			}
			files = append(files, name)
			per[name] = c
			sum.lines += c.lines
			sum.api += c.api
			sum.bodies += c.bodies
			sum.unexported += c.unexported
		}
	}
	sort.Strings(files)
	row := func(name string, c *count) {
		fmt.Printf("%-20s %6d %6d %8d %10d %6d\n", name, c.lines, c.api, c.bodies, c.unexported, c.lines-c.api-c.bodies-c.unexported)
	}
	fmt.Printf("%-20s %6s %6s %8s %10s %6s\n", "file", "lines", "api", "bodies", "unexported", "rest")
	for _, name := range files {
		row(filepath.Base(name), per[name])
	}
	row("total", &sum)
}

type count struct{ lines, api, bodies, unexported int }

// add counts declaration d of a file into c.
func (c *count) add(fset *token.FileSet, d ast.Decl) {
	span := func(from, to token.Pos) int { return fset.Position(to).Line - fset.Position(from).Line + 1 }
	switch d := d.(type) {
	case *ast.FuncDecl:
		start := d.Pos()
		if d.Doc != nil {
			start = d.Doc.Pos()
		}
		switch {
		case !exportedFunc(d):
			c.unexported += span(start, d.End())
		case d.Body != nil && span(d.Body.Lbrace, d.Body.Rbrace) > 1:
			c.api += span(start, d.Body.Lbrace)
			c.bodies += span(d.Body.Lbrace, d.Body.Rbrace) - 1
		default:
			c.api += span(start, d.End())
		}
	case *ast.GenDecl:
		if d.Tok == token.IMPORT {
			return
		}
		start := d.Pos()
		if d.Doc != nil {
			start = d.Doc.Pos()
		}
		if exportedSpecs(d) {
			c.api += span(start, d.End())
		} else {
			c.unexported += span(start, d.End())
		}
	}
}

// exportedFunc reports whether d is part of the package's API: an
// exported func, or an exported method of an exported type.
func exportedFunc(d *ast.FuncDecl) bool {
	if !d.Name.IsExported() {
		return false
	}
	if d.Recv == nil {
		return true
	}
	t := d.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if x, ok := t.(*ast.IndexExpr); ok { // a generic receiver
		t = x.X
	}
	id, ok := t.(*ast.Ident)
	return !ok || id.IsExported()
}

// exportedSpecs reports whether a type, const or var declaration declares
// an exported name.
func exportedSpecs(d *ast.GenDecl) bool {
	for _, s := range d.Specs {
		switch s := s.(type) {
		case *ast.TypeSpec:
			if s.Name.IsExported() {
				return true
			}
		case *ast.ValueSpec:
			for _, n := range s.Names {
				if n.IsExported() {
					return true
				}
			}
		}
	}
	return false
}
