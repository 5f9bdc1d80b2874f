package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
)

func mustOpen(t testing.TB, fs vfs.FS, o Options) *Log {
	t.Helper()
	o.FS = fs
	l, err := Open("wal", &o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

// readAll returns every durable record from the start of the log.
func readAll(t testing.TB, l *Log) ([][]byte, []Pos) {
	t.Helper()
	r, err := l.NewReader(Pos{})
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	defer r.Close()
	var recs [][]byte
	var poss []Pos
	for r.Next() {
		recs = append(recs, bytes.Clone(r.Record()))
		poss = append(poss, r.Pos())
	}
	if err := r.Err(); err != nil {
		t.Fatalf("reader: %v", err)
	}
	return recs, poss
}

func rec(i int, size int) []byte {
	b := make([]byte, size)
	for j := range b {
		b[j] = byte(i*31 + j)
	}
	copy(b, fmt.Sprintf("rec-%d;", i))
	return b
}

func TestPos(t *testing.T) {
	for _, tc := range []struct {
		a, b Pos
		less bool
	}{
		{Pos{}, Pos{1, 40}, true},
		{Pos{1, 40}, Pos{1, 48}, true},
		{Pos{1, 48}, Pos{1, 40}, false},
		{Pos{1, 4000}, Pos{2, 40}, true},
		{Pos{2, 40}, Pos{2, 40}, false},
	} {
		if got := tc.a.Less(tc.b); got != tc.less {
			t.Errorf("%v.Less(%v) = %v, want %v", tc.a, tc.b, got, tc.less)
		}
	}
	if s := (Pos{3, 128}).String(); s != "3:128" {
		t.Errorf("String = %q", s)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		o  Options
		ok bool
	}{
		{Options{}, true},
		{Options{SegmentSize: MinSegmentSize}, true},
		{Options{SegmentSize: MinSegmentSize - 8}, false},
		{Options{SegmentSize: MaxSegmentSize + 8}, false},
		{Options{SegmentSize: MinSegmentSize + 3}, false},
		{Options{MinSyncInterval: -time.Second}, false},
		{Options{InitialSegmentSize: MinSegmentSize}, true},
		{Options{InitialSegmentSize: 1 << 20, SegmentSize: 64 << 10}, true},
		{Options{InitialSegmentSize: 6 << 10}, false},
		{Options{InitialSegmentSize: -4096}, false},
		{Options{InitialSegmentSize: MaxSegmentSize + 4096}, false},
	} {
		err := tc.o.validate()
		if (err == nil) != tc.ok {
			t.Errorf("validate(%+v) = %v, want ok=%v", tc.o, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadOptions) {
			t.Errorf("error %v is not ErrBadOptions", err)
		}
	}
	if _, err := Open("wal", &Options{FS: vfs.NewMem(), SegmentSize: 100}); !errors.Is(err, ErrBadOptions) {
		t.Errorf("Open with a bad SegmentSize: %v", err)
	}
}

func TestSegmentHeaderRoundTrip(t *testing.T) {
	var b [SegmentHeaderSize]byte
	encodeSegmentHeader(b[:], 7)
	if why := decodeSegmentHeader(b[:], 7); why != "" {
		t.Fatalf("valid header rejected: %s", why)
	}
	for _, tc := range []struct {
		name   string
		mutate func(b []byte) []byte
		want   uint64
	}{
		{"short", func(b []byte) []byte { return b[:20] }, 7},
		{"magic", func(b []byte) []byte { b[0] ^= 1; return b }, 7},
		{"crc", func(b []byte) []byte { b[33] ^= 1; return b }, 7},
		{"id", func(b []byte) []byte { return b }, 8},
		{"pad", func(b []byte) []byte { b[39] = 1; return b }, 7},
	} {
		c := b
		if why := decodeSegmentHeader(tc.mutate(c[:]), tc.want); why == "" {
			t.Errorf("%s: damaged header accepted", tc.name)
		}
	}
}

func TestRecordFraming(t *testing.T) {
	seg := segIDBytes(3)
	for _, n := range []int{0, 1, 7, 8, 9, 100, 4000} {
		payload := rec(n, n)
		b := appendRecord(nil, seg, recTypeLast, SegmentHeaderSize, payload)
		if int64(len(b)) != recordSpan(n) || len(b)%RecordAlign != 0 {
			t.Fatalf("n=%d: framed %d bytes, span %d", n, len(b), recordSpan(n))
		}
		rh, why := parseHeader(b, segSeed(&seg), SegmentHeaderSize, MaxSegmentSize)
		if why != "" || int(rh.length) != n || !payloadOK(b, segSeed(&seg), b[16:16+n], rh.crc) {
			t.Fatalf("n=%d: round trip failed: %q %+v", n, why, rh)
		}
		// The same bytes under another segment id never validate.
		other := segIDBytes(4)
		if _, why := parseHeader(b, segSeed(&other), SegmentHeaderSize, MaxSegmentSize); why == "" && payloadOK(b, segSeed(&other), b[16:16+n], rh.crc) {
			t.Fatalf("n=%d: record validates under another segment id", n)
		}
	}
}

func TestAppendReadReopen(t *testing.T) {
	fs := vfs.NewMem()
	l := mustOpen(t, fs, Options{SegmentSize: 8 << 10})
	ctx := context.Background()
	var want [][]byte
	var wantPos []Pos
	for i := range 100 {
		r := rec(i, i*13%700)
		p, err := l.Append(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		want, wantPos = append(want, r), append(wantPos, p)
	}
	batch := [][]byte{rec(1000, 10), rec(1001, 0), rec(1002, 300)}
	ps, err := l.AppendBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	want, wantPos = append(want, batch...), append(wantPos, ps...)
	w := l.AppendAsync(rec(2000, 50))
	<-w.Done()
	ps, err = w.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, wantPos = append(want, rec(2000, 50)), append(wantPos, ps...)
	for i := 1; i < len(wantPos); i++ {
		if !wantPos[i-1].Less(wantPos[i]) {
			t.Fatalf("positions not increasing: %v then %v", wantPos[i-1], wantPos[i])
		}
	}
	got, gotPos := readAll(t, l)
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("records differ (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantPos, gotPos); d != "" {
		t.Fatalf("positions differ:\n%s", d)
	}
	for i, p := range wantPos {
		b, err := l.ReadAt(p)
		if err != nil || !bytes.Equal(b, want[i]) {
			t.Fatalf("ReadAt(%v) = %q, %v", p, b, err)
		}
	}
	st := l.Stats()
	if st.Rotations == 0 || st.Records != int64(len(want)) || st.Syncs == 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.Append(ctx, []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}

	l = mustOpen(t, fs, Options{SegmentSize: 8 << 10})
	got, _ = readAll(t, l)
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("after reopen (-want +got):\n%s", d)
	}
	if ri := l.Recovery(); ri.TornBytes != 0 || ri.TornRecords != 0 {
		t.Fatalf("clean reopen found a torn tail: %+v", ri)
	}
	// A reader from the middle, and from End.
	r, err := l.NewReader(wantPos[50])
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r.Next() {
		if !bytes.Equal(r.Record(), want[50+n]) {
			t.Fatalf("record %d differs", 50+n)
		}
		n++
	}
	if r.Err() != nil || n != len(want)-50 {
		t.Fatalf("read %d from the middle, err %v", n, r.Err())
	}
	r.Close()
	end := l.End()
	r, err = l.NewReader(end)
	if err != nil {
		t.Fatal(err)
	}
	if r.Next() {
		t.Fatal("reader at End found a record")
	}
	p, err := l.Append(ctx, []byte("tail"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Next() || string(r.Record()) != "tail" || r.Pos() != p {
		t.Fatalf("reader did not follow the log: %v %q", r.Err(), r.Record())
	}
	r.Close()
	if _, err := l.NewReader(Pos{wantPos[3].Segment, wantPos[3].Offset + 8}); !errors.Is(err, ErrBadPos) {
		t.Fatalf("NewReader inside a record: %v", err)
	}
	if _, err := l.ReadAt(Pos{1, 1 << 20}); !errors.Is(err, ErrBadPos) {
		t.Fatalf("ReadAt out of range: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestLimitsAndModes(t *testing.T) {
	fs := vfs.NewMem()
	ctx := context.Background()
	l := mustOpen(t, fs, Options{SegmentSize: 4 << 10})
	if _, err := l.Append(ctx, make([]byte, 4<<10)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized record: %v", err)
	}
	if _, err := l.AppendBatch(ctx, [][]byte{make([]byte, 2100), make([]byte, 2100)}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized batch: %v", err)
	}
	big := make([]byte, 4<<10-SegmentHeaderSize-sealSpan-RecordHeaderSize)
	if _, err := l.Append(ctx, big); err != nil {
		t.Fatalf("largest record: %v", err)
	}
	if ps, err := l.AppendBatch(ctx, nil); err != nil || len(ps) != 0 {
		t.Fatalf("empty batch: %v %v", ps, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	before := snapshotFS(t, fs)
	ro := mustOpen(t, fs, Options{ReadOnly: true, SegmentSize: 4 << 10})
	if _, err := ro.Append(ctx, []byte("x")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only append: %v", err)
	}
	if _, err := ro.RemoveBelow(ro.End()); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only RemoveBelow: %v", err)
	}
	got, _ := readAll(t, ro)
	if len(got) != 1 || !bytes.Equal(got[0], big) {
		t.Fatalf("read-only read %d records", len(got))
	}
	ro.Close()
	if d := cmp.Diff(before, snapshotFS(t, fs)); d != "" {
		t.Fatalf("read-only open changed the files:\n%s", d)
	}
}

// snapshotFS returns the name and contents of every file in "wal".
func snapshotFS(t testing.TB, fs vfs.FS) map[string][]byte {
	t.Helper()
	names, err := fs.List("wal")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, n := range names {
		f, err := fs.Open(fs.PathJoin("wal", n))
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		b := make([]byte, fi.Size())
		if _, err := readFull(f, b, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		m[n] = b
	}
	return m
}

func TestRemoveBelow(t *testing.T) {
	fs := vfs.NewMem()
	ctx := context.Background()
	l := mustOpen(t, fs, Options{SegmentSize: 4 << 10})
	var poss []Pos
	for i := range 60 {
		p, err := l.Append(ctx, rec(i, 200))
		if err != nil {
			t.Fatal(err)
		}
		poss = append(poss, p)
	}
	segs := l.Segments()
	if len(segs) < 3 || segs[len(segs)-1].Sealed || !segs[0].Sealed {
		t.Fatalf("segments %+v", segs)
	}
	cut := poss[30]
	n, err := l.RemoveBelow(cut)
	if err != nil || n != int(cut.Segment-segs[0].ID) {
		t.Fatalf("RemoveBelow(%v) = %d, %v", cut, n, err)
	}
	recs, _ := readAll(t, l)
	if len(recs) < 30 || !bytes.Equal(recs[len(recs)-1], rec(59, 200)) {
		t.Fatalf("after RemoveBelow read %d records", len(recs))
	}
	if _, err := l.ReadAt(poss[0]); !errors.Is(err, ErrBadPos) {
		t.Fatalf("ReadAt of a removed record: %v", err)
	}
	// Never the active segment.
	if _, err := l.RemoveBelow(Pos{1 << 40, 0}); err != nil {
		t.Fatal(err)
	}
	if s := l.Segments(); len(s) != 1 || s[0].Sealed {
		t.Fatalf("segments after removing all: %+v", s)
	}
	left, _ := readAll(t, l)
	l.Close()
	l = mustOpen(t, fs, Options{SegmentSize: 4 << 10})
	recs, _ = readAll(t, l)
	if d := cmp.Diff(left, recs); d != "" || len(recs) == 0 {
		t.Fatalf("reopen after RemoveBelow (-want +got):\n%s", d)
	}
	l.Close()
}

func TestConcurrentAppends(t *testing.T) {
	fs := vfs.NewMem()
	l := mustOpen(t, fs, Options{SegmentSize: 64 << 10})
	ctx := context.Background()
	const writers, each = 16, 200
	var wg sync.WaitGroup
	got := make([][]Pos, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r := rec(w*each+i, 64+(i%5)*50)
				if i%7 == 0 {
					ps, err := l.AppendBatch(ctx, [][]byte{r, r})
					if err != nil {
						t.Error(err)
						return
					}
					got[w] = append(got[w], ps[0])
					continue
				}
				p, err := l.Append(ctx, r)
				if err != nil {
					t.Error(err)
					return
				}
				got[w] = append(got[w], p)
			}
		}()
	}
	r, err := l.NewReader(Pos{})
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	n := 0
	for r.Next() {
		n++
	}
	r.Close()
	want := writers * (each + (each+6)/7)
	if r.Err() != nil || n != want {
		t.Fatalf("read %d records (want %d), err %v", n, want, r.Err())
	}
	for w := range writers {
		for i := 1; i < len(got[w]); i++ {
			if !got[w][i-1].Less(got[w][i]) {
				t.Fatalf("writer %d: positions out of order", w)
			}
		}
	}
	st := l.Stats()
	if st.Syncs >= st.Records {
		t.Logf("no batching observed: %+v", st)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAppendRacesClose has appends that write their own group (a context
// without Done), appends left to the owner (a cancellable context) and
// AppendAsync race Close: each either fails with ErrClosed or returns a
// position at which the record is found after a reopen, and no write
// happens after Close (the race detector sees Close read the segment).
func TestAppendRacesClose(t *testing.T) {
	for round := range 20 {
		fs := vfs.NewMem()
		l := mustOpen(t, fs, Options{SegmentSize: 64 << 10})
		cctx, cancel := context.WithCancel(context.Background())
		const writers, each = 6, 60
		var wg sync.WaitGroup
		var mu sync.Mutex
		acked := map[Pos][]byte{}
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					r := rec(round*1000+w*each+i, 40+i%3*100)
					var p Pos
					var err error
					switch w % 3 {
					case 0:
						p, err = l.Append(context.Background(), r)
					case 1:
						p, err = l.Append(cctx, r)
					default:
						var ps []Pos
						ps, err = l.AppendAsync(r).Wait(context.Background())
						if err == nil {
							p = ps[0]
						}
					}
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("round %d writer %d append %d: %v", round, w, i, err)
						return
					}
					mu.Lock()
					acked[p] = r
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Duration(round%5) * 100 * time.Microsecond)
		if err := l.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		wg.Wait()
		cancel()
		l = mustOpen(t, fs, Options{SegmentSize: 64 << 10})
		recs, poss := readAll(t, l)
		found := map[Pos][]byte{}
		for i, p := range poss {
			found[p] = recs[i]
		}
		for p, r := range acked {
			if !bytes.Equal(found[p], r) {
				t.Fatalf("round %d: record acknowledged at %v not found after reopen", round, p)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMinSyncInterval(t *testing.T) {
	fs := vfs.NewMem()
	l := mustOpen(t, fs, Options{MinSyncInterval: 2 * time.Millisecond, SegmentSize: 64 << 10})
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if _, err := l.Append(ctx, rec(w*100+i, 32)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if st := l.Stats(); st.Records != 160 {
		t.Fatalf("stats %+v", st)
	}
	l.Close()
}

func TestWaitContext(t *testing.T) {
	fs := vfs.NewMem()
	l := mustOpen(t, fs, Options{SegmentSize: 64 << 10})
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := l.AppendAsync([]byte("x"))
	<-w.Done() // the append itself is not cancelled
	if _, err := w.Wait(ctx); err != nil {
		t.Fatalf("Wait on a done waiter with a cancelled ctx: %v", err)
	}
	// A slow log: block the owner with a long MinSyncInterval.
	l2 := mustOpen(t, vfs.NewMem(), Options{MinSyncInterval: time.Hour, SegmentSize: 64 << 10})
	if _, err := l2.Append(context.Background(), []byte("first")); err != nil {
		t.Fatal(err)
	}
	w = l2.AppendAsync([]byte("second"))
	if _, err := w.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Wait(context.Background()); err != nil {
		t.Fatalf("Close did not flush the pending append: %v", err)
	}
}

// TestReaderFollowsRotations reads while the writer fills and seals
// segments under it: a segment the reader entered while it was active must
// be read to its seal once it is sealed.
func TestReaderFollowsRotations(t *testing.T) {
	fs := vfs.NewMem()
	l := mustOpen(t, fs, Options{SegmentSize: 4 << 10})
	defer l.Close()
	ctx := context.Background()
	r, err := l.NewReader(l.End())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for i := range 200 {
		if _, err := l.Append(ctx, rec(i, 100+i%300)); err != nil {
			t.Fatal(err)
		}
		if i%3 != 0 {
			continue
		}
		for r.Next() {
			if want := rec(n, 100+n%300); !bytes.Equal(r.Record(), want) {
				t.Fatalf("record %d differs at %v", n, r.Pos())
			}
			n++
		}
		if err := r.Err(); err != nil {
			t.Fatalf("after %d records: %v", n, err)
		}
	}
	for r.Next() {
		n++
	}
	if r.Err() != nil || n != 200 {
		t.Fatalf("read %d of 200, err %v", n, r.Err())
	}
	if st := l.Stats(); st.Rotations < 5 {
		t.Fatalf("only %d rotations", st.Rotations)
	}
}

// TestReadAtSizes reads records around ReadAt's first-read size (header and
// payload in one pread, or a second pread for the rest), in the active
// segment (bounded by the durable end) and in a sealed one.
func TestReadAtSizes(t *testing.T) {
	fs := vfs.NewMem()
	l := mustOpen(t, fs, Options{SegmentSize: 64 << 10})
	defer l.Close()
	ctx := context.Background()
	sizes := []int{0, 1, 100, readAtChunk - RecordHeaderSize - 1, readAtChunk - RecordHeaderSize,
		readAtChunk - RecordHeaderSize + 1, readAtChunk, 3 * readAtChunk, 20000}
	var poss []Pos
	for i, n := range sizes {
		p, err := l.Append(ctx, rec(i, n))
		if err != nil {
			t.Fatal(err)
		}
		poss = append(poss, p)
	}
	check := func(when string) {
		for i, n := range sizes {
			b, err := l.ReadAt(poss[i])
			if err != nil || !bytes.Equal(b, rec(i, n)) {
				t.Fatalf("%s: ReadAt of the %d-byte record at %v: %d bytes, %v", when, n, poss[i], len(b), err)
			}
		}
	}
	check("active segment")
	// Fill the segment so that it is sealed, then read the same records.
	for l.End().Segment == poss[0].Segment {
		if _, err := l.Append(ctx, rec(99, 5000)); err != nil {
			t.Fatal(err)
		}
	}
	check("sealed segment")
}
