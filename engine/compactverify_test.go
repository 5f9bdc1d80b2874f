package engine

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// compactedStore builds compactStore's store, deletes "old" and "half",
// runs a GC that compacts, closes it, and returns the positions of the
// atoms of run "mix" in sealed segments, by segment, and their seqs.
func compactedStore(t *testing.T, mem vfs.FS) (map[uint64][]wal.Pos, map[wal.Pos]uint64) {
	t.Helper()
	opts := gcOptions(mem)
	opts.CompactDead = 0.3
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	compactStore(t, db)
	if _, err := db.DeleteRuns(ctx, DeleteOptions{IDs: []string{"old", "half"}}); err != nil {
		t.Fatal(err)
	}
	if st, err := db.GC(ctx); err != nil || st.Compacted <= st.Emptied {
		t.Fatalf("GC: %+v, %v; want half-dead segments compacted", st, err)
	}
	segs := db.log.Segments()
	newest := segs[len(segs)-1].ID
	mix, seqs := map[uint64][]wal.Pos{}, map[wal.Pos]uint64{}
	c, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, db.decoder(false))
	if err != nil {
		t.Fatal(err)
	}
	for c.Next() {
		if r := c.Record(); r.Kind == record.KindAtom && r.Run == "mix" && r.Pos.Segment < newest-1 {
			mix[r.Pos.Segment] = append(mix[r.Pos.Segment], r.Pos)
			seqs[r.Pos] = r.Seq
		}
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: true}); err != nil || !rep.OK {
		t.Fatalf("verify of the compacted store: %v %v", err, rep.Failures)
	}
	return mix, seqs
}

// compactAway rewrites segment pos.Segment of the store's log without the
// record at pos, as someone with the files but not the engine could,
// leaving note for it in the compaction table.
func compactAway(t *testing.T, mem vfs.FS, pos wal.Pos, note layout.ReclaimedNote) {
	t.Helper()
	l, err := wal.Open("store/"+layout.WALDir, &wal.Options{FS: mem, SegmentSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.Compact(pos.Segment, func(p wal.Pos, _ []byte) ([]byte, bool, error) {
		return note.Marshal(), p == pos, nil
	})
	if err != nil || info.Removed != 1 {
		t.Fatalf("tamper: Compact: %+v, %v", info, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyCompactionTampered: a live record removed from a compacted
// segment is reported, whether the compaction table names its run
// truthfully (a run no delete record deletes), names a deleted run in its
// place (the live run's chain then misses a seq), or names nothing
// parseable; and a compacted segment compacted again by the engine still
// verifies.
func TestVerifyCompactionTampered(t *testing.T) {
	pick := func(mix map[uint64][]wal.Pos) wal.Pos {
		for _, ps := range mix {
			if len(ps) > 1 {
				return ps[1]
			}
		}
		t.Fatal("no sealed segment holds two atoms of run mix")
		return wal.Pos{}
	}
	for _, tc := range []struct {
		name string
		note func(seq uint64) layout.ReclaimedNote
		kind chain.Kind
		want string
	}{
		{"true note", func(seq uint64) layout.ReclaimedNote {
			return layout.ReclaimedNote{Kind: record.KindAtom, Run: "mix", Seq: seq}
		}, chain.KindRunMissing, "no valid delete record deletes"},
		{"note names a deleted run", func(seq uint64) layout.ReclaimedNote {
			return layout.ReclaimedNote{Kind: record.KindAtom, Run: "half", Seq: seq}
		}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			mix, seqs := compactedStore(t, mem)
			pos := pick(mix)
			compactAway(t, mem, pos, tc.note(seqs[pos]))
			rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem})
			if err != nil || rep.OK || !failureOf(rep, "mix", tc.kind, tc.want) {
				t.Fatalf("verify after a live atom of mix at %v was compacted away: %v, OK %v, failures %v", pos, err, rep.OK, rep.Failures)
			}
			t.Logf("reported: %v", rep.Failures)
		})
	}
	t.Run("note does not parse", func(t *testing.T) {
		mem := vfs.NewMem()
		mix, _ := compactedStore(t, mem)
		pos := pick(mix)
		l, err := wal.Open("store/"+layout.WALDir, &wal.Options{FS: mem, SegmentSize: 16 << 10})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Compact(pos.Segment, func(p wal.Pos, _ []byte) ([]byte, bool, error) { return []byte("x"), p == pos, nil }); err != nil {
			t.Fatal(err)
		}
		l.Close()
		rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem})
		if err != nil || rep.OK || !failureOf(rep, "", chain.KindCorrupt, "a record removed by compaction") {
			t.Fatalf("verify: %v, OK %v, failures %v", err, rep.OK, rep.Failures)
		}
	})
}
