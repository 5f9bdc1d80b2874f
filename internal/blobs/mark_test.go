package blobs

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/layout"
)

// TestShipMarkCrash: Open ships only the blobs the mark does not name. A
// crash between a blob's commit here and its mark (inside Ship, before
// the ack) leaves it unmarked: the next Open ships it, and only it; a
// crash after Write returned leaves nothing to ship.
func TestShipMarkCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	c := &fakeCore{fs: fs}
	s := newSet(c, 0)
	if n, err := s.ShipAll(); err != nil || n != 0 {
		t.Fatalf("ShipAll of a store without blobs: %d, %v", n, err)
	}
	if _, err := fs.Stat("blobs/" + MarkName); err == nil {
		t.Fatal("a mark was written for a store without blobs")
	}
	ctx := context.Background()
	h := Holder{Key: 1, Run: "r", Seq: 1}
	a, b := bytes.Repeat([]byte("a"), 5000), bytes.Repeat([]byte("b"), 5000)
	if _, err := s.Write(ctx, h, "", bytes.NewReader(a)); err != nil {
		t.Fatal(err)
	}
	var inShip *vfs.MemFS
	c.inShip = func(string) { inShip = fs.CrashClone(vfs.CrashCloneCfg{}) }
	if _, err := s.Write(ctx, h, "", bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	c.inShip = nil
	after := fs.CrashClone(vfs.CrashCloneCfg{})

	nameB := blob.Name(blob.Hash(b), nil)
	c1 := &fakeCore{fs: inShip}
	if n, err := newSet(c1, 0).ShipAll(); err != nil || n != 1 || !slices.Equal(c1.shipped, []string{nameB}) {
		t.Fatalf("Open after a crash before the mark: shipped %d %v (%v), want [%s]", n, c1.shipped, err, nameB)
	}
	c1.shipped = nil
	if n, err := newSet(c1, 0).ShipAll(); err != nil || n != 0 {
		t.Fatalf("the next Open shipped %d %v (%v), want none", n, c1.shipped, err)
	}
	c2 := &fakeCore{fs: after}
	if n, err := newSet(c2, 0).ShipAll(); err != nil || n != 0 || len(c2.shipped) != 0 {
		t.Fatalf("Open after a crash after Write: shipped %d %v (%v), want none", n, c2.shipped, err)
	}
}

// TestShipMarkRepair: a mark cut short, damaged, of another format, or
// naming blobs a sweep removed costs at most a new shipping of the names
// it lost, and is rewritten; a store whose Replicator ships no blobs
// keeps no mark.
func TestShipMarkRepair(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	c := &fakeCore{fs: fs}
	s := newSet(c, 0)
	for i := range 3 {
		data := bytes.Repeat([]byte{byte('a' + i)}, 3000)
		if _, err := s.Write(ctx, Holder{Key: i, Run: "r", Seq: uint64(i)}, "", bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	p := "blobs/" + MarkName
	size := func() int {
		b, err := layout.ReadFile(fs, p)
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	full := markHeaderLen + 3*markEntryLen
	if size() != full {
		t.Fatalf("mark of 3 blobs: %d bytes, want %d", size(), full)
	}
	edit := func(f func([]byte) []byte) {
		t.Helper()
		b, err := layout.ReadFile(fs, p)
		if err != nil {
			t.Fatal(err)
		}
		if err := layout.WriteFileAtomic(fs, p, f(bytes.Clone(b)), true); err != nil {
			t.Fatal(err)
		}
	}
	open := func(what string, want int) {
		t.Helper()
		c.shipped = nil
		n, err := newSet(c, 0).ShipAll()
		if err != nil || n != want || len(c.shipped) != want {
			t.Fatalf("%s: ShipAll shipped %d %v (%v), want %d", what, n, c.shipped, err, want)
		}
		if size() != full {
			t.Fatalf("%s: the mark has %d bytes after Open, want %d (rewritten)", what, size(), full)
		}
		c.shipped = nil
		if n, err := newSet(c, 0).ShipAll(); err != nil || n != 0 {
			t.Fatalf("%s: the Open after shipped %d %v (%v)", what, n, c.shipped, err)
		}
	}
	edit(func(b []byte) []byte { return append(b, 1, 2, 3, 4, 5) })
	open("a torn append", 0)
	edit(func(b []byte) []byte { return b[:len(b)-10] })
	open("the last entry cut short", 1)
	edit(func(b []byte) []byte { b[markHeaderLen+markEntryLen+3] ^= 1; return b })
	open("the second entry damaged", 2)
	edit(func(b []byte) []byte { b[0] = 'X'; return b })
	open("another magic", 3)
	edit(func(b []byte) []byte { return append(b, b[markHeaderLen:markHeaderLen+markEntryLen]...) })
	open("a name twice", 0)
	if err := fs.Remove(p); err != nil {
		t.Fatal(err)
	}
	open("no mark", 3)

	// A sweep removes a blob: the next Open drops its name from the mark.
	for i := range 3 {
		s.Release(i)
	}
	keep := bytes.Repeat([]byte("c"), 3000)
	c.refs = []blob.Ref{{Hash: blob.Hash(keep), Size: int64(len(keep))}}
	if f, _, err := s.Sweep(ctx); err != nil || f != 2 {
		t.Fatalf("sweep removed %d (%v), want 2", f, err)
	}
	c.shipped = nil
	if n, err := newSet(c, 0).ShipAll(); err != nil || n != 0 {
		t.Fatalf("Open after a sweep shipped %d (%v)", n, err)
	}
	if size() != markHeaderLen+markEntryLen {
		t.Fatalf("the mark after a sweep of 2 of 3 blobs: %d bytes, want %d", size(), markHeaderLen+markEntryLen)
	}

	// No Replicator that ships blobs: no mark read, written or needed.
	fs2 := vfs.NewMem()
	c2 := &fakeCore{fs: fs2, noShips: true}
	s2 := newSet(c2, 0)
	if _, err := s2.Write(ctx, Holder{Key: 1, Run: "r"}, "", bytes.NewReader(keep)); err != nil {
		t.Fatal(err)
	}
	if n, err := newSet(c2, 0).ShipAll(); err != nil || n != 0 {
		t.Fatalf("ShipAll without a blob replica: %d, %v", n, err)
	}
	if _, err := fs2.Stat("blobs/" + MarkName); err == nil {
		t.Fatal("a store that ships no blobs has a mark")
	}
	// Replicated later: its blob is shipped once, then marked.
	c2.noShips = false
	if n, err := newSet(c2, 0).ShipAll(); err != nil || n != 1 {
		t.Fatalf("the first replicated Open shipped %d (%v), want 1", n, err)
	}
	if n, err := newSet(c2, 0).ShipAll(); err != nil || n != 0 {
		t.Fatalf("the second shipped %d (%v), want 0", n, err)
	}
}

// failRW fails OpenReadWrite (the mark's appends) once set.
type failRW struct {
	vfs.FS
	fail error
}

func (f *failRW) OpenReadWrite(name string, c vfs.DiskWriteCategory, o ...vfs.OpenOption) (vfs.File, error) {
	if f.fail != nil {
		return nil, f.fail
	}
	return f.FS.OpenReadWrite(name, c, o...)
}

// TestShipMarkFailure: a mark that cannot be written fails the put that
// shipped (its Ref is not handed out) and every later one until the
// store is opened again, which ships what the mark lacks.
func TestShipMarkFailure(t *testing.T) {
	ctx := context.Background()
	ffs := &failRW{FS: vfs.NewMem()}
	c := &fakeCore{fs: ffs}
	s := newSet(c, 0)
	h := Holder{Key: 1, Run: "r", Seq: 1}
	if _, err := s.Write(ctx, h, "", strings.NewReader(strings.Repeat("x", 2000))); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk gone")
	ffs.fail = boom
	if _, err := s.Write(ctx, h, "", strings.NewReader(strings.Repeat("y", 2000))); !errors.Is(err, boom) || !strings.Contains(err.Error(), MarkName) {
		t.Fatalf("Write with a failing mark: %v, want %v naming the mark", err, boom)
	}
	ffs.fail = nil
	if _, err := s.Write(ctx, h, "", strings.NewReader(strings.Repeat("z", 2000))); !errors.Is(err, boom) {
		t.Fatalf("the next Write after a failed mark: %v, want the first error, final", err)
	}
	c.shipped = nil
	if n, err := newSet(c, 0).ShipAll(); err != nil || n != 2 {
		t.Fatalf("Open after the failed mark shipped %d %v (%v), want the 2 unmarked", n, c.shipped, err)
	}
}
