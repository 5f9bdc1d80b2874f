package wal

import (
	"context"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// groups collects what OnGroupCommit reports.
type groups struct {
	mu   sync.Mutex
	list []GroupCommit
}

func (g *groups) add(c GroupCommit) {
	g.mu.Lock()
	g.list = append(g.list, c)
	g.mu.Unlock()
}

func (g *groups) sum() (s GroupCommit) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.list {
		s.Appends += c.Appends
		s.Records += c.Records
		s.Bytes += c.Bytes
		s.Syncs += c.Syncs
		s.SyncDuration += c.SyncDuration
	}
	return s
}

// TestOnGroupCommit checks that every group commit is reported once it is
// durable, before its appends return, with its appends, records, payload
// bytes and fdatasyncs.
func TestOnGroupCommit(t *testing.T) {
	ctx := context.Background()
	var g groups
	l := mustOpen(t, vfs.NewMem(), Options{OnGroupCommit: g.add})
	if _, err := l.Append(ctx, rec(1, 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendBatch(ctx, [][]byte{rec(2, 10), rec(3, 20), rec(4, 30)}); err != nil {
		t.Fatal(err)
	}
	// Reported before the append returned: no wait for the callback.
	want := []GroupCommit{{Appends: 1, Records: 1, Bytes: 100, Syncs: 1}, {Appends: 1, Records: 3, Bytes: 60, Syncs: 1}}
	if diff := cmp.Diff(want, g.list, cmpopts.IgnoreFields(GroupCommit{}, "SyncDuration")); diff != "" {
		t.Fatalf("groups (-want +got):\n%s", diff)
	}

	// Concurrent writers: the groups add up to what the log made durable.
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				if _, err := l.Append(ctx, rec(w*100+i, 64)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st, sum := l.Stats(), g.sum()
	if int64(sum.Appends) != st.Appends || int64(sum.Records) != st.Records || sum.Bytes != st.Bytes ||
		int64(sum.Syncs) != st.Syncs || int64(sum.SyncDuration) != st.SyncNanos {
		t.Errorf("groups add up to %+v, the log's stats are %+v", sum, st)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOnGroupCommitSyncs checks the fdatasync count of a group: none with
// NoSync, one per piece of a group larger than the log lets stand written
// but not durable.
func TestOnGroupCommitSyncs(t *testing.T) {
	ctx := context.Background()
	defer func(v int64) { maxUnsynced = v }(maxUnsynced)
	maxUnsynced = 4 << 10

	var g groups
	l := mustOpen(t, vfs.NewMem(), Options{OnGroupCommit: g.add})
	batch := [][]byte{rec(1, 3000), rec(2, 3000), rec(3, 3000)} // about 9 KiB framed: three pieces
	if _, err := l.AppendBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(g.list) != 1 || g.list[0].Syncs != 3 || g.list[0].Records != 3 {
		t.Errorf("groups %+v, want one of 3 records and 3 syncs", g.list)
	}

	g = groups{}
	l = mustOpen(t, vfs.NewMem(), Options{NoSync: true, OnGroupCommit: g.add})
	if _, err := l.Append(ctx, rec(1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if want := []GroupCommit{{Appends: 1, Records: 1, Bytes: 10}}; !cmp.Equal(want, g.list) {
		t.Errorf("NoSync: groups %+v, want %+v", g.list, want)
	}
}
