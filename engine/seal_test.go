package engine

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
)

// secret marks the agent data of the sealed-store tests: none of it may
// appear in any file of an encrypted store.
const secret = "SECRET-7c1e"

// sealedWorkload writes, to db, atoms with actions, a failed atom, an
// ended run and one left active, all of it holding secret.
func sealedWorkload(t testing.TB, db *DB) {
	t.Helper()
	ctx := context.Background()
	for _, id := range []string{"ended", "active"} {
		r, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			a, err := r.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			res, err := a.Do(ctx, ledger.Action{Tool: "tool-" + secret, Args: []byte(fmt.Sprintf(`{"q":"%s-%d"}`, secret, i))},
				func(context.Context, string) ([]byte, error) {
					return []byte(fmt.Sprintf(`"result %s %d"`, secret, i)), nil
				})
			if err != nil {
				t.Fatal(err)
			}
			d := new(frame.Delta).Set(fmt.Sprintf("key-%d", i), []byte(secret+" value")).
				ToolOutput(fmt.Sprint("call-", i), "tool", res)
			if err := a.Commit(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		a, err := r.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Fail(ctx, "reason "+secret); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := db.Run(ctx, "ended")
	if err := r.End(ctx, StatusCompleted, []byte("final "+secret)); err != nil {
		t.Fatal(err)
	}
}

// checkSealedState checks what sealedWorkload left, read back.
func checkSealedState(t testing.TB, db *DB) {
	t.Helper()
	ctx := context.Background()
	for _, id := range []string{"ended", "active"} {
		r, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		f, err := r.StateE()
		if err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
		for i := range 5 {
			if got := string(f.Memory[fmt.Sprintf("key-%d", i)]); got != secret+" value" {
				t.Fatalf("run %s key-%d = %q", id, i, got)
			}
		}
		if len(f.Messages) != 5 || !strings.Contains(f.Messages[4].Content, "result "+secret+" 4") {
			t.Fatalf("run %s: messages %+v", id, f.Messages)
		}
	}
}

// storeFiles returns every file of the store under dir, by name.
func storeFiles(t testing.TB, fs vfs.FS, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	var walk func(d string)
	walk = func(d string) {
		names, err := fs.List(d)
		if err != nil {
			return
		}
		for _, n := range names {
			p := fs.PathJoin(d, n)
			if st, err := fs.Stat(p); err == nil && st.IsDir() {
				walk(p)
				continue
			}
			b, err := layout.ReadFile(fs, p)
			if err != nil {
				t.Fatal(err)
			}
			out[p] = b
		}
	}
	walk(dir)
	return out
}

// TestSealedLog: an encrypted store's log holds none of the agent's data
// in the clear, and reads back whole after a restart.
func TestSealedLog(t *testing.T) {
	// The control: a plaintext store holds the secret in its log, so the
	// search below can find it.
	plain := vfs.NewMem()
	db, err := Open("p", &Options{FS: plain, NoSync: true, DictSamples: -1})
	if err != nil {
		t.Fatal(err)
	}
	sealedWorkload(t, db)
	crash(db)
	found := false
	for _, b := range storeFiles(t, plain, "p/wal") {
		found = found || bytes.Contains(b, []byte(secret))
	}
	if !found {
		t.Fatal("the plaintext control's log does not hold the secret: the search is blind")
	}

	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	db, err = Open("s", encOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	sealedWorkload(t, db)
	checkSealedState(t, db)
	// Crash-like: no Close, so the restart replays the log itself.
	crash(db)
	for name, b := range storeFiles(t, fs, "s/wal") {
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("%s holds the agent's data in the clear", name)
		}
	}
	db, err = Open("s", encOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	checkSealedState(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open("s", encOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	checkSealedState(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
