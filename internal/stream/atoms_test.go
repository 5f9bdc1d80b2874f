package stream

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// enqueued is a log that keeps what Check enqueues to it.
type enqueued struct {
	l    *wal.Log
	recs [][]byte
}

func (e *enqueued) AppendAsync(recs ...[]byte) *wal.Waiter {
	e.recs = append(e.recs, recs...)
	return e.l.AppendAsync(recs...)
}

// TestStreamsBookkeeping: the marker, an atom's attempt across its
// chunks, the abandon before a commit of a later attempt that appended
// nothing, and Done's statuses.
func TestStreamsBookkeeping(t *testing.T) {
	fs := vfs.NewMem()
	l := openLog(t, fs)
	s := NewStreams(func() Source { return logSource{t, l} }, fs, "STREAMS", false)
	ctx := context.Background()
	if s.Used() {
		t.Fatal("a store without its marker is used")
	}
	if err := s.Mark(); err != nil {
		t.Fatal(err)
	}
	if !s.Used() || !NewStreams(func() Source { return logSource{t, l} }, fs, "STREAMS", false).Used() {
		t.Fatal("after Mark, the store is not used")
	}
	// Attempt 1 of seq 1 appends twice, then crashes (never Done).
	a1, err := s.Attempt("atom1", "r", 1)
	if err != nil || a1 != 1 {
		t.Fatalf("first attempt = %d, %v; want 1", a1, err)
	}
	if again, _ := s.Attempt("atom1", "r", 1); again != a1 {
		t.Fatalf("the atom's second chunk took attempt %d, want %d", again, a1)
	}
	appendChunk(t, s.Index(), l, "r", "tok", 1, a1, "a")
	s.Appended("atom1", "r", "tok")
	w := s.Last("atom1")
	if w == nil {
		t.Fatal("no Waiter for the atom's last chunk")
	}
	if _, err := w.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Last("other") != nil {
		t.Fatal("an atom that appended nothing has a Waiter")
	}
	// Attempt 2 of seq 1 appends nothing and commits: Check abandons 1.
	enq := &enqueued{l: l}
	if err := s.Check("atom2", "r", 1, enq); err != nil {
		t.Fatal(err)
	}
	if want := record.AppendStreamAbandon(nil, "r", 1, 1); len(enq.recs) != 1 || string(enq.recs[0]) != string(want) {
		t.Fatalf("Check enqueued %x, want one abandon record up to attempt 1 (%x)", enq.recs, want)
	}
	pos, err := l.Append(ctx, record.AppendStreamAbandon(nil, "zz", 1, 1)) // a group commit
	if err != nil {
		t.Fatal(err)
	}
	s.Done("atom2", "r", 1, pos, false)
	// Seq 2 appends and fails.
	a, err := s.Attempt("atom3", "r", 2)
	if err != nil {
		t.Fatal(err)
	}
	appendChunk(t, s.Index(), l, "r", "tok", 2, a, "b")
	s.Appended("atom3", "r", "tok")
	if _, err := s.Last("atom3").Wait(ctx); err != nil {
		t.Fatal(err)
	}
	s.Done("atom3", "r", 2, wal.Pos{}, true)
	if s.Last("atom3") != nil {
		t.Fatal("Done did not forget the atom")
	}
	got := readAll(t, s.Index(), "r", "tok", 0)
	if len(got) != 2 || got[0].Status != Abandoned || got[1].Status != Failed {
		t.Fatalf("statuses = %+v; want abandoned, failed", got)
	}
}

// fakeAtom is an Atom whose Lock refuses with refuse, and which keeps
// what Append told it.
type fakeAtom struct {
	refuse error
	locked bool
	told   []string
}

func (a *fakeAtom) Lock(context.Context) error {
	if a.refuse != nil {
		return a.refuse
	}
	a.locked = true
	return nil
}

func (a *fakeAtom) Unlock() { a.locked = false }

func (a *fakeAtom) Appended(name string, off, attempt uint64, n int) {
	lock := ""
	if !a.locked {
		lock = " (without the run's lock)"
	}
	a.told = append(a.told, fmt.Sprintf("%s %d/%d %d%s", name, off, attempt, n, lock))
}

// TestAppend: Append's steps in their order: the chunk's checks before
// anything (no marker for a chunk refused), the marker, the atom's lock
// and its refusal (nothing written), the chunk written under the lock and
// the atom told, the lock released.
func TestAppend(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	l := openLog(t, fs)
	s := NewStreams(func() Source { return logSource{t, l} }, fs, "STREAMS", false)
	log := &countLog{l: l}
	big, done := errors.New("too large"), errors.New("atom done")
	a := &fakeAtom{}
	if _, err := s.Append(ctx, a, "r", 1, "out", make([]byte, record.MaxChunkSize+1), big, nil, log); !errors.Is(err, big) {
		t.Fatalf("Append of a chunk too large = %v, want %v", err, big)
	}
	if _, err := s.Append(ctx, a, "r", 1, "", []byte("x"), big, nil, log); !errors.Is(err, record.ErrInvalidStreamName) {
		t.Fatalf("Append to a stream without a name = %v", err)
	}
	if s.Used() {
		t.Fatal("a refused chunk wrote the marker")
	}
	refused := &fakeAtom{refuse: done}
	if _, err := s.Append(ctx, refused, "r", 1, "out", []byte("x"), big, nil, log); !errors.Is(err, done) {
		t.Fatalf("Append for an atom that is done = %v, want %v", err, done)
	}
	if !s.Used() || s.Last(refused) != nil || log.n != 0 || len(refused.told) != 0 {
		t.Fatalf("a refused atom: marker %v, last %v, %d bytes appended, told %v", s.Used(), s.Last(refused), log.n, refused.told)
	}
	for i, data := range []string{"a", "bc"} {
		if off, err := s.Append(ctx, a, "r", 1, "out", []byte(data), big, nil, log); err != nil || off != uint64(i) {
			t.Fatalf("Append %d = %d, %v", i, off, err)
		}
	}
	if a.locked || fmt.Sprint(a.told) != "[out 0/1 1 out 1/1 2]" {
		t.Fatalf("after Append: locked %v, told %v", a.locked, a.told)
	}
	if _, err := s.Last(a).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s.Index(), "r", "out", 0); len(got) != 2 || string(got[1].Data) != "bc" {
		t.Fatalf("read back %+v", got)
	}
}
