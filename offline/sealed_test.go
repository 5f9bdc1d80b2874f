package offline_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/offline"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// TestSealedValueDamage: a sealed memory value that does not open is
// damage of the atom that wrote it: Atom, Export, Diff and StateAt fail
// with a *CorruptionError naming that atom's segment file, offset, run
// and seq, StateAt also for the frame of a later seq, which the atom's
// value reached. The store is a plaintext one whose log a writer other
// than the engine (which refuses set_sealed ops of its callers) extended
// with an atom holding a set_sealed op: in a plaintext store, every sealed
// value is damage. The frame before that atom reads as before.
func TestSealedValueDamage(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("plan", []byte("gold"))); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Atoms 2 (the sealed value) and 3, appended to the log as the engine
	// writes atoms of a plaintext store. Inspect does not check links, so
	// the heads are any.
	log, err := wal.Open(filepath.Join(dir, layout.WALDir), nil)
	if err != nil {
		t.Fatal(err)
	}
	comp := frame.NewCompressor(frame.NewDicts())
	var pos wal.Pos
	for _, at := range []struct {
		seq uint64
		d   *frame.Delta
	}{
		{2, new(frame.Delta).SetSealed("email", []byte("no sealed value"))},
		{3, new(frame.Delta).Set("note", []byte("n"))},
	} {
		body := comp.Compress(nil, record.AppendAtomBody(nil, nil, frame.AppendDelta(nil, at.d)), 0)
		p, err := log.Append(ctx, append(record.AppendAtomHeader(nil, "r", at.seq, chain.Hash{byte(at.seq)}), body...))
		if err != nil {
			t.Fatal(err)
		}
		if at.seq == 2 {
			pos = p
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}

	in, err := engine.Inspect(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if f, err := in.StateAt(ctx, "r", 1); err != nil || !bytes.Equal(f.Memory["plan"], []byte("gold")) {
		t.Fatalf("StateAt 1, before the damage: %v, memory %q", err, f.Memory)
	}
	segment := filepath.Join(dir, layout.WALDir, wal.SegmentName(pos.Segment))
	for name, call := range map[string]func() error{
		"StateAt 2": func() error { _, err := in.StateAt(ctx, "r", 2); return err },
		"StateAt 3": func() error { _, _, err := in.StateAtWithErased(ctx, "r", 3); return err },
		"Atom 2":    func() error { _, err := in.Atom(ctx, "r", 2); return err },
		"Export":    func() error { _, err := in.Export(ctx, io.Discard, "r", 0, 0); return err },
		"Diff":      func() error { _, err := in.Diff(ctx, "r", 0, "r", 3); return err },
	} {
		err := call()
		var ce *offline.CorruptionError
		if !errors.As(err, &ce) || !errors.Is(err, engine.ErrCorrupt) {
			t.Errorf("%s: %v, want a *CorruptionError", name, err)
			continue
		}
		if ce.File != segment || ce.Offset != pos.Offset || ce.Run != "r" || ce.Seq != 2 || !strings.Contains(ce.Reason, `memory key "email"`) {
			t.Errorf("%s: %v, want %s offset %d, run \"r\" seq 2, memory key \"email\"", name, err, segment, pos.Offset)
		}
	}
}
