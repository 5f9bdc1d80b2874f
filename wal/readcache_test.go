package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestReadAtCache reads a log's records through one ReadCache in log
// order, in reverse, at random and in strides, across segments, records
// larger than its reads and records appended to the active segment
// between reads: each read gives the bytes ReadAt gives, and a position
// out of the log the same error. After a compaction of a segment the
// cache read from, the records moved are read from the new file (a
// removed one is ErrReclaimed), never from the bytes held.
func TestReadAtCache(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), Options{SegmentSize: 256 << 10, InitialSegmentSize: 256 << 10})
	defer l.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 7))
	var recs [][]byte
	var poss []Pos
	for i := range 400 { // records of a few bytes to more than a cache's read
		n := rng.IntN(2000)
		if i%25 == 0 {
			n = rng.IntN(3 * readCacheMax / 2)
		}
		p, err := l.Append(ctx, rec(i, n))
		if err != nil {
			t.Fatal(err)
		}
		recs, poss = append(recs, rec(i, n)), append(poss, p)
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("want at least 3 segments, got %d", len(l.Segments()))
	}
	read := func(what string, c *ReadCache, order []int) {
		t.Helper()
		for _, i := range order {
			got, err := l.ReadAtCache(poss[i], c)
			if err != nil || !bytes.Equal(got, recs[i]) {
				t.Fatalf("%s: record %d at %v: %d bytes, %v; want %d bytes", what, i, poss[i], len(got), err, len(recs[i]))
			}
		}
	}
	all := make([]int, len(poss))
	for i := range all {
		all[i] = i
	}
	read("in order", &ReadCache{}, all)
	rev := make([]int, len(all))
	for i := range rev {
		rev[i] = len(all) - 1 - i
	}
	read("in reverse", &ReadCache{}, rev)
	// Reads grow only while the records read use what they read: in
	// order they reach readCacheMax, records read far apart shrink them
	// back to readAtChunk.
	c0 := &ReadCache{}
	read("in order", c0, all[1:100])
	if c0.next != readCacheMax {
		t.Fatalf("after records read in order the cache reads %d bytes, want %d", c0.next, readCacheMax)
	}
	read("far apart", c0, []int{len(all) - 90, len(all) - 70, len(all) - 50, len(all) - 30, len(all) - 10, len(all) - 1})
	if c0.next != readAtChunk {
		t.Fatalf("after records far apart the cache reads %d bytes, want %d", c0.next, readAtChunk)
	}
	c := &ReadCache{}
	for k := range 5 {
		read("shuffled", c, rng.Perm(len(all)))
		var stride []int
		for i := k; i < len(all); i += 3 + k {
			stride = append(stride, i)
		}
		read("in strides", c, stride)
	}
	// Appends after the cache read the end of the active segment.
	last := poss[len(poss)-1]
	read("the last", c, []int{len(poss) - 1})
	for i := range 20 {
		p, err := l.Append(ctx, rec(2000+i, 100))
		if err != nil {
			t.Fatal(err)
		}
		recs, poss = append(recs, rec(2000+i, 100)), append(poss, p)
		read("appended", c, []int{len(poss) - 1, len(poss) - 2})
	}
	for _, p := range []Pos{{last.Segment, last.Offset + 1}, l.End(), {last.Segment + 99, SegmentHeaderSize}} {
		_, want := l.ReadAt(p)
		if _, err := l.ReadAtCache(p, c); want == nil || err == nil || err.Error() != want.Error() {
			t.Fatalf("ReadAtCache(%v): %v, ReadAt: %v", p, err, want)
		}
	}

	// Compact the first segment while c holds bytes of it.
	seg := poss[0].Segment
	read("before the compaction", c, []int{0, 1, 2})
	if _, err := l.Compact(seg, dropOdd); err != nil {
		t.Fatal(err)
	}
	for i, p := range poss {
		got, err := l.ReadAtCache(p, c)
		if p.Segment == seg && i%2 == 1 {
			if !errors.Is(err, ErrReclaimed) {
				t.Fatalf("record %d at %v, removed by the compaction: %v, want ErrReclaimed", i, p, err)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, recs[i]) {
			t.Fatalf("after the compaction: record %d at %v: %d bytes, %v", i, p, len(got), err)
		}
	}
}

// TestReadAtCacheReadError: a read through a ReadCache that fails returns
// the cause with the segment named, leaves the cache holding nothing (the
// bytes it held before are read again, not served), and once the reads
// work again every record reads back whole.
func TestReadAtCacheReadError(t *testing.T) {
	var armed atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if armed.Load() && op.Kind == errorfs.OpFileReadAt {
			return fmt.Errorf("injected on %s: %w", op.Path, syscall.EIO)
		}
		return nil
	}))
	l := mustOpen(t, fs, Options{SegmentSize: 1 << 20, InitialSegmentSize: 1 << 20}) // one segment
	defer l.Close()
	var recs [][]byte
	var poss []Pos
	for i := range 200 {
		p, err := l.Append(context.Background(), rec(i, 700))
		if err != nil {
			t.Fatal(err)
		}
		recs, poss = append(recs, rec(i, 700)), append(poss, p)
	}
	if poss[0].Segment != poss[len(poss)-1].Segment {
		t.Fatalf("the records span segments %d to %d", poss[0].Segment, poss[len(poss)-1].Segment)
	}
	c := &ReadCache{}
	if _, err := l.ReadAtCache(poss[0], c); err != nil { // holds records 0 to about 5
		t.Fatal(err)
	}
	armed.Store(true)
	if got, err := l.ReadAtCache(poss[1], c); err != nil || !bytes.Equal(got, recs[1]) {
		t.Fatalf("record 1 from the bytes held: %d bytes, %v", len(got), err)
	}
	_, err := l.ReadAtCache(poss[150], c)
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), segmentName(poss[150].Segment)) {
		t.Fatalf("a failed read: %v, want EIO naming segment %d", err, poss[150].Segment)
	}
	if _, err := l.ReadAtCache(poss[2], c); !errors.Is(err, syscall.EIO) {
		t.Fatalf("record 2 after a failed read: %v, want a read (EIO), not the bytes held before", err)
	}
	armed.Store(false)
	for i, p := range poss {
		if got, err := l.ReadAtCache(p, c); err != nil || !bytes.Equal(got, recs[i]) {
			t.Fatalf("record %d after the reads work again: %d bytes, %v", i, len(got), err)
		}
	}
}
