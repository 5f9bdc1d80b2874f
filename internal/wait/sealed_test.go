package wait

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/wal"
)

// sealedSource is the Source of an encrypted store's log and WAITS as
// stored (sealed per block, read in place as LogSource reads it; or
// sealed whole, the old way, opened whole).
type sealedSource struct {
	RecordSource
	s    *record.Sealer
	file *[]byte // WAITS as stored
}

func (s sealedSource) OpenWaitsTable(gen uint64) (*layout.WaitsTable, func(), error) {
	b := *s.file
	if layout.WaitsVersion(b) != 3 {
		return nil, nil, ErrNotTable
	}
	t, err := layout.OpenSealedWaits(s.Name, bytes.NewReader(b), int64(len(b)), s.s, gen)
	return t, func() {}, err
}

func (s sealedSource) WaitsFile(gen uint64) (string, []byte, error) {
	b, err := s.s.OpenStoreFile(*s.file, record.PlaceWaits, gen)
	return s.Name, b, err
}

func testSealer(t testing.TB) *record.Sealer {
	t.Helper()
	ring, err := seal.NewKeyring(map[string][]byte{"k": bytes.Repeat([]byte{5}, seal.KeySize)}, "k")
	if err != nil {
		t.Fatal(err)
	}
	var tbl seal.Table
	ks := seal.NewKeys()
	k, err := tbl.Add(ring, "")
	if err != nil {
		t.Fatal(err)
	}
	ks.Put("", k)
	return &record.Sealer{Store: [16]byte{3}, Keys: ks}
}

// TestTableSealed: an encrypted store's WAITS, sealed per block, loads as
// its plaintext table does, as does one sealed whole (written the old
// way); any block of it changed, two swapped, the file cut short, a block
// from another WAITS or the one before: met at the load or by a later
// query, the index is then rebuilt from the log and answers as the log
// does, never otherwise; damage in a block no query reads (the table's
// own checksums, past its entries) is never met and changes no answer.
func TestTableSealed(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 14))
	s := testSealer(t)
	recs, runs, file := sleepersLog(t, 2000)
	whole := New(fixedClock)
	if err := whole.Load(listSource(recs)); err != nil {
		t.Fatal(err)
	}
	want := dump(whole, runs, nil)
	good, err := layout.SealWaits(file, s, 3)
	if err != nil {
		t.Fatal(err)
	}
	again, err := layout.SealWaits(file, s, 3)
	if err != nil {
		t.Fatal(err)
	}
	// The WAITS before: a capture of gen 2 of the same log.
	prevX := New(fixedClock)
	if err := prevX.Load(listSource(recs)); err != nil {
		t.Fatal(err)
	}
	prevTable, err := prevX.Capture(2, wal.Pos{Segment: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := layout.SealWaits(prevTable, s, 2)
	if err != nil {
		t.Fatal(err)
	}
	full := record.SealedLen(layout.WaitsBlock, 1)
	nblocks := (len(file) + layout.WaitsBlock - 1) / layout.WaitsBlock
	end := int(binary.LittleEndian.Uint64(file[64:])) // the entries' end: the blocks past it hold checksums only
	block := func(b []byte, k int) []byte {
		at := 64 + k*full
		return b[at:min(at+full, len(b))]
	}
	load := func(what string, b []byte, mustRebuild bool) {
		t.Helper()
		var why string
		x := New(fixedClock)
		x.From(3, wal.Pos{Segment: 2})
		if err := x.Load(sealedSource{fileSource(recs, b, &why), s, &b}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for range 5 {
			everything(x, runs, rng)
		}
		if got := dump(x, runs, nil); got != want {
			t.Fatalf("%s (rebuilt %q): %s", what, x.Rebuilt(), firstDiff(got, want))
		}
		if mustRebuild != (x.Rebuilt() != "") {
			t.Fatalf("%s: rebuilt %q", what, x.Rebuilt())
		}
		if x.Rebuilt() != why {
			t.Fatalf("%s: Rebuilt says %q, Rebuilding %q", what, x.Rebuilt(), why)
		}
	}
	load("as written", good, false)
	old, err := s.SealStoreFile(file, record.PlaceWaits, 3)
	if err != nil {
		t.Fatal(err)
	}
	load("sealed whole (the old way)", old, false)
	if nblocks < 8 {
		t.Fatalf("%d blocks: too few to test", nblocks)
	}
	for k := range nblocks {
		read := k*layout.WaitsBlock < end
		b := bytes.Clone(good)
		blk := block(b, k)
		blk[rng.IntN(len(blk))] ^= 1 << rng.IntN(8)
		load(fmt.Sprintf("block %d flipped", k), b, read)
		b = bytes.Clone(good)
		copy(block(b, k), block(again, k))
		load(fmt.Sprintf("block %d from another WAITS of the generation", k), b, read)
		if k < nblocks-1 {
			b = bytes.Clone(good)
			copy(block(b, k), block(prev, k))
			load(fmt.Sprintf("block %d from the WAITS before", k), b, read)
		}
	}
	for range 10 {
		i, j := rng.IntN(nblocks-1), rng.IntN(nblocks-1)
		if i == j {
			continue
		}
		b := bytes.Clone(good)
		bi, bj := bytes.Clone(block(b, i)), bytes.Clone(block(b, j))
		copy(block(b, i), bj)
		copy(block(b, j), bi)
		load(fmt.Sprintf("blocks %d and %d swapped", i, j), b, true)
	}
	for _, n := range []int{0, 63, 64, 64 + full, len(good) - full, len(good) - 1, rng.IntN(len(good))} {
		load(fmt.Sprintf("cut to %d bytes", n), bytes.Clone(good[:n]), true)
	}
	load("the WAITS before", prev, true)
	for at := range 64 {
		b := bytes.Clone(good)
		b[at] ^= 1 << rng.IntN(8)
		load(fmt.Sprintf("header byte %d flipped", at), b, true)
	}
}

// TestInstalledSealed: once a capture of an encrypted store's index is
// written (sealed per block), Installed makes the index read the file,
// block by block, and let go of its copy; not if the file is another.
func TestInstalledSealed(t *testing.T) {
	s := testSealer(t)
	recs, runs, _ := sleepersLog(t, 2000)
	whole := New(fixedClock)
	if err := whole.Load(listSource(recs)); err != nil {
		t.Fatal(err)
	}
	want := dump(whole, runs, nil)
	var file []byte
	x := New(fixedClock)
	if err := x.Load(sealedSource{listSource(recs), s, &file}); err != nil {
		t.Fatal(err)
	}
	for gen := uint64(4); gen < 7; gen++ {
		b, err := x.Capture(gen, wal.Pos{Segment: 2}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if gen == 5 { // the file is not the capture's: kept in memory
			b = append(b[:len(b):len(b)], 0)
		}
		if file, err = layout.SealWaits(b, s, gen); err != nil {
			t.Fatal(err)
		}
		x.Installed(gen)
		x.mu.Lock()
		fromFile := x.mu.table.t.Bytes() == nil
		x.mu.Unlock()
		if fromFile != (gen != 5) {
			t.Fatalf("gen %d: the table read from the file: %v", gen, fromFile)
		}
		if got := dump(x, runs, nil); got != want {
			t.Fatalf("gen %d: %s", gen, firstDiff(got, want))
		}
	}
}

// TestCheckTableSealed: the background check compares an encrypted
// store's table, sealed per block and read in place, with the log: a true
// one passes (read through the table itself, not its bytes, which a
// sealed table does not hold), and the index keeps it.
func TestCheckTableSealed(t *testing.T) {
	s := testSealer(t)
	recs, runs, file := sleepersLog(t, 2000)
	b, err := layout.SealWaits(file, s, 3)
	if err != nil {
		t.Fatal(err)
	}
	var why string
	x := New(fixedClock)
	x.From(3, wal.Pos{Segment: 2})
	if err := x.Load(sealedSource{fileSource(recs, b, &why), s, &b}); err != nil || why != "" {
		t.Fatalf("load: %v, rebuilt %q", err, why)
	}
	diff, err := x.CheckTable(checkFilled(recs, wal.Pos{Segment: 2}), allLive, nil)
	if err != nil || diff != "" {
		t.Fatalf("a true sealed WAITS: %q, %v", diff, err)
	}
	whole := New(fixedClock)
	if err := whole.Load(listSource(recs)); err != nil {
		t.Fatal(err)
	}
	if got, want := dump(x, runs, nil), dump(whole, runs, nil); got != want || x.Rebuilt() != "" {
		t.Fatalf("after the check (rebuilt %q): %s", x.Rebuilt(), firstDiff(got, want))
	}
}
