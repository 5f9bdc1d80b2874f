package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/go-cmp/cmp"
)

// opCounter counts the mutating filesystem operations that go through it.
type opCounter struct {
	syncs, creates, writes, renames, removes atomic.Int64
}

func (c *opCounter) wrap(fs vfs.FS) vfs.FS {
	return errorfs.Wrap(fs, errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			c.syncs.Add(1)
		case errorfs.OpCreate, errorfs.OpMkdirAll, errorfs.OpLink:
			c.creates.Add(1)
		case errorfs.OpFileWrite, errorfs.OpFileWriteAt:
			c.writes.Add(1)
		case errorfs.OpRename, errorfs.OpReuseForWrite:
			c.renames.Add(1)
		case errorfs.OpRemove, errorfs.OpRemoveAll:
			c.removes.Add(1)
		}
		return nil
	}))
}

func (c *opCounter) String() string {
	return fmt.Sprintf("%d syncs, %d creates, %d writes, %d renames, %d removes",
		c.syncs.Load(), c.creates.Load(), c.writes.Load(), c.renames.Load(), c.removes.Load())
}

func listDir(t testing.TB, fs vfs.FS) []string {
	t.Helper()
	names, err := fs.List("wal")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// TestReopenResumes reopens a log many times: without writes it must not
// change the disk (no write, creation, rename or removal, the files
// byte-identical) and syncs once, the segment it resumes; with writes in
// between, every session appends to the same segment after the previous
// session's last record.
func TestReopenResumes(t *testing.T) {
	mem := vfs.NewMem()
	ctx := context.Background()
	const segSize = 64 << 10
	l := mustOpen(t, mem, Options{SegmentSize: segSize})
	var want [][]byte
	var wantPos []Pos
	for i := range 10 {
		r := rec(i, 100+i)
		p, err := l.Append(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		want, wantPos = append(want, r), append(wantPos, p)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files := []string{segmentName(1)}
	if got := listDir(t, mem); !slices.Equal(got, files) {
		t.Fatalf("files after the first session: %v, want %v (no spare while the segment is nearly empty)", got, files)
	}
	before := snapshotFS(t, mem)
	for i := range 25 {
		var c opCounter
		l := mustOpen(t, c.wrap(mem), Options{SegmentSize: segSize})
		ri := l.Recovery()
		if !ri.Resumed || ri.ZeroedBytes != 0 || ri.Tail != l.End() || ri.Segments != 1 {
			t.Fatalf("reopen %d: recovery %+v, End %v", i, ri, l.End())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if c.syncs.Load() != 1 || c.creates.Load()+c.writes.Load()+c.renames.Load()+c.removes.Load() != 0 {
			t.Fatalf("reopen %d without writes: %s, want 1 sync and nothing else", i, &c)
		}
		if got := listDir(t, mem); !slices.Equal(got, files) {
			t.Fatalf("reopen %d: files %v, want %v", i, got, files)
		}
		after := snapshotFS(t, mem)
		if len(after) != len(before) {
			t.Fatalf("reopen %d: %d files, want %d", i, len(after), len(before))
		}
		for n, b := range before {
			if !bytes.Equal(after[n], b) {
				t.Fatalf("reopen %d changed %s", i, n)
			}
		}
	}
	// Sessions that write: each continues where the previous one ended.
	for s := range 20 {
		l := mustOpen(t, mem, Options{SegmentSize: segSize})
		end := l.End()
		if end != wantPos[len(wantPos)-1].next(want[len(want)-1]) {
			t.Fatalf("session %d starts at %v, the last record ends at %v", s, end, wantPos[len(wantPos)-1].next(want[len(want)-1]))
		}
		for i := range 3 {
			r := rec(1000*s+i, 50*i)
			p, err := l.Append(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if p.Segment != 1 {
				t.Fatalf("session %d appended to segment %d", s, p.Segment)
			}
			want, wantPos = append(want, r), append(wantPos, p)
		}
		if st := l.Stats(); st.Rotations != 0 || st.Segments != 1 {
			t.Fatalf("session %d: %+v", s, st)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := listDir(t, mem); !slices.Equal(got, files) {
		t.Fatalf("files after 20 writing sessions: %v, want %v", got, files)
	}
	l = mustOpen(t, mem, Options{SegmentSize: segSize, ReadOnly: true})
	got, gotPos := readAll(t, l)
	l.Close()
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("records (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantPos, gotPos); d != "" {
		t.Fatalf("positions (-want +got):\n%s", d)
	}
}

// next is the position after the record r that starts at p.
func (p Pos) next(r []byte) Pos { return Pos{p.Segment, p.Offset + recordSpan(len(r))} }

// TestReopenRotatesWhenFull: a newest segment without room for one more
// (minimal) record is sealed and a new one begins, zero-filled.
func TestReopenRotatesWhenFull(t *testing.T) {
	mem := vfs.NewMem()
	ctx := context.Background()
	l := mustOpen(t, mem, Options{SegmentSize: 4 << 10})
	// Leave exactly room for the seal: no minimal record fits.
	big := make([]byte, 4<<10-SegmentHeaderSize-sealSpan-RecordHeaderSize)
	if _, err := l.Append(ctx, big); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = mustOpen(t, mem, Options{SegmentSize: 4 << 10})
	defer l.Close()
	if ri := l.Recovery(); ri.Resumed {
		t.Fatalf("a full segment was resumed: %+v", ri)
	}
	segs := l.Segments()
	if len(segs) != 2 || !segs[0].Sealed || segs[1].Sealed || l.End() != (Pos{2, SegmentHeaderSize}) {
		t.Fatalf("segments %+v, End %v", segs, l.End())
	}
	fi, err := mem.Stat("wal/" + segmentName(2))
	if err != nil || fi.Size() != 4<<10 {
		t.Fatalf("the segment activated at Open is not zero-filled: %v %v", fi, err)
	}
	got, _ := readAll(t, l)
	if len(got) != 1 || !bytes.Equal(got[0], big) {
		t.Fatalf("read %d records", len(got))
	}
}

// TestNewLogZeroFilled: a brand-new log's first segment has its full size
// before the first append (its fdatasyncs never extend the file), and the
// spare is prepared only once the active segment is half full.
func TestNewLogZeroFilled(t *testing.T) {
	mem := vfs.NewMem()
	ctx := context.Background()
	const segSize = 16 << 10
	l := mustOpen(t, mem, Options{SegmentSize: segSize})
	defer l.Close()
	size := func() int64 {
		fi, err := mem.Stat("wal/" + segmentName(1))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	if s := size(); s != segSize {
		t.Fatalf("new log's first segment is %d bytes, want %d", s, segSize)
	}
	for l.End().Offset < segSize/2-600 {
		if _, err := l.Append(ctx, rec(1, 500)); err != nil {
			t.Fatal(err)
		}
		if got := listDir(t, mem); !slices.Equal(got, []string{segmentName(1)}) {
			t.Fatalf("at %v (under half full): files %v", l.End(), got)
		}
	}
	if s := size(); s != segSize {
		t.Fatalf("the first segment changed size: %d", s)
	}
	for l.End().Offset < segSize/2 {
		if _, err := l.Append(ctx, rec(2, 500)); err != nil {
			t.Fatal(err)
		}
	}
	// The owner starts the spare after the write that crossed half. The
	// deadline only bounds a hang: a busy machine may take seconds.
	deadline := time.Now().Add(time.Minute)
	for !l.spareReady() {
		if time.Now().After(deadline) {
			t.Fatalf("no spare prepared after the segment passed half full: %v", listDir(t, mem))
		}
		time.Sleep(time.Millisecond)
	}
}

// TestResumeZeroesStaleBytes writes, past the valid tail of the newest
// segment, what a write that never became durable can leave there, and
// checks that a writable Open zeroes it before resuming: new records of the
// same sizes, which end exactly where a stale record starts, must never make
// it part of the log.
func TestResumeZeroesStaleBytes(t *testing.T) {
	seg := segIDBytes(1)
	for _, tc := range []struct {
		name string
		// stale returns the bytes to place at the tail, given the synced
		// mark the lost write carried.
		stale func(synced uint32) []byte
		torn  int   // records counted as torn
		fill  []int // sizes of new records that end where a stale valid record starts
	}{
		{"lost first block", func(s uint32) []byte {
			b := appendRecord(nil, seg, recTypeLast, s, rec(1, 100))
			b = appendRecord(b, seg, recTypeLast, s, rec(2, 60))
			clear(b[:recordSpan(100)]) // the first record's blocks never reached the disk
			return b
		}, 0, []int{100}},
		{"torn payload", func(s uint32) []byte {
			b := appendRecord(nil, seg, recTypeLast, s, rec(1, 100))
			b = appendRecord(b, seg, recTypeLast, s, rec(2, 60))
			b[RecordHeaderSize+50] ^= 0xff
			return b
		}, 1, []int{100}},
		{"unfinished batch", func(s uint32) []byte {
			b := appendRecord(nil, seg, recTypeMore, s, rec(1, 100))
			n := len(b)
			b = appendRecord(b, seg, recTypeLast, s, rec(3, 30))
			b = appendRecord(b, seg, recTypeLast, s, rec(2, 60))
			clear(b[n : n+int(recordSpan(30))]) // the batch's last record was lost
			return b
		}, 1, []int{100, 30}},
		{"garbage after a zero header", func(s uint32) []byte {
			b := make([]byte, 300)
			for i := 200; i < len(b); i++ {
				b[i] = byte(i)
			}
			return b
		}, 0, []int{200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			ctx := context.Background()
			l := mustOpen(t, mem, Options{SegmentSize: 16 << 10})
			var acked [][]byte
			var last Pos
			for i := range 5 {
				r := rec(100+i, 80)
				p, err := l.Append(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				acked, last = append(acked, r), p
			}
			l.Close()
			tail := last.next(acked[len(acked)-1])
			stale := tc.stale(uint32(tail.Offset))
			f, err := mem.OpenReadWrite("wal/"+segmentName(1), vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(bytes.Clone(stale), tail.Offset); err != nil {
				t.Fatal(err)
			}
			f.Close()

			l = mustOpen(t, mem, Options{SegmentSize: 16 << 10})
			ri := l.Recovery()
			end := tail.Offset + int64(len(bytes.TrimRight(stale, "\x00")))
			if !ri.Resumed || ri.Tail != tail || ri.TornRecords != tc.torn || ri.ZeroedBytes != end-tail.Offset {
				t.Fatalf("recovery %+v; want resumed at %v, %d torn records, %d bytes zeroed", ri, tail, tc.torn, end-tail.Offset)
			}
			b := snapshotFS(t, mem)[segmentName(1)]
			if !allZero(b[tail.Offset:]) {
				t.Fatalf("stale bytes left past the tail at %d", tail.Offset+int64(bytes.IndexFunc(b[tail.Offset:], func(r rune) bool { return r != 0 })))
			}
			// New records that end exactly where a stale record starts: had
			// it not been zeroed, the next recovery would read it as theirs.
			for i, n := range tc.fill {
				r := rec(200+i, n)
				p, err := l.Append(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				acked = append(acked, r)
				if i == 0 && p != tail {
					t.Fatalf("first record after resuming at %v, want %v", p, tail)
				}
			}
			l.Close()
			for _, ro := range []bool{true, false} {
				l = mustOpen(t, mem, Options{SegmentSize: 16 << 10, ReadOnly: ro})
				got, _ := readAll(t, l)
				ri := l.Recovery()
				l.Close()
				sameRecs(t, "after resuming over stale bytes", acked, got)
				if ri.TornBytes != 0 || ri.ZeroedBytes != 0 {
					t.Fatalf("reopen (read-only %v) after writing over the zeroed tail: %+v", ro, ri)
				}
			}
		})
	}
}

// TestResumeSyncedMarks checks the synced mark of the first record written
// after a resume: Open synced the segment (clean tail) or zeroed and synced
// what lay past the tail (torn tail), so it is the tail itself; never more,
// which would vouch for bytes past the tail, and under NoSync, where nothing
// was synced, the largest mark recovery read.
func TestResumeSyncedMarks(t *testing.T) {
	mem := vfs.NewMem()
	ctx := context.Background()
	l := mustOpen(t, mem, Options{SegmentSize: 16 << 10})
	var last Pos
	var err error
	for i := range 4 {
		if last, err = l.Append(ctx, rec(i, 200)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	markAt := func(p Pos) uint32 {
		b := snapshotFS(t, mem)[segmentName(p.Segment)]
		return binary.LittleEndian.Uint32(b[p.Offset+12:])
	}
	prevMark := markAt(last)

	l = mustOpen(t, mem, Options{SegmentSize: 16 << 10, NoSync: true})
	p, err := l.Append(ctx, rec(9, 20))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if m := markAt(p); m != prevMark {
		t.Fatalf("after a NoSync resume at %v the first record's synced mark is %d, want the last mark read, %d", p, m, prevMark)
	}
	l = mustOpen(t, mem, Options{SegmentSize: 16 << 10})
	clean := l.End()
	p, err = l.Append(ctx, rec(10, 20))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if p != clean || markAt(p) != uint32(clean.Offset) {
		t.Fatalf("after a clean resume the first record is at %v with synced mark %d, want %v and %d", p, markAt(p), clean, clean.Offset)
	}

	// A torn tail: the record after p is cut.
	f, _ := mem.OpenReadWrite("wal/"+segmentName(1), vfs.WriteCategoryUnspecified)
	torn := appendRecord(nil, segIDBytes(1), recTypeLast, uint32(p.Offset), rec(11, 300))
	tail := p.next(rec(10, 20))
	if _, err := f.WriteAt(torn[:100], tail.Offset); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l = mustOpen(t, mem, Options{SegmentSize: 16 << 10})
	if ri := l.Recovery(); ri.TornRecords != 1 || ri.Tail != tail {
		t.Fatalf("recovery %+v", ri)
	}
	q, err := l.Append(ctx, rec(12, 20))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if q != tail || markAt(q) != uint32(tail.Offset) {
		t.Fatalf("after a torn resume the first record is at %v with synced mark %d, want %v and %d", q, markAt(q), tail, tail.Offset)
	}
}

// killSwitch makes every filesystem operation fail from kill on, like the
// calls a process would make after a SIGKILL: what it wrote but did not sync
// stays in the (crashable) filesystem's unsynced data, as in a page cache.
type killSwitch struct{ dead atomic.Bool }

var errKilled = errors.New("process killed")

func (k *killSwitch) wrap(fs vfs.FS) vfs.FS {
	return errorfs.Wrap(fs, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if k.dead.Load() {
			return errKilled
		}
		return nil
	}))
}

// TestKillResumePowerLoss: a process writes records it never syncs and is
// killed; the next one resumes after them (they are valid, in the page
// cache), appends more and is killed before its fdatasync too; then the
// power fails, keeping any subset of the unsynced blocks. Recovery must find
// every acknowledged record, nothing never appended, and no corruption: no
// synced mark may vouch for bytes that were not durable.
func TestKillResumePowerLoss(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	trials := 200
	if testing.Short() {
		trials = 60
	}
	for trial := range trials {
		mem := vfs.NewCrashableMem()
		ctx := context.Background()
		l := mustOpen(t, mem, Options{SegmentSize: 64 << 10})
		var acked [][]byte
		for i := range 3 {
			r := rec(i, 1000)
			if _, err := l.Append(ctx, r); err != nil {
				t.Fatal(err)
			}
			acked = append(acked, r)
		}
		l.Close()
		appended := map[string]bool{}
		for _, r := range acked {
			appended[string(r)] = true
		}
		// Two processes, each killed after its write and before its sync.
		for p := range 2 {
			var k killSwitch
			var armed atomic.Bool
			fs := errorfs.Wrap(k.wrap(mem), errorfs.InjectorFunc(func(op errorfs.Op) error {
				if armed.Load() && op.Kind == errorfs.OpFileSyncData && op.Path == "wal/"+segmentName(1) {
					k.dead.Store(true) // killed between write and fdatasync
					return errKilled
				}
				return nil
			}))
			l := mustOpen(t, fs, Options{SegmentSize: 64 << 10})
			armed.Store(true)
			if p == 1 && l.Recovery().Tail.Offset <= SegmentHeaderSize+3*recordSpan(1000) {
				t.Fatalf("trial %d: the second process did not resume after the first one's unsynced records: %+v", trial, l.Recovery())
			}
			recs := [][]byte{rec(10*p+10, 3000+rng.IntN(6000)), rec(10*p+11, rng.IntN(5000))}
			for _, r := range recs {
				appended[string(r)] = true
			}
			if _, err := l.AppendBatch(ctx, recs); !errors.Is(err, errKilled) {
				t.Fatalf("trial %d: append in a killed process: %v", trial, err)
			}
			l.Close()
		}
		clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rand.New(rand.NewPCG(rng.Uint64(), 0))})
		l = mustOpen(t, clone, Options{SegmentSize: 64 << 10})
		got, _ := readAll(t, l) // fails the test on a corruption error
		l.Close()
		if len(got) < len(acked) {
			t.Fatalf("trial %d: %d records, %d acknowledged", trial, len(got), len(acked))
		}
		sameRecs(t, fmt.Sprintf("trial %d, acknowledged", trial), acked, got[:len(acked)])
		for _, r := range got {
			if !appended[string(r)] {
				t.Fatalf("trial %d: a record that was never appended", trial)
			}
		}
	}
}

// TestTornResumeCrash: a crash leaves a torn tail (a write of several
// records cut at a random subset of its 4 KiB blocks); the next Open zeroes
// it and resumes, appends and acknowledges records of the same sizes as the
// lost ones (so that one may end exactly where a stale record starts), and
// then the power fails again with 0, 50 or 100 percent of the unsynced
// blocks kept. Every acknowledged record must be there, no record that the
// first recovery dropped may come back, nothing that was never appended may
// appear, and no corruption may be reported: the zeroed region and the
// first writes over it must never look durable.
func TestTornResumeCrash(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	trials := 150
	if testing.Short() {
		trials = 60
	}
	for _, pct := range []int{0, 50, 100} {
		tornSeen := 0
		for trial := range trials {
			what := fmt.Sprintf("unsynced=%d trial %d", pct, trial)
			mem := vfs.NewCrashableMem()
			ctx := context.Background()
			const segSize = 64 << 10
			l := mustOpen(t, mem, Options{SegmentSize: segSize})
			appended := map[string]bool{}
			var acked [][]byte
			id := 0
			next := func(n int) []byte {
				id++
				r := rec(id, n)
				appended[string(r)] = true
				return r
			}
			for range 1 + rng.IntN(5) {
				r := next(100 + rng.IntN(2000))
				if _, err := l.Append(ctx, r); err != nil {
					t.Fatal(err)
				}
				acked = append(acked, r)
			}
			l.Close()
			// A process writes several records in one write and dies before
			// its fdatasync; the power fails, keeping half of its blocks.
			var k killSwitch
			var armed atomic.Bool
			fs := errorfs.Wrap(k.wrap(mem), errorfs.InjectorFunc(func(op errorfs.Op) error {
				if armed.Load() && op.Kind == errorfs.OpFileSyncData {
					k.dead.Store(true)
					return errKilled
				}
				return nil
			}))
			l = mustOpen(t, fs, Options{SegmentSize: segSize, MinSyncInterval: time.Hour})
			if _, err := l.Append(ctx, next(8)); err != nil { // the first commit syncs at once
				t.Fatal(err)
			}
			acked = append(acked, rec(id, 8))
			armed.Store(true)
			var lost [][]byte
			var ws []*Waiter
			for range 3 + rng.IntN(8) {
				r := next(8 + rng.IntN(3000))
				lost = append(lost, r)
				ws = append(ws, l.AppendAsync(r))
			}
			l.Close() // cuts the MinSyncInterval wait short: one write, then the killed sync
			for _, w := range ws {
				if _, err := w.Wait(ctx); err == nil {
					t.Fatalf("%s: an append was acknowledged by a killed process", what)
				}
			}
			mem = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(rng.Uint64(), 0))})

			l = mustOpen(t, mem, Options{SegmentSize: segSize})
			if ri := l.Recovery(); ri.TornRecords > 0 || ri.ZeroedBytes > 0 {
				tornSeen++
			}
			first, _ := readAll(t, l)
			kept := map[string]bool{}
			for _, r := range first {
				kept[string(r)] = true
			}
			var dropped [][]byte
			for _, r := range lost {
				if !kept[string(r)] {
					dropped = append(dropped, r)
				}
			}
			// New records of the sizes of the first dropped ones, in order:
			// the last of them ends exactly where the next dropped record
			// started, which may still be there, valid, unless Open zeroed it.
			m := 0
			if len(dropped) > 0 {
				m = rng.IntN(len(dropped) + 1)
			}
			for _, d := range dropped[:m] {
				r := next(len(d))
				if _, err := l.Append(ctx, r); err != nil {
					t.Fatal(err)
				}
				acked = append(acked, r)
			}
			// Sometimes another append is in flight when the power fails.
			var w *Waiter
			if rng.IntN(2) == 0 {
				w = l.AppendAsync(next(rng.IntN(2500)))
			}
			mem = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(rng.Uint64(), 1))})
			if w != nil {
				w.Wait(ctx)
			}
			l.Close()

			l = mustOpen(t, mem, Options{SegmentSize: segSize})
			got, _ := readAll(t, l) // a corruption error fails here
			l.Close()
			seen := map[string]bool{}
			for _, r := range got {
				if !appended[string(r)] {
					t.Fatalf("%s: a record that was never appended", what)
				}
				seen[string(r)] = true
			}
			for i, r := range acked {
				if !seen[string(r)] {
					t.Fatalf("%s: acknowledged record %d of %d lost", what, i, len(acked))
				}
			}
			for _, r := range dropped {
				if seen[string(r)] {
					t.Fatalf("%s: a record the first recovery dropped came back", what)
				}
			}
		}
		if tornSeen < trials/4 {
			t.Errorf("unsynced=%d: only %d of %d trials resumed over a torn tail", pct, tornSeen, trials)
		}
		t.Logf("unsynced=%d: %d of %d trials resumed over a torn tail", pct, tornSeen, trials)
	}
}

// TestScanFromDurable: a reopen whose scan starts at a hint known durable
// and finds nothing past it resumes without an fdatasync; records found
// past the hint (written, never synced) are synced before the log is
// used, so they survive a power loss.
func TestScanFromDurable(t *testing.T) {
	mem := vfs.NewCrashableMem()
	ctx := context.Background()
	const segSize = 64 << 10
	l := mustOpen(t, mem, Options{SegmentSize: segSize})
	for i := range 10 {
		if _, err := l.Append(ctx, rec(i, 100+i)); err != nil {
			t.Fatal(err)
		}
	}
	hint := l.End()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		durable bool
		syncs   int64
	}{{true, 0}, {false, 1}} {
		var c opCounter
		l := mustOpen(t, c.wrap(mem), Options{SegmentSize: segSize, ScanFrom: hint, ScanFromDurable: tc.durable})
		if ri := l.Recovery(); !ri.Resumed || ri.ScanFrom != hint || ri.Tail != hint {
			t.Fatalf("durable hint %v: recovery %+v", tc.durable, ri)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if c.syncs.Load() != tc.syncs {
			t.Fatalf("durable hint %v, nothing past it: %s, want %d syncs", tc.durable, &c, tc.syncs)
		}
	}

	// A session that writes past the hint and never syncs.
	l = mustOpen(t, mem, Options{SegmentSize: segSize, ScanFrom: hint, NoSync: true})
	for i := 10; i < 15; i++ {
		if _, err := l.Append(ctx, rec(i, 100+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var c opCounter
	l = mustOpen(t, c.wrap(mem), Options{SegmentSize: segSize, ScanFrom: hint, ScanFromDurable: true})
	if c.syncs.Load() == 0 {
		t.Fatalf("records past a durable hint: resumed with %s, want them synced", &c)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	l.Close()
	l = mustOpen(t, crashed, Options{SegmentSize: segSize})
	defer l.Close()
	if recs, _ := readAll(t, l); len(recs) != 15 {
		t.Fatalf("after a power loss: %d records, want the 15 the reopen read", len(recs))
	}
}

// TestResumeZeroesStaleBytesPastTheScan plants nonzero bytes past a clean
// tail, as a write that never became durable leaves them: inside the
// bytes the tail scan read, past them (the scan reads readChunk at a
// time), and past maxUnsynced, where no write of the log can have reached.
// A writable reopen must zero the first two, to the last nonzero byte,
// and leave the third, and appends then read back whole.
func TestResumeZeroesStaleBytesPastTheScan(t *testing.T) {
	ctx := context.Background()
	const segSize = 2 << 20
	for _, tc := range []struct {
		name   string
		at     int64 // offset of the planted bytes past the tail
		zeroed bool
	}{
		{"in the scan's window", 1000, true},
		{"past the scan's window", readChunk + 1000, true},
		{"at the edge of maxUnsynced", maxUnsynced - 8, true},
		{"past maxUnsynced", maxUnsynced + 64, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			opts := Options{SegmentSize: segSize, InitialSegmentSize: segSize}
			l := mustOpen(t, mem, opts)
			var want [][]byte
			for i := range 5 {
				r := rec(i, 300)
				if _, err := l.Append(ctx, r); err != nil {
					t.Fatal(err)
				}
				want = append(want, r)
			}
			tail := l.End()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			name := mem.PathJoin("wal", segmentName(tail.Segment))
			planted := tail.Offset + tc.at
			f, err := mem.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte{0xa5, 0, 0x5a}, planted); err != nil {
				t.Fatal(err)
			}
			f.Close()

			l = mustOpen(t, mem, opts)
			ri := l.Recovery()
			wantZeroed := int64(0)
			if tc.zeroed {
				wantZeroed = planted + 3 - tail.Offset
			}
			if !ri.Resumed || ri.Tail != tail || ri.ZeroedBytes != wantZeroed {
				t.Fatalf("recovery %+v; want resumed at %v with %d bytes zeroed", ri, tail, wantZeroed)
			}
			r := rec(99, 300)
			if _, err := l.Append(ctx, r); err != nil {
				t.Fatal(err)
			}
			want = append(want, r)
			got, _ := readAll(t, l)
			if len(got) != len(want) {
				t.Fatalf("read back %d records, want %d", len(got), len(want))
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("record %d differs after the resume", i)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 3)
			g, err := mem.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if _, err := g.ReadAt(b, planted); err != nil {
				t.Fatal(err)
			}
			if stale := !bytes.Equal(b, make([]byte, 3)); stale == tc.zeroed {
				t.Fatalf("bytes at %d after the reopen: %x (zeroed expected: %v)", planted, b, tc.zeroed)
			}
		})
	}
}

// TestAtRest: a reopen that is told the whole log is durable (AtRest, the
// engine's clean-close mark) resumes the newest segment with no fsync at
// all, whether it holds records or none yet (which otherwise costs an
// fdatasync and a directory fsync); stale bytes past the tail are still
// zeroed and synced.
func TestAtRest(t *testing.T) {
	ctx := context.Background()
	const segSize = 64 << 10
	for _, records := range []int{0, 10} {
		mem := vfs.NewMem()
		l := mustOpen(t, mem, Options{SegmentSize: segSize})
		for i := range records {
			if _, err := l.Append(ctx, rec(i, 100+i)); err != nil {
				t.Fatal(err)
			}
		}
		tail := l.End()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		for _, atRest := range []bool{false, true} {
			var c opCounter
			l := mustOpen(t, c.wrap(mem), Options{SegmentSize: segSize, AtRest: atRest})
			if ri := l.Recovery(); !ri.Resumed || ri.Tail != tail {
				t.Fatalf("%d records, AtRest %v: recovery %+v, want resumed at %v", records, atRest, ri, tail)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			switch n := c.syncs.Load(); {
			case atRest && n != 0:
				t.Errorf("%d records, at rest: the reopen made %s, want none", records, &c)
			case !atRest && n == 0:
				t.Errorf("%d records, not at rest: the reopen made no sync, want the segment's (and, empty, the directory's)", records)
			}
		}
	}

	// Stale bytes past the tail are not at rest, whatever the caller says.
	mem := vfs.NewMem()
	l := mustOpen(t, mem, Options{SegmentSize: segSize})
	if _, err := l.Append(ctx, rec(1, 300)); err != nil {
		t.Fatal(err)
	}
	tail := l.End()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := mem.OpenReadWrite(mem.PathJoin("wal", segmentName(tail.Segment)), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xa5}, tail.Offset+100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var c opCounter
	l = mustOpen(t, c.wrap(mem), Options{SegmentSize: segSize, AtRest: true})
	defer l.Close()
	if ri := l.Recovery(); ri.ZeroedBytes != 101 || c.syncs.Load() == 0 {
		t.Fatalf("a stale byte past the tail, at rest: recovery %+v, %s; want 101 bytes zeroed and synced", ri, &c)
	}
}
