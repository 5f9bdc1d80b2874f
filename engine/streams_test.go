package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

func streamOf(t testing.TB, r *Run, name string, from uint64) []StreamChunk {
	t.Helper()
	var out []StreamChunk
	for {
		b, err := r.ReadStream(ctx, name, from, nil)
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

func describe(cs []StreamChunk) string {
	s := ""
	for _, c := range cs {
		s += fmt.Sprintf("%d:%s@%d.%d=%v ", c.Offset, c.Data, c.Seq, c.Attempt, c.Status)
	}
	return s
}

// TestStreamAppendFollow: a reader following the tail gets each chunk
// once, in order, while the atom runs; the statuses move with the atom's
// commit and failure; the stream ends with the run; all of it as before
// after a reopen.
func TestStreamAppendFollow(t *testing.T) {
	mem := vfs.NewMem()
	opts := testOptions(mem)
	db := openTest(t, mem, opts)
	run, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan StreamChunk, 100)
	done := make(chan error, 1)
	go func() {
		from := uint64(0)
		for {
			b, err := run.ReadStream(ctx, "tok", from, &ReadStreamOptions{Wait: true})
			if err != nil {
				done <- err
				return
			}
			for _, c := range b.Chunks {
				got <- c
			}
			from = b.Next
			if b.Ended {
				done <- nil
				return
			}
		}
	}()
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if off, err := a.Append(ctx, "tok", []byte(fmt.Sprint("a", i))); err != nil || off != uint64(i) {
			t.Fatalf("append %d: offset %d, %v", i, off, err)
		}
	}
	// Seen before the commit: that is the point.
	for i := 0; i < 3; i++ {
		if c := <-got; c.Offset != uint64(i) || string(c.Data) != fmt.Sprint("a", i) || c.Status != ChunkOpen {
			t.Fatalf("followed %+v", c)
		}
	}
	if err := a.Fail(ctx, "retry"); err != nil {
		t.Fatal(err)
	}
	a, err = run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, "tok", []byte("b0")); err != nil {
		t.Fatal(err)
	}
	if err := a.FlushStreams(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("k", []byte("v"))); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, "tok", []byte("late")); !errors.Is(err, ErrAtomDone) {
		t.Fatalf("append after commit: %v", err)
	}
	if err := run.End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c := <-got; string(c.Data) != "b0" || c.Seq != 1 || c.Attempt != 2 {
		t.Fatalf("followed %+v", c)
	}
	want := "0:a0@1.1=failed 1:a1@1.1=failed 2:a2@1.1=failed 3:b0@1.2=committed "
	if s := describe(streamOf(t, run, "tok", 0)); s != want {
		t.Fatalf("stream %s, want %s", s, want)
	}
	db.Close()
	db2, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	run2, err := db2.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if s := describe(streamOf(t, run2, "tok", 0)); s != want {
		t.Fatalf("after reopen: stream %s, want %s", s, want)
	}
	b, err := run2.ReadStream(ctx, "tok", 4, &ReadStreamOptions{Wait: true})
	if err != nil || !b.Ended || len(b.Chunks) != 0 {
		t.Fatalf("the ended stream read %+v, %v", b, err)
	}
	if infos, err := run2.Streams(ctx); err != nil || len(infos) != 1 || infos[0].Chunks != 4 {
		t.Fatalf("Streams = %+v, %v", infos, err)
	}
}

// TestStreamPowerLoss: power cuts at random points of a run whose atoms
// append chunks; a reader that read up to offset n before the cut and
// resumes from n after it sees no gap and no repeat; the chunks of the
// attempt the cut stopped are abandoned, whether the retry appends or not;
// the store verifies. Prints its seed.
func TestStreamPowerLoss(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	for round := 0; round < rounds; round++ {
		for _, sealed := range []bool{false, true} {
			mem := vfs.NewCrashableMem()
			opts := testOptions(mem)
			if sealed {
				opts.Keyring = streamKeyring(t)
			}
			db, err := Open("store", opts)
			if err != nil {
				t.Fatal(err)
			}
			run, err := db.Run(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			var seen []string
			next := uint64(0)
			read := func(r *Run) {
				for _, c := range streamOf(t, r, "s", next) {
					if c.Offset != next {
						t.Fatalf("round %d: resumed at %d, got offset %d", round, next, c.Offset)
					}
					seen = append(seen, string(c.Data))
					next++
				}
			}
			atoms := 1 + rng.IntN(4)
			var cut *vfs.MemFS
			for i := 0; i < atoms; i++ {
				a, err := run.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for j := 0; j < 1+rng.IntN(20); j++ {
					if _, err := a.Append(ctx, "s", []byte(fmt.Sprintf("%d.%d", i, j))); err != nil {
						t.Fatal(err)
					}
					if rng.IntN(5) == 0 {
						read(run)
					}
				}
				if i == atoms-1 {
					// The cut: the last atom never commits.
					read(run)
					cut = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rand.New(rand.NewPCG(seed, uint64(round)))})
					break
				}
				if err := a.Commit(ctx, new(frame.Delta).Set("i", []byte(fmt.Sprint(i)))); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()
			o2 := *opts
			o2.FS = cut
			db2 := openTest(t, cut, &o2)
			run2, err := db2.Run(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			all := streamOf(t, run2, "s", 0)
			if uint64(len(all)) < next {
				t.Fatalf("round %d: %d chunks after the cut, the reader had read %d", round, len(all), next)
			}
			for i, s := range seen {
				if string(all[i].Data) != s {
					t.Fatalf("round %d: offset %d is %q after the cut, %q before", round, i, all[i].Data, s)
				}
			}
			// The retry: appends or not, then commits.
			a, err := run2.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			streamed := rng.IntN(2) == 0
			if streamed {
				if _, err := a.Append(ctx, "s", []byte("retry")); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Commit(ctx, new(frame.Delta).Set("retry", []byte("1"))); err != nil {
				t.Fatal(err)
			}
			read(run2)
			if streamed && seen[len(seen)-1] != "retry" {
				t.Fatalf("round %d: the retry's chunk not read: %v", round, seen)
			}
			for _, c := range streamOf(t, run2, "s", 0) {
				want := ChunkCommitted
				if c.Seq == a.Seq() && string(c.Data) != "retry" {
					want = ChunkAbandoned
				}
				if c.Status != want {
					t.Fatalf("round %d sealed %v: chunk %d %q of seq %d attempt %d is %v, want %v", round, sealed, c.Offset, c.Data, c.Seq, c.Attempt, c.Status, want)
				}
			}
		}
	}
}

func streamKeyring(t testing.TB) seal.Keyring {
	ring, err := seal.NewKeyring(map[string][]byte{"s": bytes.Repeat([]byte{0x5e}, seal.KeySize)}, "s")
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

// TestStreamVerifyCatches: verify reports a stream record that breaks a
// rule of streams (a forged record written past the engine), with where.
func TestStreamVerifyCatches(t *testing.T) {
	for _, c := range []struct {
		name, why string
		recs      func(run string) [][]byte
	}{
		{"gap", "offsets 1 to 1 are missing", func(run string) [][]byte {
			return [][]byte{record.AppendStreamChunk(nil, run, 2, 1, "s", 0, nil), record.AppendStreamChunk(nil, run, 2, 1, "s", 2, nil)}
		}},
		{"repeat", "again", func(run string) [][]byte {
			return [][]byte{record.AppendStreamChunk(nil, run, 2, 1, "s", 0, nil), record.AppendStreamChunk(nil, run, 2, 1, "s", 0, nil)}
		}},
		{"committed seq", "the run's next atom is seq 2", func(run string) [][]byte {
			return [][]byte{record.AppendStreamChunk(nil, run, 1, 1, "s", 0, nil)}
		}},
		{"attempt down", "after a chunk of attempt 2", func(run string) [][]byte {
			return [][]byte{record.AppendStreamChunk(nil, run, 2, 2, "s", 0, nil), record.AppendStreamChunk(nil, run, 2, 1, "t", 0, nil)}
		}},
		{"after fail", "after a fail or abandon record settled it", func(run string) [][]byte {
			return [][]byte{record.AppendStreamChunk(nil, run, 2, 1, "s", 0, nil), record.AppendFail(nil, run, 2, "x"), record.AppendStreamChunk(nil, run, 2, 1, "s", 1, nil)}
		}},
		{"abandon beyond", "abandons attempts up to 3", func(run string) [][]byte {
			return [][]byte{record.AppendStreamChunk(nil, run, 2, 1, "s", 0, nil), record.AppendStreamAbandon(nil, run, 2, 3)}
		}},
		{"no run", "creation record is not in the log", func(string) [][]byte {
			return [][]byte{record.AppendStreamChunk(nil, "ghost", 1, 1, "s", 0, nil)}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			opts := testOptions(mem)
			db, err := Open("store", opts)
			if err != nil {
				t.Fatal(err)
			}
			commitN(t, db, "r", 1)
			for _, rec := range c.recs("r") {
				if _, err := db.log.Append(ctx, rec); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()
			rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: true})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range rep.Failures {
				found = found || strings.Contains(f.String(), c.why)
			}
			if rep.OK || !found {
				t.Fatalf("verify: OK %v, failures %v; want one that says %q", rep.OK, rep.Failures, c.why)
			}
		})
	}
}

// streamRecorder is a recorder whose atom observers also take chunks.
type streamRecorder struct {
	*recorder
	chunks []StreamEvent
}

type streamAtomRecord struct {
	*atomRecord
	s *streamRecorder
}

func (r *streamRecorder) AtomBegun(ctx context.Context, ev AtomEvent) AtomObserver {
	return &streamAtomRecord{r.recorder.AtomBegun(ctx, ev).(*atomRecord), r}
}

func (a *streamAtomRecord) ChunkAppended(ev StreamEvent) {
	a.rec.mu.Lock()
	defer a.rec.mu.Unlock()
	a.s.chunks = append(a.s.chunks, ev)
}

// TestStreamObserver: an atom observer that implements StreamObserver is
// told of each chunk, with its stream, offset, attempt and size.
func TestStreamObserver(t *testing.T) {
	mem := vfs.NewMem()
	rec := &streamRecorder{recorder: &recorder{}}
	opts := testOptions(mem)
	opts.Observer = rec
	db := openTest(t, mem, opts)
	run, _ := db.Run(ctx, "r")
	a, _ := run.Begin(ctx)
	for _, s := range []string{"x", "yy"} {
		if _, err := a.Append(ctx, "tok", []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("k", nil)); err != nil {
		t.Fatal(err)
	}
	want := []StreamEvent{{Stream: "tok", Offset: 0, Attempt: 1, Bytes: 1}, {Stream: "tok", Offset: 1, Attempt: 1, Bytes: 2}}
	if fmt.Sprint(rec.chunks) != fmt.Sprint(want) {
		t.Fatalf("observed %v, want %v", rec.chunks, want)
	}
}

// TestStreamDeleteGC: a deleted run's streams go with it (a reader of it
// gets ErrRunDeleted, garbage collection reclaims its chunks), a live
// run's streams stay whole, and the store reopens and verifies.
func TestStreamDeleteGC(t *testing.T) {
	mem := vfs.NewMem()
	opts := gcOptions(mem)
	db := openTest(t, mem, opts)
	fill := func(id string) *Run {
		r, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 40; i++ {
			a, err := r.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for j := 0; j < 10; j++ {
				if _, err := a.Append(ctx, "tok", bytes.Repeat([]byte{'x'}, 200)); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Commit(ctx, new(frame.Delta).Set("i", []byte(fmt.Sprint(i)))); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	old, live := fill("old"), fill("live")
	if err := old.End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Delete(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if _, err := old.ReadStream(ctx, "tok", 0, nil); !errors.Is(err, ErrRunDeleted) {
		t.Fatalf("read of a deleted run's stream: %v", err)
	}
	st, err := db.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Segments+st.Compacted == 0 {
		t.Fatalf("GC reclaimed nothing: %+v", st)
	}
	if n := len(streamOf(t, live, "tok", 0)); n != 400 {
		t.Fatalf("the live run's stream has %d chunks after GC, want 400", n)
	}
	db.Close()
	db2, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	live2, _ := db2.Run(ctx, "live")
	if n := len(streamOf(t, live2, "tok", 0)); n != 400 {
		t.Fatalf("after reopen: %d chunks, want 400", n)
	}
	if infos, err := live2.Streams(ctx); err != nil || len(infos) != 1 {
		t.Fatalf("Streams = %v, %v", infos, err)
	}
}

// TestStreamsMarkerDerived: STREAMS is derived from the log (I9). A store
// whose log holds the chunks of an attempt that never committed, with
// STREAMS gone, still abandons them when a retry that appends nothing
// commits, and gets STREAMS back: the chunks in the replayed tail (a
// crash) and before the replay position (a Close while the atom ran,
// read by the log scan after Open).
func TestStreamsMarkerDerived(t *testing.T) {
	for _, closed := range []bool{false, true} {
		mem := vfs.NewCrashableMem()
		opts := testOptions(mem)
		db, err := Open("store", opts)
		if err != nil {
			t.Fatal(err)
		}
		run := openRun(t, db, "r")
		a, err := run.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Commit(ctx, new(frame.Delta).Set("k", []byte("v"))); err != nil {
			t.Fatal(err)
		}
		if a, err = run.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := a.Append(ctx, "s", []byte(fmt.Sprint("c", i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.FlushStreams(ctx); err != nil {
			t.Fatal(err)
		}
		fs := vfs.FS(mem)
		if closed {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			fs = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			db.Close()
		}
		if err := fs.Remove(fs.PathJoin("store", streamsName)); err != nil {
			t.Fatal(err)
		}
		o2 := *opts
		o2.FS = fs
		db2, err := Open("store", &o2)
		if err != nil {
			t.Fatal(err)
		}
		// The log scan and the marker's repair, which the background runs
		// once the restart is over (pebbleDelay), run here at once.
		if err := db2.checkRegistry(); err != nil {
			t.Fatal(err)
		}
		db2.healStreamsMarker()
		run2, err := db2.Run(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		retry, err := run2.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := retry.Commit(ctx, new(frame.Delta).Set("retry", []byte("1"))); err != nil {
			t.Fatal(err)
		}
		cs := streamOf(t, run2, "s", 0)
		if len(cs) != 3 {
			t.Fatalf("closed %v: %d chunks, want 3: %s", closed, len(cs), describe(cs))
		}
		for _, c := range cs {
			if c.Status != ChunkAbandoned {
				t.Fatalf("closed %v: the crashed attempt's chunk is %v, want abandoned: %s", closed, c.Status, describe(cs))
			}
		}
		if err := db2.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := fs.Stat(fs.PathJoin("store", streamsName)); err != nil {
			t.Fatalf("closed %v: STREAMS not written again: %v", closed, err)
		}
	}
}
