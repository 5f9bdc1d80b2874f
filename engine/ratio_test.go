package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

// ratioChildEnv makes the test binary, run as a child, the agent of
// TestCompressibleValuesReadBack: it commits and exits without Close.
const ratioChildEnv = "CONTINUUM_RATIO_CHILD_DIR"

const (
	ratioAtoms = 320     // 320 MiB decompressed: past the readers' 256 MiB base
	ratioValue = 1 << 20 // each atom's value: 1 MiB of a repeated line
)

// ratioValueOf is atom i's value: a line repeated to 1 MiB, which s2
// alone compresses to a few dozen bytes.
func ratioValueOf(i int) []byte {
	line := fmt.Appendf(nil, "tool output line of call %d: OK\n", i)
	return bytes.Repeat(line, ratioValue/len(line)+1)[:ratioValue]
}

// ratioChild commits ratioAtoms atoms, each setting one key to 1 MiB of
// a repeated line, and exits without Close: a crash after the last
// acknowledged commit.
func ratioChild(dir string) {
	ctx := context.Background()
	// NoSync: the process dies, not the machine; the page cache keeps
	// every write.
	db, err := engine.Open(dir, &engine.Options{NoSync: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	r, err := db.Run(ctx, "r")
	for i := 1; err == nil && i <= ratioAtoms; i++ {
		var a *engine.Atom
		if a, err = r.Begin(ctx); err == nil {
			err = a.Commit(ctx, new(frame.Delta).Set("output", ratioValueOf(i)).Set("step", fmt.Append(nil, i)))
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(0) // no Close
}

// TestCompressibleValuesReadBack: what Commit accepts, every reader
// accepts. A child commits 320 atoms of 1 MiB values that compress to
// almost nothing (more than the readers' decompression budget allows
// records past frame.MaxRatio) and exits without Close; Open (replaying
// the log), a deep verify and inspect read the store, after the crash and
// after a clean Close.
func TestCompressibleValuesReadBack(t *testing.T) {
	if dir := os.Getenv(ratioChildEnv); dir != "" {
		ratioChild(dir)
		return
	}
	if raceEnabled {
		// One goroutine reading 320 MiB through every reader: nothing for
		// the race detector to find, and nine minutes under it. The
		// suite without it runs the test in every mode.
		t.Skip("a test of byte budgets, not of interleavings")
	}
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCompressibleValuesReadBack$", "-test.count=1")
	cmd.Env = append(os.Environ(), ratioChildEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var logBytes int64
	filepath.Walk(filepath.Join(dir, "wal"), func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			logBytes += fi.Size()
		}
		return nil
	})
	t.Logf("%d atoms of %d MiB: log of %d KiB", ratioAtoms, ratioValue>>20, logBytes>>10)

	readers := func(when string) {
		t.Helper()
		rep, err := engine.Verify(ctx, dir, &engine.VerifyOptions{Deep: true})
		if err != nil {
			t.Fatalf("%s: verify: %v", when, err)
		}
		if !rep.OK {
			t.Fatalf("%s: verify: %d failures, the first: %v", when, len(rep.Failures), rep.Failures[0])
		}
		in, err := engine.Inspect(ctx, dir, nil)
		if err != nil {
			t.Fatalf("%s: inspect: %v", when, err)
		}
		defer in.Close()
		for seq := uint64(1); seq <= ratioAtoms; seq++ {
			if _, err := in.Atom(ctx, "r", seq); err != nil {
				t.Fatalf("%s: inspect atom %d: %v", when, seq, err)
			}
		}
		f, err := in.StateAt(ctx, "r", ratioAtoms)
		if err != nil {
			t.Fatalf("%s: inspect state: %v", when, err)
		}
		if !bytes.Equal(f.Memory["output"], ratioValueOf(ratioAtoms)) {
			t.Fatalf("%s: inspect state: wrong output", when)
		}
		if _, err := in.Export(ctx, io.Discard, "r", 1, ratioAtoms); err != nil {
			t.Fatalf("%s: export: %v", when, err)
		}
	}
	open := func(when string) {
		t.Helper()
		db, err := engine.Open(dir, &engine.Options{NoSync: true})
		if err != nil {
			t.Fatalf("%s: Open: %v", when, err)
		}
		r, err := db.Run(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		if r.LastSeq() != ratioAtoms || !bytes.Equal(r.State().Memory["output"], ratioValueOf(ratioAtoms)) {
			t.Fatalf("%s: run at seq %d, or its output differs", when, r.LastSeq())
		}
		if err := db.Close(); err != nil {
			t.Fatalf("%s: Close: %v", when, err)
		}
	}
	readers("after the crash")
	open("after the crash")
	readers("after Close")
	open("after Close")
}
