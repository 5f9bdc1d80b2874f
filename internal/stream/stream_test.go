package stream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// logSource is a Source over a real wal.Log: the records decoded in
// order, the data read back by position.
type logSource struct {
	t   testing.TB
	log *wal.Log
}

func (s logSource) Scan(fn func(*record.Record) error) (wal.Pos, error) {
	rd, err := s.log.NewReader(wal.Pos{})
	if err != nil {
		return wal.Pos{}, err
	}
	end := s.log.End()
	for rd.Next() {
		var r record.Record
		if err := (&record.Decoder{}).Decode(rd.Record(), rd.Pos(), "seg", &r); err != nil {
			return wal.Pos{}, err
		}
		if !r.Pos.Less(end) {
			break
		}
		if err := fn(&r); err != nil {
			return wal.Pos{}, err
		}
	}
	return end, rd.Err()
}

func (s logSource) Data(pos wal.Pos) ([]byte, error) {
	raw, err := s.log.ReadAt(pos)
	if err != nil {
		return nil, err
	}
	var r record.Record
	if err := (&record.Decoder{}).Decode(raw, pos, "seg", &r); err != nil {
		return nil, err
	}
	return append([]byte{}, r.Chunk...), nil
}

func openLog(t testing.TB, fs vfs.FS) *wal.Log {
	t.Helper()
	l, err := wal.Open("log", &wal.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// writer appends chunks the way the engine does.
func appendChunk(t testing.TB, x *Index, l *wal.Log, run, name string, seq, a uint64, data string) uint64 {
	t.Helper()
	off, err := x.Append(run, name, seq, a, func(off uint64) (*wal.Waiter, error) {
		return l.AppendAsync(record.AppendStreamChunk(nil, run, seq, a, name, off, []byte(data))), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return off
}

func readAll(t testing.TB, x *Index, run, name string, from uint64) []Chunk {
	t.Helper()
	var out []Chunk
	for {
		b, err := x.Read(run, name, from, 1000, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Chunks) == 0 {
			return out
		}
		out = append(out, b.Chunks...)
		from = b.Next
	}
}

// TestStatuses: the statuses of attempts as the engine's hooks and a
// reload from the log both see them: a crashed attempt abandoned by the
// next one's chunk, a failed one, an abandon record, a commit.
func TestStatuses(t *testing.T) {
	fs := vfs.NewMem()
	l := openLog(t, fs)
	x := New(logSource{t, l})
	ctx := context.Background()
	sync := func() {
		if _, err := l.Append(ctx, record.AppendStreamAbandon(nil, "zz", 1, 1)); err != nil { // any record: a group commit
			t.Fatal(err)
		}
	}
	appendChunk(t, x, l, "r", "tok", 1, 1, "a") // attempt 1 of seq 1 ...
	appendChunk(t, x, l, "r", "tok", 1, 2, "b") // ... crashed: attempt 2 streams
	sync()
	if _, err := l.Append(ctx, record.AppendFail(nil, "r", 1, "boom")); err != nil {
		t.Fatal(err)
	}
	x.Failed("r", 1)
	appendChunk(t, x, l, "r", "tok", 1, 3, "c")
	sync()
	// Attempt 4 appends nothing and commits: the engine writes an abandon.
	a, ok, err := x.Abandoning("r", 1)
	if err != nil || !ok || a != 3 {
		t.Fatalf("Abandoning = %d, %v; want 3, true", a, ok)
	}
	l.AppendAsync(record.AppendStreamAbandon(nil, "r", 1, 3))
	x.Abandoned("r", 1, 3)
	pos, err := l.Append(ctx, []byte{byte(record.KindAtom)}) // not decodable: the index does not reload here
	if err != nil {
		t.Fatal(err)
	}
	x.Committed("r", 1, 0, pos)
	appendChunk(t, x, l, "r", "tok", 2, 1, "d")
	appendChunk(t, x, l, "r", "log", 2, 1, "e")
	sync()
	x.Committed("r", 2, 1, wal.Pos{Segment: 1 << 40})
	want := []string{"a/1/1/abandoned", "b/1/2/failed", "c/1/3/abandoned", "d/2/1/committed"}
	check := func(x *Index) {
		got := readAll(t, x, "r", "tok", 0)
		if len(got) != len(want) {
			t.Fatalf("read %d chunks, want %d", len(got), len(want))
		}
		for i, c := range got {
			if s := fmt.Sprintf("%s/%d/%d/%v", c.Data, c.Seq, c.Attempt, c.Status); s != want[i] || c.Offset != uint64(i) {
				t.Fatalf("chunk %d is %s at offset %d, want %s", i, s, c.Offset, want[i])
			}
		}
	}
	check(x)
	if infos, _ := x.Streams("r"); len(infos) != 2 || infos[0].Name != "log" || infos[1].Chunks != 4 {
		t.Fatalf("Streams = %+v", infos)
	}
	_ = l
}

// TestReadWaits: a reader at the tail waits until the chunk is durable,
// and sees the stream's end.
func TestReadWaits(t *testing.T) {
	l := openLog(t, vfs.NewMem())
	x := New(logSource{t, l})
	got := make(chan Batch, 1)
	go func() {
		b, err := x.Wait(context.Background(), nil, "r", "s", 0, 10, 1<<20)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	appendChunk(t, x, l, "r", "s", 1, 1, "hello")
	b := <-got
	if len(b.Chunks) != 1 || string(b.Chunks[0].Data) != "hello" || b.Next != 1 {
		t.Fatalf("waited for %+v", b)
	}
	x.Gone(record.KindEnd, "r")
	b, err := x.Wait(context.Background(), nil, "r", "s", 1, 10, 1<<20)
	if err != nil || !b.Ended || len(b.Chunks) != 0 {
		t.Fatalf("after the end: %+v, %v", b, err)
	}
	if st := x.Status("r", 1, 1); st != Abandoned {
		t.Fatalf("the open attempt of an ended run is %v", st)
	}
}

// TestCrashResume: a log cut at random points (the writer's crash with
// appends in flight); a reader that read up to offset n before the crash
// and resumes from n after reopening never sees a gap or a repeat, and
// the chunks after the crash continue the offsets. Prints its seed.
func TestCrashResume(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	for round := 0; round < 20; round++ {
		fs := vfs.NewCrashableMem()
		l := openLog(t, fs)
		x := New(logSource{t, l})
		var seen []string
		next := uint64(0)
		n := 1 + rng.IntN(40)
		for i := 0; i < n; i++ {
			appendChunk(t, x, l, "r", "s", 1, 1, fmt.Sprintf("c%d", i))
			if rng.IntN(4) == 0 {
				for _, c := range readAll(t, x, "r", "s", next) {
					seen = append(seen, string(c.Data))
					next = c.Offset + 1
				}
			}
		}
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rand.New(rand.NewPCG(seed, uint64(round)))})
		_ = l.Close()
		l2 := openLog(t, crashed)
		x2 := New(logSource{t, l2})
		// The chunks read before the crash are there, at their offsets.
		all := readAll(t, x2, "r", "s", 0)
		if uint64(len(all)) < next {
			t.Fatalf("round %d: %d chunks after the crash, the reader had read %d", round, len(all), next)
		}
		for i, s := range seen {
			if string(all[i].Data) != s {
				t.Fatalf("round %d: offset %d is %q after the crash, %q before", round, i, all[i].Data, s)
			}
		}
		// The retry appends after what survived; the reader resumes.
		appendChunk(t, x2, l2, "r", "s", 1, 2, "retry")
		for len(seen) == 0 || seen[len(seen)-1] != "retry" {
			b, err := x2.Wait(context.Background(), nil, "r", "s", next, 1000, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range b.Chunks {
				if c.Offset != next {
					t.Fatalf("round %d: resumed at offset %d, got %d", round, next, c.Offset)
				}
				seen = append(seen, string(c.Data))
				next++
			}
		}
		if seen[len(seen)-1] != "retry" || uint64(len(seen)) != uint64(len(all))+1 {
			t.Fatalf("round %d: read %v", round, seen)
		}
		var ck Checker
		if _, err := (logSource{t, l2}).Scan(func(r *record.Record) error {
			if r.Kind == record.KindStreamChunk && ck.runs == nil {
				ck.Note(&record.Record{Kind: record.KindRun, Run: "r"})
			}
			if why := ck.Note(r); why != "" {
				return fmt.Errorf("%v: %s", r.Pos, why)
			}
			return nil
		}); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		_ = l2.Close()
	}
}

// followReader is a Reader whose state the test sets.
type followReader struct {
	live  error
	ended bool
	stop  chan struct{}
}

func (r *followReader) Live() error                        { return r.live }
func (r *followReader) Ended() bool                        { return r.ended }
func (r *followReader) Stopping() (<-chan struct{}, error) { return r.stop, ErrStopped }

// TestFollow: Follow returns chunks once durable, waits at the tail when
// asked, ends an ended run's empty stream, and stops on the reader's
// error, ctx's end or the store's close.
func TestFollow(t *testing.T) {
	ctx := context.Background()
	l := openLog(t, vfs.NewMem())
	x := New(logSource{t, l})
	rd := &followReader{stop: make(chan struct{})}
	if b, err := x.Follow(ctx, rd, "r", "s", 0, 10, 1<<20, false); err != nil || len(b.Chunks) != 0 || b.Ended {
		t.Fatalf("an empty stream without wait: %+v, %v", b, err)
	}
	got := make(chan Batch, 1)
	go func() {
		b, err := x.Follow(ctx, rd, "r", "s", 0, 10, 1<<20, true)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	appendChunk(t, x, l, "r", "s", 1, 1, "hello")
	if b := <-got; len(b.Chunks) != 1 || string(b.Chunks[0].Data) != "hello" || b.Next != 1 {
		t.Fatalf("waited for %+v", b)
	}
	// The store closes under a waiting read.
	errc := make(chan error, 1)
	go func() {
		_, err := x.Follow(ctx, rd, "r", "s", 1, 10, 1<<20, true)
		errc <- err
	}()
	close(rd.stop)
	if err := <-errc; err != ErrStopped {
		t.Fatalf("a read waiting when the store closed: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := x.Follow(cctx, &followReader{stop: make(chan struct{})}, "r", "s", 1, 10, 1<<20, true); err != context.Canceled {
		t.Fatalf("a cancelled read: %v", err)
	}
	gone := fmt.Errorf("run deleted")
	if _, err := x.Follow(ctx, &followReader{live: gone}, "r", "s", 0, 10, 1<<20, true); err != gone {
		t.Fatalf("a read of a run that is gone: %v", err)
	}
	// A run that ended before the read: its empty tail is the end, though
	// the index has not learnt of the end yet.
	b, err := x.Follow(ctx, &followReader{ended: true}, "r", "s", 1, 10, 1<<20, true)
	if err != nil || !b.Ended || len(b.Chunks) != 0 || b.Next != 1 {
		t.Fatalf("the tail of an ended run: %+v, %v", b, err)
	}
}
