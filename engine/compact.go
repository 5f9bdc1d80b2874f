package engine

// Retention, part three: compaction. A collection (gc.go) reclaims, below
// CHECKPOINT's replay position, not only the dead prefix of the log but
// every sealed segment that is wholly dead, and every one whose dead
// records take at least Options.CompactDead of its bytes: wal.Log.Compact
// rewrites the segment in place with its live records only, each at the
// position it had, and keeps, for every record it removed, a note of its
// kind, run and seq (layout.ReclaimedNote). A wholly dead segment becomes
// a stub (its header, a table and its seal) that keeps the segment ids
// contiguous.
//
// Why in place and not copied forward to the tail: every layer above the
// log names records by position (CHECKPOINT's replay position, the atom
// index in snapshots/, the ledger table's certificate locations, INBOX's
// sending atoms, every run's in-memory positions), and recovery and
// verify read a run's records in log order (the chain is per run). A
// record copied to the tail would move in all of them and come after its
// run's later records; a record kept at its position moves in none. So
// compaction rewrites no derived file and needs no rebuild, and recovery
// and verify read the same records in the same order as before it.
//
// What may go, per deleted run: only a prefix of its records still in the
// log. A dead record of a deleted run goes only if no record of that run
// is kept in an earlier segment, so what is left of a deleted run is
// always a suffix of it (its latest records), exactly as after the prefix
// removal of gc.go: a run whose creation record is in the log has all its
// records there, and one whose creation record is gone is an orphan that
// the log deletes further on (the replay, the registry check, verify and
// inspect rely on it and need no other rule).
//
// # Crash safety
//
// Compaction runs inside a collection, after its step 3 (the ledger has
// forgotten the fingerprints of every dead intent and certificate that
// goes, and an engine checkpoint wrote the table without them) and its
// steps 4-5 (the dead prefix), one segment at a time:
//
//  6. wal.Log.Compact: the new file (name.tmp) is written and fsynced,
//     renamed over the segment, and the directory fsynced.
//
// The rename is the commit point of each segment. A crash before it
// leaves the segment whole and a .tmp that the next writable Open
// removes; after it, the segment is compacted. Either way every live
// record is there at its position: nothing derived names a removed one
// (they belong to deleted runs, or are superseded store heads), and
// nothing derived needs to change. The next collection finds what a crash
// left undone and does it.

import (
	"context"
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// gcPlan is what a collection reclaims below the replay position.
type gcPlan struct {
	keep    uint64 // the first segment kept: the ones below are the dead prefix
	compact []segPlan
	fps     []ledger.Fingerprint // of the dead intents and certificates that go
	scanned int64                // bytes of records read
}

// segPlan is one segment to compact: the records that go, by offset, with
// their notes.
type segPlan struct {
	id         uint64
	drop       map[int64][]byte
	dead, size int64 // bytes of the records that go, of all its records
}

// frameSpan is the bytes a record of n bytes takes in a segment (wal's
// framing: a 16-byte header, padding to 8).
func frameSpan(n int) int64 { return (int64(n) + wal.RecordHeaderSize + wal.RecordAlign - 1) &^ (wal.RecordAlign - 1) }

// recordRun is the run a record belongs to ("" for a store head).
func recordRun(r *record.Record) string {
	switch r.Kind {
	case record.KindIntent:
		return r.Intent.RunID
	case record.KindCert:
		return r.Cert.RunID
	case record.KindStoreHead:
		return ""
	}
	return r.Run
}

// planGC reads the log from its start up to floor (CHECKPOINT's replay
// position: only sealed segments before floor's are considered) and
// plans what goes: the dead prefix, and the segments to compact (wholly
// dead ones, and those whose removable records take at least ratio of
// their bytes; ratio < 0: wholly dead ones only).
func (db *DB) planGC(ctx context.Context, floor wal.Pos, deleted map[string]bool, headAfter bool, ratio float64) (gcPlan, error) {
	plan := gcPlan{keep: floor.Segment}
	c, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, db.decoder(true))
	if err != nil {
		return plan, err
	}
	defer c.Close()
	// explicit says, of each action whose intent was read, whether its key
	// is not its run's default key. A certificate whose intent is not in
	// the log any more had a dead intent: a default key.
	explicit := map[ledger.Fingerprint]bool{}
	// retained: deleted runs with a record kept in an earlier segment;
	// their later records stay (a deleted run keeps a suffix).
	retained := map[string]bool{}
	prefix := true // every segment before the current one goes whole
	var cur segPlan
	var curFPs []ledger.Fingerprint
	curRuns := map[string]bool{} // deleted runs with a removable record in cur
	live := 0                    // records of cur that stay
	finish := func() {
		if cur.id == 0 {
			return
		}
		whole := live == 0
		switch {
		case whole && prefix:
			plan.fps = append(plan.fps, curFPs...) // removed with the prefix
		case whole || (ratio >= 0 && float64(cur.dead) >= ratio*float64(cur.size)):
			plan.compact = append(plan.compact, cur)
			plan.fps = append(plan.fps, curFPs...)
		default:
			for run := range curRuns {
				retained[run] = true
			}
		}
		if prefix && !whole {
			plan.keep, prefix = cur.id, false
		}
		cur, curFPs, live = segPlan{}, nil, 0
		clear(curRuns)
	}
	for n := 0; c.Next(); n++ {
		if n%4096 == 0 && (ctx.Err() != nil || db.closed.Load()) {
			return plan, errors.Join(ctx.Err(), db.checkOpen())
		}
		r := c.Record()
		if r.Pos.Segment >= floor.Segment {
			break
		}
		if r.Pos.Segment != cur.id {
			finish()
			cur = segPlan{id: r.Pos.Segment, drop: map[int64][]byte{}}
		}
		if r.Kind == record.KindIntent {
			in := r.Intent
			explicit[in.Fingerprint] = in.Key != ledger.DefaultKey(in.RunID, in.Seq, int(in.Index))
		}
		span := frameSpan(len(r.Raw))
		cur.size += span
		plan.scanned += int64(len(r.Raw))
		run := recordRun(r)
		if !db.deadRecord(r, deleted, headAfter, explicit) || (run != "" && retained[run]) {
			live++
			continue
		}
		cur.dead += span
		cur.drop[r.Pos.Offset] = layout.ReclaimedNote{Kind: r.Kind, Run: run, Seq: r.Seq}.Marshal()
		if run != "" {
			curRuns[run] = true
		}
		switch r.Kind {
		case record.KindIntent:
			curFPs = append(curFPs, r.Intent.Fingerprint)
		case record.KindCert:
			curFPs = append(curFPs, r.Cert.Fingerprint)
		}
	}
	if err := c.Err(); err != nil {
		return plan, err
	}
	finish()
	if prefix {
		plan.keep = floor.Segment // every record before it is dead
	}
	return plan, nil
}

// compactSegments is step 6 of a collection: the planned segments are
// rewritten, one at a time.
func (db *DB) compactSegments(ctx context.Context, plan gcPlan, st *GCStats) error {
	for _, sp := range plan.compact {
		if ctx.Err() != nil || db.closed.Load() {
			return errors.Join(ctx.Err(), db.checkOpen())
		}
		removed := 0
		info, err := db.log.Compact(sp.id, func(pos wal.Pos, _ []byte) ([]byte, bool, error) {
			note, ok := sp.drop[pos.Offset]
			if ok {
				removed++
			}
			return note, ok, nil
		})
		if err != nil {
			return fmt.Errorf("compact segment %d: %w", sp.id, err)
		}
		if removed != len(sp.drop) {
			return fmt.Errorf("compact segment %d: %d of the %d records planned were found", sp.id, removed, len(sp.drop))
		}
		st.Compacted++
		st.CompactedBytes += info.Reclaimed
		if info.Kept == 0 {
			st.Emptied++
		}
	}
	return nil
}
