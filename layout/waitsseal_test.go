package layout

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

// testSealer returns a Sealer of store {7..} with the store's data key.
func testSealer(t testing.TB) *record.Sealer {
	t.Helper()
	ring, err := seal.NewKeyring(map[string][]byte{"k": bytes.Repeat([]byte{9}, seal.KeySize)}, "k")
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
	return &record.Sealer{Store: [16]byte{7, 15: 0xee}, Keys: ks}
}

// readTable reads every section and entry of tb, in a random order, and
// returns what it read (or the first error).
func readTable(tb *WaitsTable, rng *rand.Rand) (string, error) {
	var out strings.Builder
	type read func() error
	var reads []read
	for i := range tb.Runs {
		reads = append(reads, func() error {
			var r WaitsRun
			if err := tb.Run(i, nil, &r); err != nil {
				return err
			}
			k, ok, err := tb.Find(r.ID)
			if err != nil {
				return err
			}
			fmt.Fprintf(&out, "run %d %s %v %v %d %+v\n", i, r.ID, r.Mark, ok, k, *r.Wait)
			return nil
		})
	}
	for k := range tb.Timers {
		reads = append(reads, func() error {
			at, run, err := tb.Deadline(k)
			fmt.Fprintf(&out, "deadline %d %d %d\n", k, at, run)
			return err
		})
	}
	for k := range tb.ReadyLen {
		reads = append(reads, func() error {
			run, err := tb.ReadyRun(k)
			fmt.Fprintf(&out, "ready %d %d\n", k, run)
			return err
		})
	}
	rng.Shuffle(len(reads), func(i, j int) { reads[i], reads[j] = reads[j], reads[i] })
	for _, r := range reads {
		if err := r(); err != nil {
			return "", err
		}
	}
	lines := strings.Split(out.String(), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n"), nil
}

// openSealed opens b, WAITS version 3, from memory.
func openSealed(b []byte, s *record.Sealer, gen uint64) (*WaitsTable, error) {
	return OpenSealedWaits("WAITS", bytes.NewReader(b), int64(len(b)), s, gen)
}

// TestSealedWaitsRoundTrip: WAITS sealed per block reads as the table it
// seals, holds none of it in the clear, unseals whole to it, and a
// reader keeps no more than its cache's blocks opened; a file sealed
// whole (the old way) unseals too.
func TestSealedWaitsRoundTrip(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 31))
	s := testSealer(t)
	for _, n := range []int{1, 3, 40, 3000} {
		w := bigWaits(n)
		w.Runs[0].Pending = []WaitsEvent{{Name: "n", Sender: "s", Payload: []byte("secret-payload-42")}}
		w.Runs[0].Senders = []WaitsSender{{ID: "s"}}
		table := w.Marshal()
		sealed, err := SealWaits(table, s, w.Gen)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(sealed, []byte("secret-payload-42")) || bytes.Contains(sealed, []byte("run-0000")) {
			t.Fatalf("%d runs: the sealed file holds the table in the clear", n)
		}
		if WaitsVersion(sealed) != 3 {
			t.Fatalf("version %d", WaitsVersion(sealed))
		}
		plain, err := OpenWaitsTable("WAITS", table)
		if err != nil {
			t.Fatal(err)
		}
		want, err := readTable(plain, rng)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := openSealed(sealed, s, w.Gen)
		if err != nil {
			t.Fatal(err)
		}
		if tb.Runs != n || tb.Gen != w.Gen || tb.Size() != len(table) || tb.Bytes() != nil {
			t.Fatalf("%d runs: header %+v", n, tb)
		}
		got, err := readTable(tb, rng)
		if err != nil || got != want {
			t.Fatalf("%d runs: read sealed: %v\n%.500s\nwant\n%.500s", n, err, got, want)
		}
		open := 0
		for _, c := range tb.sealed.cache {
			if c.k != 0 {
				open++
			}
		}
		if open > waitsCacheBlocks || (len(table) > 2*waitsCacheBlocks*WaitsBlock && open != waitsCacheBlocks) {
			t.Fatalf("%d runs: %d blocks cached", n, open)
		}
		if k := len(tb.sealed.fence); k > 1<<waitsFenceDepth-1 || k > n {
			t.Fatalf("%d runs: %d ids kept for searches", n, k)
		}
		if other, err := openSealed(sealed, s, w.Gen); err != nil || !tb.Same(other) {
			t.Fatalf("%d runs: the same file is not Same (%v)", n, err)
		}
		if u, err := UnsealWaits("WAITS", sealed, s, w.Gen); err != nil || !bytes.Equal(u, table) {
			t.Fatalf("%d runs: unsealed: %v", n, err)
		}
		old, err := s.SealStoreFile(table, record.PlaceWaits, w.Gen)
		if err != nil {
			t.Fatal(err)
		}
		if u, err := UnsealWaits("WAITS", old, s, w.Gen); err != nil || !bytes.Equal(u, table) {
			t.Fatalf("%d runs: sealed whole, unsealed: %v", n, err)
		}
		if _, err := UnsealWaits("WAITS", old, s, w.Gen+1); err == nil {
			t.Fatalf("%d runs: sealed whole, unsealed for another generation", n)
		}
	}
}

// TestSealedWaitsForged: a sealed WAITS with any block changed, any
// header byte changed, two blocks swapped, cut short or grown, a block
// or the header from another WAITS (of the same generation or an
// earlier one), or opened for another generation, never reads as a
// table: the open or the read that meets it fails, with a corruption
// error; and never panics.
func TestSealedWaitsForged(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 32))
	s := testSealer(t)
	w := bigWaits(3000)
	table := w.Marshal()
	good, err := SealWaits(table, s, w.Gen)
	if err != nil {
		t.Fatal(err)
	}
	again, err := SealWaits(table, s, w.Gen) // another file of the same table and generation
	if err != nil {
		t.Fatal(err)
	}
	w.Gen--
	older, err := SealWaits(w.Marshal(), s, w.Gen)
	if err != nil {
		t.Fatal(err)
	}
	w.Gen++
	full := record.SealedLen(WaitsBlock, 1)
	nblocks := (len(table) + WaitsBlock - 1) / WaitsBlock
	if nblocks < 8 || len(good) != waitsHeader3+(nblocks-1)*full+record.SealedLen(len(table)-(nblocks-1)*WaitsBlock, 1) {
		t.Fatalf("%d blocks, %d bytes: not the layout expected", nblocks, len(good))
	}
	block := func(b []byte, k int) []byte {
		at := waitsHeader3 + k*full
		return b[at:min(at+full, len(b))]
	}
	check := func(what string, b []byte, gen uint64) {
		t.Helper()
		tb, err := openSealed(b, s, gen)
		if err == nil {
			_, err = readTable(tb, rng)
		}
		var ce *record.CorruptionError
		if err == nil || !errors.As(err, &ce) {
			t.Fatalf("%s: read as a table (%v)", what, err)
		}
		if _, err := UnsealWaits("WAITS", b, s, gen); err == nil {
			t.Fatalf("%s: unsealed", what)
		}
	}
	for k := range nblocks {
		b := bytes.Clone(good)
		blk := block(b, k)
		blk[rng.IntN(len(blk))] ^= 1 << rng.IntN(8)
		check(fmt.Sprintf("block %d flipped", k), b, w.Gen)
		b = bytes.Clone(good)
		copy(block(b, k), block(again, k))
		check(fmt.Sprintf("block %d from another WAITS of the generation", k), b, w.Gen)
		if k < nblocks-1 {
			b = bytes.Clone(good)
			copy(block(b, k), block(older, k))
			check(fmt.Sprintf("block %d from the WAITS before", k), b, w.Gen)
		}
	}
	for at := range waitsHeader3 {
		b := bytes.Clone(good)
		b[at] ^= 1 << rng.IntN(8)
		check(fmt.Sprintf("header byte %d flipped", at), b, w.Gen)
	}
	for range 20 {
		i, j := rng.IntN(nblocks-1), rng.IntN(nblocks-1)
		if i == j {
			continue
		}
		b := bytes.Clone(good)
		bi, bj := bytes.Clone(block(b, i)), bytes.Clone(block(b, j))
		copy(block(b, i), bj)
		copy(block(b, j), bi)
		check(fmt.Sprintf("blocks %d and %d swapped", i, j), b, w.Gen)
	}
	for _, n := range []int{0, 10, waitsHeader3 - 1, waitsHeader3, waitsHeader3 + full, len(good) - full, len(good) - 1} {
		check(fmt.Sprintf("cut to %d bytes", n), bytes.Clone(good[:n]), w.Gen)
	}
	for range 10 {
		n := rng.IntN(len(good))
		check(fmt.Sprintf("cut to %d bytes", n), bytes.Clone(good[:n]), w.Gen)
	}
	// Cut to whole blocks, the header's length and count made to agree:
	// the blocks are bound to the header they were sealed under.
	cut := bytes.Clone(good[:waitsHeader3+4*full])
	cut[24] = 4
	cut[16], cut[17], cut[18], cut[19], cut[20], cut[21] = 0, 0x40, 0, 0, 0, 0
	check("cut to 4 blocks, the header changed to say so", cut, w.Gen)
	check("grown by a byte", append(bytes.Clone(good), 0), w.Gen)
	check("grown by a block", append(bytes.Clone(good), block(good, 1)...), w.Gen)
	b := bytes.Clone(good)
	copy(b, again[:waitsHeader3])
	check("the header of another WAITS of the generation", b, w.Gen)
	check("the WAITS before, opened for this generation", older, w.Gen)
	b = bytes.Clone(older)
	b[56]++ // its header says this generation; its blocks were sealed for the one before
	check("the WAITS before, its header's generation changed", b, w.Gen)
	check("opened for the next generation", good, w.Gen+1)
	// The old whole-file sealing, damaged anywhere, does not unseal.
	old, err := s.SealStoreFile(table, record.PlaceWaits, w.Gen)
	if err != nil {
		t.Fatal(err)
	}
	old[rng.IntN(len(old))] ^= 1 << rng.IntN(8)
	if _, err := UnsealWaits("WAITS", old, s, w.Gen); err == nil {
		t.Fatal("a WAITS sealed whole, damaged: unsealed")
	}
}

// FuzzOpenSealedWaits: any bytes open and read, or fail with a
// corruption error; never a panic.
func FuzzOpenSealedWaits(f *testing.F) {
	s := testSealer(f)
	for _, n := range []int{1, 300} {
		b, err := SealWaits(bigWaits(n).Marshal(), s, 7)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	f.Fuzz(func(t *testing.T, b []byte) {
		tb, err := openSealed(b, s, 7)
		if err == nil {
			_, err = readTable(tb, rng)
		}
		var ce *record.CorruptionError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("not a corruption error: %v", err)
		}
		UnsealWaits("WAITS", b, s, 7)
	})
}
