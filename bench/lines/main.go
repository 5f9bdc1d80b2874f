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
//
// With -core, a comma-separated list of file names, two more rows add up
// the files named (the core) and the others.
//
//	go run ./bench/lines -core db.go,run.go ./engine
package main

import (
	"flag"
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
	coreList := flag.String("core", "", "comma-separated file names to add up as the core")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: lines [-core FILES] DIR")
		os.Exit(2)
	}
	core := map[string]bool{}
	if *coreList != "" {
		for _, name := range strings.Split(*coreList, ",") {
			core[name] = true
		}
	}
	fset := token.NewFileSet()
	notTest := func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }
	pkgs, err := parser.ParseDir(fset, flag.Arg(0), notTest, parser.ParseComments)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var files []string
	per := map[string]*count{}
	var sum, inCore, others count
	for _, pkg := range pkgs {
		for name, f := range pkg.Files {
			c := &count{lines: fset.File(f.Pos()).LineCount()}
			for _, d := range f.Decls {
				c.add(fset, d)
			}
			files = append(files, name)
			per[name] = c
			sum.plus(c)
			if core[filepath.Base(name)] {
				inCore.plus(c)
				delete(core, filepath.Base(name))
			} else {
				others.plus(c)
			}
		}
	}
	if len(core) > 0 {
		for name := range core {
			fmt.Fprintf(os.Stderr, "lines: -core names %s, not a file of the package\n", name)
		}
		os.Exit(2)
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
	if *coreList != "" {
		row("core", &inCore)
		row("others", &others)
	}
}

type count struct{ lines, api, bodies, unexported int }

func (c *count) plus(d *count) {
	c.lines += d.lines
	c.api += d.api
	c.bodies += d.bodies
	c.unexported += d.unexported
}

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
