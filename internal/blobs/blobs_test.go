package blobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/blob"
)

// fakeCore is a plaintext store whose log references refs (under run "r").
type fakeCore struct {
	fs   vfs.FS
	mu   sync.Mutex
	refs []blob.Ref
	// during, if set, runs inside References (a sweep's scan).
	during func()
	// shipped lists the names Ship was given; shipErr is what it returns.
	shipped []string
	shipErr error
	// noShips makes Ships false (a store whose Replicator ships no
	// blobs); inShip, if set, runs inside Ship (before its ack).
	noShips bool
	inShip  func(name string)
}

// newSet is New over c: values above threshold (if > 0) go to blobs;
// c ships them unless noShips.
func newSet(c *fakeCore, threshold int) *Set {
	cfg := Config{FS: c.fs, Dir: "blobs", Threshold: threshold, Ship: c.Ship}
	if c.noShips {
		cfg.Ship = nil
	}
	return New(c, cfg)
}

func (c *fakeCore) Ship(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.fs.Stat(c.fs.PathJoin("blobs", name)); err != nil {
		return fmt.Errorf("shipped before it is committed: %w", err)
	}
	c.shipped = append(c.shipped, name)
	if c.inShip != nil {
		c.inShip(name)
	}
	return c.shipErr
}

func (c *fakeCore) Store() *blob.Store                   { return blob.Open(c.fs, "blobs") }
func (c *fakeCore) Sealers(string) ([]blob.Sealer, bool) { return nil, false }
func (c *fakeCore) Parent(string) (string, bool)         { return "", true }
func (c *fakeCore) References(ctx context.Context, fn func(string, blob.Ref)) error {
	c.mu.Lock()
	refs := append([]blob.Ref(nil), c.refs...)
	during := c.during
	c.mu.Unlock()
	if during != nil {
		during()
	}
	for _, r := range refs {
		fn("r", r)
	}
	return nil
}

func names(t *testing.T, c *fakeCore) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	if err := c.Store().Names(func(n string) error { out[n] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSetValueThreshold(t *testing.T) {
	c := &fakeCore{fs: vfs.NewMem()}
	s := newSet(c, 8)
	ctx := context.Background()
	h := Holder{Key: 1, Run: "r", Seq: 1}
	if v, ok, err := s.Value(ctx, h, []byte("small")); err != nil || ok || v != "" {
		t.Fatalf("a value under the threshold: %q %v %v", v, ok, err)
	}
	big := bytes.Repeat([]byte("x"), 100)
	v, ok, err := s.Value(ctx, h, big)
	if err != nil || !ok {
		t.Fatalf("a value above the threshold: %v %v", ok, err)
	}
	ref, isRef := blob.ParseValue(v)
	if !isRef || ref.Size != 100 {
		t.Fatalf("value %q is not a reference to 100 bytes", v)
	}
	// A reference value to an existing blob is kept as it is, and held.
	if v2, ok, err := s.Value(ctx, Holder{Key: 2, Run: "r", Seq: 2}, []byte(v)); err != nil || ok || v2 != "" {
		t.Fatalf("a reference value to an existing blob: %q %v %v", v2, ok, err)
	}
	// One that names no blob is stored as its own bytes.
	missing := blob.Value(blob.Ref{Size: 3})
	v3, ok, err := s.Value(ctx, h, []byte(missing))
	if err != nil || !ok || v3 == missing {
		t.Fatalf("a reference value to no blob: %q %v %v", v3, ok, err)
	}
}

func TestSetSweepKeepsHeldAndReferenced(t *testing.T) {
	c := &fakeCore{fs: vfs.NewMem()}
	s := newSet(c, 0)
	ctx := context.Background()
	put := func(key any, b string) blob.Ref {
		ref, err := s.Write(ctx, Holder{Key: key, Run: "r", Seq: 1}, "", bytes.NewReader([]byte(b)))
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	a, b := put("a", "held"), put("b", "referenced")
	s.Release("b")
	c.refs = []blob.Ref{b}
	if files, _, err := s.Sweep(ctx); err != nil || files != 0 {
		t.Fatalf("sweep removed %d files (%v); want none", files, err)
	}
	s.Release("a")
	files, _, err := s.Sweep(ctx)
	if err != nil || files != 1 {
		t.Fatalf("sweep after the release removed %d files (%v); want 1", files, err)
	}
	n := names(t, c)
	if n[blob.Name(a.Hash, nil)] || !n[blob.Name(b.Hash, nil)] {
		t.Fatalf("after the sweep: %v", n)
	}
}

// A blob written and released while a sweep scans the log (its record
// appended after the scan) survives the sweep.
func TestSetSweepKeepsReleasedDuringScan(t *testing.T) {
	c := &fakeCore{fs: vfs.NewMem()}
	s := newSet(c, 0)
	ctx := context.Background()
	var ref blob.Ref
	c.during = func() {
		var err error
		ref, err = s.Write(ctx, Holder{Key: "late", Run: "r", Seq: 1}, "", bytes.NewReader([]byte("late")))
		if err != nil {
			t.Error(err)
		}
		s.Release("late")
	}
	if files, _, err := s.Sweep(ctx); err != nil || files != 0 {
		t.Fatalf("sweep removed %d files (%v); want none", files, err)
	}
	if !names(t, c)[blob.Name(ref.Hash, nil)] {
		t.Fatal("the blob released during the sweep's scan was removed")
	}
}

func TestSetWriteCanceled(t *testing.T) {
	c := &fakeCore{fs: vfs.NewMem()}
	s := newSet(c, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Write(ctx, Holder{Key: 1, Run: "r"}, "", bytes.NewReader([]byte("x"))); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(names(t, c)) != 0 {
		t.Fatal("a canceled write left a blob")
	}
}

func TestDead(t *testing.T) {
	// a <- b (deleted) <- c (deleted) <- d (live); e deleted, no live child.
	parent := map[string]string{"b": "a", "c": "b", "d": "c"}
	dead := Dead(map[string]bool{"b": true, "c": true, "e": true}, []string{"c", ""}, func(id string) string { return parent[id] })
	if len(dead) != 1 || !dead["e"] {
		t.Fatalf("Dead = %v, want only e (b and c are ancestors of the live d)", dead)
	}
}

// TestSetShip: a new blob is shipped once, after it is durable and before
// Write returns; a put of bytes already shipped ships nothing; a failed
// ship fails Write and leaves the blob held, then swept once released;
// ShipAll ships no blob file already marked; a swept blob's bytes ship
// again.
func TestSetShip(t *testing.T) {
	c := &fakeCore{fs: vfs.NewMem()}
	s := newSet(c, 0)
	ctx := context.Background()
	h := Holder{Key: 1, Run: "r", Seq: 1}
	data := bytes.Repeat([]byte("ship"), 1000)
	name := blob.Name(blob.Hash(data), nil)
	boom := errors.New("replica down")
	c.shipErr = boom
	if _, err := s.Write(ctx, h, "", bytes.NewReader(data)); !errors.Is(err, boom) {
		t.Fatalf("Write with a failing Ship: %v, want %v", err, boom)
	}
	if len(c.shipped) != 1 || c.shipped[0] != name || !names(t, c)[name] {
		t.Fatalf("failed ship: shipped %v, blob present %v", c.shipped, names(t, c)[name])
	}
	if f, _, err := s.Sweep(ctx); err != nil || f != 0 {
		t.Fatalf("a sweep while the failed put's atom holds it removed %d (%v)", f, err)
	}
	s.Release(h.Key)
	if f, _, err := s.Sweep(ctx); err != nil || f != 1 || names(t, c)[name] {
		t.Fatalf("a sweep after its release removed %d (%v)", f, err)
	}
	c.shipErr = nil
	c.shipped = nil
	ref, err := s.Write(ctx, h, "", bytes.NewReader(data))
	if err != nil || blob.Name(ref.Hash, nil) != name {
		t.Fatalf("Write: %v %v", ref, err)
	}
	// Ship ran once the file was committed (fakeCore.Ship checks).
	if len(c.shipped) != 1 || c.shipped[0] != name {
		t.Fatalf("shipped %v, want [%s]", c.shipped, name)
	}
	if _, err := s.Write(ctx, Holder{Key: 2, Run: "r", Seq: 2}, "", bytes.NewReader(data)); err != nil || len(c.shipped) != 1 {
		t.Fatalf("a put of the same bytes: %v, shipped %v", err, c.shipped)
	}
	other := []byte("other")
	if _, err := s.Write(ctx, h, "", bytes.NewReader(other)); err != nil || len(c.shipped) != 2 {
		t.Fatalf("a put of other bytes: %v, shipped %v", err, c.shipped)
	}
	// A new Set (a new Open) ships nothing: both are marked.
	c.shipped = nil
	if n, err := newSet(c, 0).ShipAll(); err != nil || n != 0 || len(c.shipped) != 0 {
		t.Fatalf("ShipAll: %d, %v, shipped %v", n, err, c.shipped)
	}
	// Swept, then put again: shipped again.
	s.Release(1)
	s.Release(2)
	if f, _, err := s.Sweep(ctx); err != nil || f != 2 {
		t.Fatalf("sweep: %d %v", f, err)
	}
	c.shipped = nil
	if _, err := s.Write(ctx, h, "", bytes.NewReader(data)); err != nil || len(c.shipped) != 1 {
		t.Fatalf("a put of swept bytes: %v, shipped %v", err, c.shipped)
	}
}
