package continuum_test

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/continuumdb/continuum"

// lower are the packages below engine in DESIGN.md's layout, as paths
// inside the module (a package below one of them is lower too). They must
// never import engine (or anything above it): engine conducts, they don't.
// Of the module's packages they import only lower ones, so a helper package
// that a lower package uses is registered here.
var lower = []string{"wal", "frame", "chain", "ledger", "snapshot", "record", "layout", "offline", "internal/crc32c", "internal/durable", "internal/privfs", "internal/runid"}

// isLower reports whether the package in dir (slash-separated, relative to
// the module root) is a lower package.
func isLower(dir string) bool {
	for _, l := range lower {
		if dir == l || strings.HasPrefix(dir, l+"/") {
			return true
		}
	}
	return false
}

// allowedDeps are the third-party module prefixes that shipped (non-test)
// code of the main module may import. Anything else must earn its place and
// live in a leaf package with its own module (see bench/peers).
var allowedDeps = []string{
	"github.com/cockroachdb/pebble/v2",
	"github.com/klauspost/compress",
	"github.com/zeebo/blake3",
	"golang.org/x/mod",
}

// TestImportGraph keeps the architecture of DESIGN.md visible: lower packages
// never import engine, cmd, bench or fuzz, and shipped code imports only the
// chosen dependencies.
func TestImportGraph(t *testing.T) {
	pkgs := map[string]*build.Package{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != "." && (strings.HasPrefix(name, ".") || name == "testdata") {
			return filepath.SkipDir
		}
		if path != "." {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module (optional peers) has its own rules
			}
		}
		p, err := build.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return err
		}
		pkgs[filepath.ToSlash(path)] = p
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, p := range pkgs {
		top := strings.SplitN(dir, "/", 2)[0]
		low := isLower(dir)
		for _, imp := range p.Imports {
			if low {
				forbidden := ""
				for _, f := range []string{"engine", "cmd", "bench", "fuzz"} {
					if imp == module+"/"+f || strings.HasPrefix(imp, module+"/"+f+"/") {
						forbidden = f
						t.Errorf("%s imports %s: lower packages must not import %s", dir, imp, f)
					}
				}
				if rel, ok := strings.CutPrefix(imp, module+"/"); ok && forbidden == "" && !isLower(rel) {
					t.Errorf("%s imports %s, which is not a lower package: lower packages import only each other (register a new helper package in lower)", dir, imp)
				}
			}
			if top == "engine" && (strings.HasPrefix(imp, module+"/cmd") || strings.HasPrefix(imp, module+"/bench")) {
				t.Errorf("%s imports %s: engine must not import its users", dir, imp)
			}
			if strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") && !strings.HasPrefix(imp, module) {
				ok := false
				for _, a := range allowedDeps {
					if imp == a || strings.HasPrefix(imp, a+"/") {
						ok = true
					}
				}
				if !ok {
					t.Errorf("%s imports %s, which is not one of the chosen dependencies", dir, imp)
				}
			}
		}
	}
}
