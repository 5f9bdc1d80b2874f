package checkpoint

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

func replay(t *testing.T, seqs []uint64, base, last uint64, head chain.Hash) ([]uint64, error) {
	t.Helper()
	l, err := wal.Open("/wal", &wal.Options{FS: vfs.NewMem(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	comp := frame.NewCompressor(frame.NewDicts())
	for _, seq := range seqs {
		rec := record.AppendAtomHeader(nil, "a", seq, chain.Hash{byte(seq)})
		if _, err := l.Append(context.Background(), comp.Compress(rec, record.AppendAtomBody(nil, nil, []byte("d")), 0)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := record.NewCursor(l, wal.SegmentName, wal.Pos{}, &record.Decoder{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var applied []uint64
	err = ReplayRun(c, "a", base, last, head, "/wal", wal.SegmentName, func(a *record.Record) error {
		applied = append(applied, a.Seq)
		return nil
	})
	return applied, err
}

func TestReplayRun(t *testing.T) {
	got, err := replay(t, []uint64{1, 2, 2, 3, 4}, 1, 3, chain.Hash{3})
	if err != nil || len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("replay 2..3: %v, %v", got, err)
	}
	if got, err := replay(t, nil, 5, 5, chain.Hash{}); err != nil || len(got) != 0 {
		t.Fatalf("a fork with no atom of its own: %v, %v", got, err)
	}
	for _, c := range []struct {
		seqs []uint64
		last uint64
		head chain.Hash
		want string
	}{
		{[]uint64{1, 3}, 3, chain.Hash{3}, "atoms between them are missing"},
		{[]uint64{1, 2}, 3, chain.Hash{3}, "up to seq 2, its last seq is 3"},
		{[]uint64{1, 2}, 2, chain.Hash{9}, "differs from the run's"},
	} {
		_, err := replay(t, c.seqs, 0, c.last, c.head)
		var ce *record.CorruptionError
		if !errors.As(err, &ce) || !strings.Contains(ce.Reason, c.want) || ce.Run != "a" {
			t.Errorf("%v: %v; want damage %q", c.seqs, err, c.want)
		}
	}
}

// TestAppendChainAndStoreHead: the records appended are ChainRecord's and
// StoreHeadRecord's; an empty store head is not written.
func TestAppendChainAndStoreHead(t *testing.T) {
	l, err := wal.Open("/wal", &wal.Options{FS: vfs.NewMem(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := chain.Checkpoint{StoreID: "s", RunID: "r", Seq: 3, Head: chain.Hash{1}}
	n, err := AppendChain(l, nil, c)
	want, _ := ChainRecord(nil, c)
	if err != nil || n != len(want) {
		t.Fatalf("AppendChain: %d, %v; want %d", n, err, len(want))
	}
	if err := AppendStoreHead(l, nil, chain.StoreHead{StoreID: "s"}, true); err != nil {
		t.Fatal(err)
	}
	h := chain.StoreHead{StoreID: "s", Runs: []chain.RunHead{{RunID: "r", Seq: 3, Head: chain.Hash{1}}}}
	if err := AppendStoreHead(l, nil, h, true); err != nil {
		t.Fatal(err)
	}
	wantHead, _ := StoreHeadRecord(nil, h)
	cur, err := record.NewCursor(l, wal.SegmentName, wal.Pos{}, &record.Decoder{})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var kinds []record.Kind
	for cur.Next() {
		kinds = append(kinds, cur.Record().Kind)
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	if len(kinds) != 2 || kinds[0] != record.KindCheckpoint || kinds[1] != record.KindStoreHead {
		t.Fatalf("records %v, want a checkpoint and one store head (%d bytes)", kinds, len(wantHead))
	}
}
