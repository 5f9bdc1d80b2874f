package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/ledger"
	"github.com/zeebo/blake3"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestMain removes the fixtures once every test has run.
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if fixtureRoot != "" {
		os.RemoveAll(fixtureRoot)
	}
	os.Exit(code)
}

// Stores are built once per test binary (each Open and Close of a store
// costs about a second here, for Pebble) and copied for each test that
// changes them.
var (
	fixtureRoot string
	fixtures    = map[string]string{} // name -> directory
)

// testSeed drives the scripted agent of every fixture.
const testSeed = 42

type zeroNonces struct{}

func (zeroNonces) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// testSigningSeed is the fixed seed of the signed fixture's key.
var testSigningSeed = bytes.Repeat([]byte{7}, ed25519.SeedSize)

// storeOptions are the fixtures' options. Segments of 6 KiB make the clean
// fixture span three segments (a sealed one in the middle, for the tests of
// damage between two segments).
func storeOptions() *engine.Options {
	return &engine.Options{NoSync: true, Nonces: zeroNonces{}, DictSamples: -1, SegmentSize: 6 << 10,
		Logger: slog.New(slog.DiscardHandler)}
}

// fixture returns the directory of a store built once, by name:
//
//	clean     runs alpha (6 atoms) and beta (4 atoms), closed cleanly
//	signed    the same, with a signing key (testSigningSeed)
//	inflight  the same as clean, copied while beta's atom 5 waited for an
//	          action: an atom in flight and an action in doubt
//	ended     signed (testSigningSeed): alpha and beta as in clean, alpha
//	          then completed with a JSON result, gamma (2 atoms) cancelled
//	          with a text result, omega (1 atom) failed without one
//	forked    clean, then forks: alpha-retry of alpha at 3 (2 atoms of its
//	          own), alpha-retry-2 of alpha-retry at 4 (1 atom), alpha-zero of
//	          alpha at 0 (1 atom), beta-copy of beta at 4 (none)
//
// Tests must not change it: use copyStore.
func fixture(t *testing.T, name string) string {
	t.Helper()
	if dir, ok := fixtures[name]; ok {
		return dir
	}
	if fixtureRoot == "" {
		d, err := os.MkdirTemp("", "continuumctl-test-")
		if err != nil {
			t.Fatal(err)
		}
		fixtureRoot = d
	}
	dir := filepath.Join(fixtureRoot, name)
	opts := storeOptions()
	switch name {
	case "clean":
		buildStore(t, dir, opts, nil)
	case "signed":
		opts.SigningKey = ed25519.NewKeyFromSeed(testSigningSeed)
		buildStore(t, dir, opts, nil)
	case "inflight":
		buildStore(t, filepath.Join(fixtureRoot, "inflight-src"), opts, func(src string) {
			copyDir(t, src, dir)
		})
	case "ended":
		opts.SigningKey = ed25519.NewKeyFromSeed(testSigningSeed)
		buildStoreThen(t, dir, opts, nil, endRuns)
	case "forked":
		buildStoreThen(t, dir, opts, nil, forkRuns)
	default:
		t.Fatalf("no fixture %q", name)
	}
	fixtures[name] = dir
	return dir
}

// buildStore writes the runs of the fixtures into dir. If during is set, it
// starts atom 5 of beta, and calls during(dir) while that atom's action is
// being executed (its intent durable, its certificate not yet written).
func buildStore(t *testing.T, dir string, opts *engine.Options, during func(dir string)) {
	t.Helper()
	buildStoreThen(t, dir, opts, during, nil)
}

// endedResult is what alpha of the ended fixture completes with: longer
// than a line, so that inspect cuts it.
const endedResult = `{"deployed":"search-indexer v2.3.1","regions":["us-west-2","eu-central-1"],` +
	`"report":"sent to ops@acme.io","notes":"rolled back once in eu-central-1 after a failed health check"}`

// endRuns ends runs of db for the ended fixture: alpha completed, gamma
// (2 atoms) cancelled, omega (1 atom) failed without a result.
func endRuns(t *testing.T, ctx context.Context, db *engine.DB) {
	t.Helper()
	w := agent.NewWorld()
	for _, r := range []struct {
		id     string
		atoms  int
		status engine.Status
		result string
	}{
		{"alpha", 0, engine.StatusCompleted, endedResult},
		{"gamma", 2, engine.StatusCancelled, "stopped by the operator: the change window closed"},
		{"omega", 1, engine.StatusFailed, ""},
	} {
		run, err := db.Run(ctx, r.id)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < r.atoms; i++ {
			if _, err := agent.Step(ctx, run, testSeed, w); err != nil {
				t.Fatal(err)
			}
		}
		var result []byte
		if r.result != "" {
			result = []byte(r.result)
		}
		if err := run.End(ctx, r.status, result); err != nil {
			t.Fatal(err)
		}
	}
}

// forkRuns makes the forks of the forked fixture, each followed by the
// scripted agent's atoms of its own.
func forkRuns(t *testing.T, ctx context.Context, db *engine.DB) {
	t.Helper()
	w := agent.NewWorld()
	for _, f := range []struct {
		src   string
		at    uint64
		id    string
		atoms int
	}{
		{"alpha", 3, "alpha-retry", 2},
		{"alpha-retry", 4, "alpha-retry-2", 1},
		{"alpha", 0, "alpha-zero", 1},
		{"beta", 4, "beta-copy", 0},
	} {
		run, err := db.Fork(ctx, f.src, f.at, f.id)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < f.atoms; i++ {
			if _, err := agent.Step(ctx, run, testSeed, w); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// buildStoreThen is buildStore, then calls more (if set) before it closes
// the store.
func buildStoreThen(t *testing.T, dir string, opts *engine.Options, during func(dir string),
	more func(t *testing.T, ctx context.Context, db *engine.DB)) {
	t.Helper()
	ctx := context.Background()
	db, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	w := agent.NewWorld()
	for _, r := range []struct {
		id    string
		atoms int
	}{{"alpha", 6}, {"beta", 4}} {
		run, err := db.Run(ctx, r.id)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < r.atoms; i++ {
			if _, err := agent.Step(ctx, run, testSeed, w); err != nil {
				t.Fatal(err)
			}
		}
	}
	if during != nil {
		beta, _ := db.Run(ctx, "beta")
		atom, err := beta.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = atom.Do(ctx, ledger.Action{Tool: "billing.charge", Args: []byte(`{"amount_cents":4900,"customer":"cus_1"}`), Key: "beta/charge"},
			func(ctx context.Context, key string) ([]byte, error) {
				during(dir)
				return []byte(`{"charge":"ch_1"}`), nil
			})
		if err != nil {
			t.Fatal(err)
		}
	}
	if more != nil {
		more(t, ctx, db)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			// A running store renames files as it goes (the log's spare
			// segment, a checkpoint's temporary files): a copy taken while it
			// runs, like a copy a crash leaves, may miss one.
			return nil
		}
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// copyStore copies a fixture into a fresh directory the test may change.
func copyStore(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	copyDir(t, fixture(t, name), dst)
	return dst
}

// treeHash hashes every file of dir, by relative path, with its mode.
func treeHash(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[rel] = fmt.Sprintf("dir %v", info.Mode())
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := blake3.Sum256(b)
		out[rel] = fmt.Sprintf("%v %d %x %v", info.Mode(), len(b), sum, info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runCLI runs continuumctl with args and returns its exit code and outputs.
func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

var (
	reDuration = regexp.MustCompile(`\b[0-9.]+(ns|µs|ms|s)\b`)
	reJSONDur  = regexp.MustCompile(`"duration_ms": [0-9.e+-]+`)
	reCreated  = regexp.MustCompile(`"created": "[^"]*"`)
	reEndedAt  = regexp.MustCompile(`("ended": ?"|(?:completed|failed|cancelled) at )[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z`)
	rePort     = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)
)

// normalize masks what legitimately changes between runs: the store's
// directory and id, durations, and creation and end times.
func normalize(t *testing.T, s string, dirs map[string]string) string {
	t.Helper()
	for dir, name := range dirs {
		s = strings.ReplaceAll(s, dir, name)
	}
	s = reJSONDur.ReplaceAllString(s, `"duration_ms": <duration>`)
	s = reCreated.ReplaceAllString(s, `"created": "<time>"`)
	s = reEndedAt.ReplaceAllString(s, "${1}<time>")
	s = rePort.ReplaceAllString(s, "127.0.0.1:<port>")
	return reDuration.ReplaceAllString(s, "<duration>")
}

func storeID(t *testing.T, dir string) string {
	t.Helper()
	in, err := engine.Inspect(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	return in.StoreID()
}

// golden compares got with testdata/name.golden, or rewrites it with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("output differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
