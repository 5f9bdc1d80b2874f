package engine_test

// Damage to the snapshot store's files (Pebble's tables, MANIFEST, OPTIONS,
// markers, lock): a flipped byte, a truncation or a deletion of any of them
// is harmless (the engine reads exactly what the log says: LastSeq, Head,
// State, StateAt at every seq) or detected by verify; never a panic or a
// hang. The broader tamper suite covers every file of a store; this one is
// about Pebble.
//
// Reproduce with the seed it prints:
//
//	go test ./engine -run TestSnapshotStoreTamper -snaptamper.seed 123 -v

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/internal/workload"
)

var snapTamperSeed = flag.Int64("snaptamper.seed", 0, "seed of the snapshot-store tamper test (0: from the clock)")

const (
	tamperRuns  = 3
	tamperAtoms = 40
)

// tamperView is everything the engine reads of a store's runs; frames in
// their canonical encoding (frame.AppendFrame), which is equal exactly when
// the frames are.
type tamperView struct {
	last    map[string]uint64
	head    map[string]chain.Hash
	state   map[string][]byte
	stateAt map[string][][]byte // [seq-1]
}

// diff says where v and w differ, or "" if they do not.
func (v *tamperView) diff(w *tamperView) string {
	for id, last := range v.last {
		switch {
		case w.last[id] != last:
			return fmt.Sprintf("run %s: last seq %d, want %d", id, w.last[id], last)
		case w.head[id] != v.head[id]:
			return fmt.Sprintf("run %s: head %v, want %v", id, w.head[id], v.head[id])
		case !bytes.Equal(w.state[id], v.state[id]):
			return fmt.Sprintf("run %s: State differs", id)
		}
		for i := range v.stateAt[id] {
			if i >= len(w.stateAt[id]) || !bytes.Equal(w.stateAt[id][i], v.stateAt[id][i]) {
				return fmt.Sprintf("run %s: StateAt(%d) differs", id, i+1)
			}
		}
	}
	return ""
}

func readView(t *testing.T, fs vfs.FS, dir string) (*tamperView, engine.Stats) {
	t.Helper()
	db, err := engine.Open(dir, &engine.Options{FS: fs, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	v := &tamperView{last: map[string]uint64{}, head: map[string]chain.Hash{}, state: map[string][]byte{}, stateAt: map[string][][]byte{}}
	for i := 0; i < tamperRuns; i++ {
		id := workload.RunID(i)
		run, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		v.last[id], v.head[id] = run.LastSeq(), run.Head()
		f, err := run.StateE()
		if err != nil {
			t.Fatalf("%s: run %s: State: %v", dir, id, err)
		}
		v.state[id] = frame.AppendFrame(nil, f)
		for seq := uint64(1); seq <= run.LastSeq(); seq++ {
			var f *frame.Frame
			err := within(t, "StateAt", func() error {
				var err error
				f, err = run.StateAt(ctx, seq)
				return err
			})
			if err != nil {
				t.Fatalf("%s: run %s StateAt(%d): %v", dir, id, seq, err)
			}
			v.stateAt[id] = append(v.stateAt[id], frame.AppendFrame(nil, f))
		}
	}
	st := db.Stats()
	if err := within(t, "Close", db.Close); err != nil {
		t.Fatalf("%s: close: %v", dir, err)
	}
	return v, st
}

// copyStore copies the store in dir on from to a new in-memory filesystem.
func copyStore(t *testing.T, from vfs.FS, dir string) vfs.FS {
	t.Helper()
	to := vfs.NewMem()
	var walk func(d string)
	walk = func(d string) {
		if err := to.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		names, err := from.List(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			p := from.PathJoin(d, n)
			st, err := from.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if st.IsDir() {
				walk(p)
				continue
			}
			b := readAll(t, from, p)
			writeAll(t, to, p, b)
		}
	}
	walk(dir)
	return to
}

func readAll(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeAll(t *testing.T, fs vfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// tamperDamage is one way of damaging one file.
type tamperDamage struct {
	file string // relative to the store
	kind string // "flip", "truncate", "delete"
	at   int64  // flip: byte offset; truncate: new length
	mask byte
}

func (d tamperDamage) String() string {
	switch d.kind {
	case "flip":
		return fmt.Sprintf("flip %#02x at %d of %s", d.mask, d.at, d.file)
	case "truncate":
		return fmt.Sprintf("truncate %s to %d bytes", d.file, d.at)
	}
	return "delete " + d.file
}

func (d tamperDamage) apply(t *testing.T, fs vfs.FS, dir string) {
	t.Helper()
	name := fs.PathJoin(dir, d.file)
	switch d.kind {
	case "flip":
		b := readAll(t, fs, name)
		b[d.at] ^= d.mask
		writeAll(t, fs, name, b)
	case "truncate":
		writeAll(t, fs, name, readAll(t, fs, name)[:d.at])
	case "delete":
		if err := fs.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSnapshotStoreTamper(t *testing.T) {
	seed := *snapTamperSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))

	// A store built through the public API, with snapshots, several engine
	// checkpoints (each a flushed table) and a clean close.
	// On an in-memory filesystem: the files are Pebble's own, byte for
	// byte, without the cost of a disk's fsyncs for each of the scenarios.
	const pristine = "store"
	mem := vfs.NewMem()
	db, err := engine.Open(pristine, &engine.Options{FS: mem, SnapshotEvery: 4, RestartTail: 4 << 10, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	stepAtoms(t, db, 1, tamperAtoms, tamperRuns, 3, agent.NewWorld(), map[string][]chain.Hash{})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	want, st := readView(t, mem, pristine)
	if st.SnapshotStore != nil || st.SnapshotMismatches != 0 {
		t.Fatalf("the pristine store's snapshot store is not in use: %v (%d mismatches)", st.SnapshotStore, st.SnapshotMismatches)
	}

	var files []string
	names, err := mem.List(mem.PathJoin(pristine, "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	for _, n := range names {
		f := mem.PathJoin("snapshots", n)
		if info, err := mem.Stat(mem.PathJoin(pristine, f)); err == nil && !info.IsDir() {
			files = append(files, f)
			sizes[f] = info.Size()
		}
	}
	sort.Strings(files)
	t.Logf("the snapshot store's files: %v", files)

	flips, cuts := 6, []float64{0, 0.5, 0.999}
	if engine.ReducedTests() {
		flips, cuts = 2, []float64{0, 0.5}
	}
	var damages []tamperDamage
	for _, f := range files {
		n := sizes[f]
		for i := 0; i < flips && n > 0; i++ {
			damages = append(damages, tamperDamage{file: f, kind: "flip", at: rng.Int63n(n), mask: byte(1 << rng.Intn(8))})
		}
		for _, c := range cuts {
			if l := int64(c * float64(n)); l < n {
				damages = append(damages, tamperDamage{file: f, kind: "truncate", at: l})
			}
		}
		damages = append(damages, tamperDamage{file: f, kind: "delete"})
	}

	var detected, harmless, mismatched, failed int
	type tally struct{ scenarios, detected, harmless int }
	perKind := map[string]*tally{}
	for _, d := range damages {
		dir := pristine
		fs := copyStore(t, mem, pristine)
		d.apply(t, fs, dir)
		// Verify first: it must not change the store, and its verdict is
		// one of the two outcomes.
		rep, err := engine.Verify(ctx, dir, &engine.VerifyOptions{FS: fs, Deep: true})
		if err != nil {
			t.Fatalf("%s: verify: %v", d, err)
		}
		got, st := readView(t, fs, dir)
		if diff := want.diff(got); diff != "" {
			t.Fatalf("%s: the engine reads the store differently (verify OK=%v): %s", d, rep.OK, diff)
		}
		k := perKind[kindOfPebbleFile(d.file)]
		if k == nil {
			k = &tally{}
			perKind[kindOfPebbleFile(d.file)] = k
		}
		k.scenarios++
		if !rep.OK {
			detected++
			k.detected++
		} else {
			harmless++
			k.harmless++
		}
		if st.SnapshotMismatches > 0 {
			mismatched++
		}
		if st.SnapshotStore != nil {
			failed++
		}
		// The next Open (after Close moved a damaged store aside, or
		// re-indexed one) reads the same, from a store in use again.
		again, st2 := readView(t, fs, dir)
		if diff := want.diff(again); diff != "" {
			t.Fatalf("%s: reopened, the engine reads the store differently: %s", d, diff)
		}
		if st2.SnapshotMismatches != 0 || st2.SnapshotStore != nil {
			t.Errorf("%s: reopened, the snapshot store is still out of use: %v (%d mismatches)", d, st2.SnapshotStore, st2.SnapshotMismatches)
		}
	}
	for name, k := range perKind {
		t.Logf("%s: %d scenarios, %d detected by verify, %d harmless, 0 missed", name, k.scenarios, k.detected, k.harmless)
	}
	t.Logf("%d damages of %d files: verify detected %d, harmless %d; the engine ignored a value that disagreed with the log in %d, and ran without the store in %d",
		len(damages), len(files), detected, harmless, mismatched, failed)
}

// kindOfPebbleFile names the kind of a Pebble file, for the log.
func kindOfPebbleFile(name string) string {
	base := filepath.Base(name)
	for _, k := range []string{"MANIFEST", "OPTIONS", "marker", "LOCK"} {
		if strings.HasPrefix(base, k) {
			return k
		}
	}
	return filepath.Ext(base)
}
