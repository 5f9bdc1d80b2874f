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
var lower = []string{"wal", "frame", "chain", "ledger", "snapshot", "record", "layout", "offline", "blob", "internal/crc32c", "internal/durable", "internal/privfs", "internal/runid", "internal/crashmem", "internal/fence", "seal", "internal/branch", "internal/saga", "internal/lineage", "internal/mailbox", "internal/retention", "internal/erasure", "internal/dicttrain", "internal/snapindex", "internal/checkpoint", "internal/registry", "internal/retry", "internal/wait", "internal/keystore", "internal/stream", "internal/blobs", "internal/runview", "internal/history", "internal/runstate", "internal/runtable", "internal/journal", "internal/replication", "internal/settle", "internal/observe", "internal/resumekey", "internal/lifecycle", "internal/limits"}

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

// unlinked lists, for a package (a path inside the module), the module's
// packages that must not be linked into it, directly or through any other:
// continuumctl reads stores that matter, and the demo's fake outside world
// and scripted agent (cmd/continuumdemo) have no place in it; nor in the
// agent loop and its model adapter, which programs link (examples/llmagent
// uses the fake world, agentloop must not).
var unlinked = map[string][]string{
	"cmd/continuumctl": {"internal/downstream", "internal/agent", "internal/workload", "internal/agenttext"},
	"agentloop":        {"internal/downstream", "internal/agent", "internal/workload", "internal/agenttext"},
	"agentloop/openai": {"internal/downstream", "internal/agent", "internal/workload", "internal/agenttext"},
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
	for dir, banned := range unlinked {
		if pkgs[dir] == nil {
			t.Errorf("unlinked names %s, which is not a package of the module", dir)
			continue
		}
		via := linked(pkgs, dir)
		for _, b := range banned {
			if pkgs[b] == nil {
				t.Errorf("unlinked names %s, which is not a package of the module", b)
			}
			if chain, ok := via[b]; ok {
				t.Errorf("%s links %s (%s): it must not", dir, b, strings.Join(chain, " -> "))
			}
		}
	}
}

// linked returns the module's packages that the package in dir links, not
// counting its tests, each with the chain of imports that reaches it (dir
// first).
func linked(pkgs map[string]*build.Package, dir string) map[string][]string {
	via := map[string][]string{dir: {dir}}
	queue := []string{dir}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		for _, imp := range pkgs[d].Imports {
			rel, ok := strings.CutPrefix(imp, module+"/")
			if _, seen := via[rel]; !ok || seen || pkgs[rel] == nil {
				continue
			}
			via[rel] = append(append([]string(nil), via[d]...), rel)
			queue = append(queue, rel)
		}
	}
	return via
}
