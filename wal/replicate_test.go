package wal

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// shipped collects what Options.Replicate is given, and fails on demand.
type shipped struct {
	mu      sync.Mutex
	appends [][][]byte // every append shipped, in order, copied
	fail    error      // returned by the next call when set
	calls   int
}

func (s *shipped) replicate(appends [][][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.fail != nil {
		return s.fail
	}
	for _, a := range appends {
		c := make([][]byte, len(a))
		for i, r := range a {
			c[i] = bytes.Clone(r)
		}
		s.appends = append(s.appends, c)
	}
	return nil
}

// TestReplicateShipsEveryAppend checks that every append reaches
// Options.Replicate once, whole and in log order, before it returns,
// also from concurrent writers whose appends share group commits.
func TestReplicateShipsEveryAppend(t *testing.T) {
	ctx := context.Background()
	var s shipped
	l := mustOpen(t, vfs.NewMem(), Options{Replicate: s.replicate})
	if _, err := l.AppendBatch(ctx, [][]byte{rec(1, 10), rec(2, 20)}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	if len(s.appends) != 1 || len(s.appends[0]) != 2 || !bytes.Equal(s.appends[0][1], rec(2, 20)) {
		t.Fatalf("after one batch of 2, shipped %d appends", len(s.appends))
	}
	s.mu.Unlock()

	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 40 {
				if _, err := l.Append(ctx, rec(100+w*100+i, 48)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	recs, _ := readAll(t, l)
	var flat [][]byte
	for _, a := range s.appends {
		flat = append(flat, a...)
	}
	if !slices.EqualFunc(recs, flat, bytes.Equal) {
		t.Fatalf("the log holds %d records, %d were shipped, or in another order", len(recs), len(flat))
	}
	if s.calls >= len(s.appends) {
		t.Logf("no group held two appends (%d calls, %d appends): the machine serialised the writers", s.calls, len(s.appends))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReplicateErrorIsFinal checks that a Replicate error fails the
// appends of its group, wrapped so that errors.Is finds it, and every
// append after it, like an fsync error (I8); readers never see the
// group's records in this process.
func TestReplicateErrorIsFinal(t *testing.T) {
	ctx := context.Background()
	var s shipped
	l := mustOpen(t, vfs.NewMem(), Options{Replicate: s.replicate})
	if _, err := l.Append(ctx, rec(1, 10)); err != nil {
		t.Fatal(err)
	}
	errFence := errors.New("fenced")
	s.mu.Lock()
	s.fail = errFence
	s.mu.Unlock()
	if _, err := l.Append(ctx, rec(2, 10)); !errors.Is(err, errFence) {
		t.Fatalf("Append when Replicate fails: %v, want it to wrap %v", err, errFence)
	}
	s.mu.Lock()
	s.fail = nil
	s.mu.Unlock()
	if _, err := l.Append(ctx, rec(3, 10)); !errors.Is(err, errFence) {
		t.Fatalf("Append after a failed Replicate: %v, want the sticky %v", err, errFence)
	}
	if recs, _ := readAll(t, l); len(recs) != 1 {
		t.Fatalf("readers see %d records, want only the replicated one", len(recs))
	}
	if err := l.Close(); !errors.Is(err, errFence) {
		t.Fatalf("Close: %v, want the sticky error", err)
	}
}
