package stream

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

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
	var abandoned uint64
	if err := s.Check("atom2", "r", 1, func(upTo uint64) {
		abandoned = upTo
		l.AppendAsync(record.AppendStreamAbandon(nil, "r", 1, upTo))
	}); err != nil {
		t.Fatal(err)
	}
	if abandoned != 1 {
		t.Fatalf("Check abandoned up to %d, want 1", abandoned)
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
