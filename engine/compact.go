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
// inspect rely on it and need no other rule). So that a mostly live
// segment does not hold a deleted run's later segments, a segment where
// the remaining records of a deleted run begin and that does not hold its
// end record is compacted whatever its dead fraction: one rewrite of its
// live records lets every later segment of that run go.
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
//
// Compaction is local: a replica (Options.Replicator) received the
// records as they were committed and keeps the ones removed here; a
// store reopened from it holds them again, dead (their delete records
// are there too), until its own collection.

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
	// explicit says, of each action whose intent was read, whether its key
	// is not its run's default key (deadRecord).
	explicit map[ledger.Fingerprint]bool
}

// segPlan is one segment to compact.
type segPlan struct {
	id   uint64
	runs map[string]bool // the deleted runs whose dead records go from it
	n    int             // records that go (a check against the log)
}

// segSummary is what the scan learnt of one segment: enough to decide,
// once the whole log below the replay position is read, what goes.
type segSummary struct {
	id    uint64
	size  int64               // bytes of its records
	live  int64               // bytes of the live ones
	heads runPart             // dead store heads (they belong to no run)
	runs  map[string]*runPart // the dead records of each deleted run
	ends  map[string]bool     // the runs whose end record it holds
}

// runPart is the dead records of one run (or the dead store heads) in one
// segment.
type runPart struct {
	n     int
	bytes int64
	fps   []ledger.Fingerprint // of its intents and certificates
}

// frameSpan is the bytes a record of n bytes takes in a segment (wal's
// framing: a 16-byte header, padding to 8).
func frameSpan(n int) int64 {
	return (int64(n) + wal.RecordHeaderSize + wal.RecordAlign - 1) &^ (wal.RecordAlign - 1)
}

// recordRun is the run a record belongs to ("" for a store head).
func recordRun(r *record.Record) string {
	switch {
	case r.Erased:
		return r.Run // an intent or certificate: the run of its erased key
	case r.Kind == record.KindIntent:
		return r.Intent.RunID
	case r.Kind == record.KindCert:
		return r.Cert.RunID
	case r.Kind == record.KindStoreHead:
		return ""
	}
	return r.Run
}

// planGC reads the log from its start up to floor (CHECKPOINT's replay
// position: only the sealed segments before floor's are considered) and
// plans what goes: the dead prefix, and the segments to compact.
func (db *DB) planGC(ctx context.Context, floor wal.Pos, deleted map[string]bool, headAfter bool, ratio float64) (gcPlan, error) {
	plan := gcPlan{keep: floor.Segment, explicit: map[ledger.Fingerprint]bool{}}
	sums, err := db.summarize(ctx, floor, deleted, headAfter, &plan)
	if err != nil {
		return plan, err
	}
	plan.decide(sums, ratio)
	return plan, nil
}

// summarize is planGC's scan.
func (db *DB) summarize(ctx context.Context, floor wal.Pos, deleted map[string]bool, headAfter bool, plan *gcPlan) ([]*segSummary, error) {
	c, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, db.decoder(true))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var sums []*segSummary
	var cur *segSummary
	for n := 0; c.Next(); n++ {
		if n%4096 == 0 && (ctx.Err() != nil || db.closed.Load()) {
			return nil, errors.Join(ctx.Err(), db.checkOpen())
		}
		r := c.Record()
		if r.Pos.Segment >= floor.Segment {
			break
		}
		if cur == nil || r.Pos.Segment != cur.id {
			cur = &segSummary{id: r.Pos.Segment, runs: map[string]*runPart{}, ends: map[string]bool{}}
			sums = append(sums, cur)
		}
		if r.Kind == record.KindIntent && r.Intent != nil {
			in := r.Intent
			plan.explicit[in.Fingerprint] = in.Key != ledger.DefaultKey(in.RunID, in.Seq, int(in.Index))
		}
		if r.Kind == record.KindEnd {
			cur.ends[r.Run] = true
		}
		span := frameSpan(len(r.Raw))
		cur.size += span
		plan.scanned += int64(len(r.Raw))
		if !db.deadRecord(r, deleted, headAfter, plan.explicit) {
			cur.live += span
			continue
		}
		p := &cur.heads
		if run := recordRun(r); run != "" {
			if p = cur.runs[run]; p == nil {
				p = &runPart{}
				cur.runs[run] = p
			}
		}
		p.n++
		p.bytes += span
		switch {
		case r.Erased:
			// Forgotten by the erasure.
		case r.Kind == record.KindIntent:
			p.fps = append(p.fps, r.Intent.Fingerprint)
		case r.Kind == record.KindCert:
			p.fps = append(p.fps, r.Cert.Fingerprint)
		}
	}
	return sums, c.Err()
}

// decide fills the plan from the summaries, in log order. A dead record of
// a deleted run goes only while no record of that run is kept in an
// earlier segment (the file's comment). A segment goes whole (with the
// prefix, or compacted to a stub) when every record of it goes; it is
// compacted when what goes is at least ratio of its bytes (ratio < 0:
// never for that), or when a deleted run with records that go from it
// goes on, without its end, into a later segment that could go whole (so
// that it does).
func (plan *gcPlan) decide(sums []*segSummary, ratio float64) {
	// lastWhole[run] is the last segment that holds dead records of run
	// and nothing live.
	lastWhole := map[string]int{}
	for i, s := range sums {
		if s.live == 0 {
			for run := range s.runs {
				lastWhole[run] = i
			}
		}
	}
	retained := map[string]bool{}
	prefix := true
	for i, s := range sums {
		sp := segPlan{id: s.id, runs: map[string]bool{}, n: s.heads.n}
		dead := s.heads.bytes
		fps := s.heads.fps
		unblocks := false
		for run, p := range s.runs {
			if retained[run] {
				continue
			}
			sp.runs[run] = true
			sp.n += p.n
			dead += p.bytes
			fps = append(fps, p.fps...)
			if last, ok := lastWhole[run]; ok && last > i && !s.ends[run] {
				unblocks = true
			}
		}
		whole := dead == s.size
		switch {
		case whole && prefix:
			plan.fps = append(plan.fps, fps...) // removed with the prefix
			continue
		case prefix:
			plan.keep, prefix = s.id, false
		}
		if sp.n > 0 && (whole || unblocks || (ratio >= 0 && float64(dead) >= ratio*float64(s.size))) {
			plan.compact = append(plan.compact, sp)
			plan.fps = append(plan.fps, fps...)
			continue
		}
		for run := range s.runs {
			retained[run] = true
		}
	}
}

// compactSegments is step 6 of a collection: the planned segments are
// rewritten, one at a time, each without the dead records of the runs its
// plan names and its dead store heads.
func (db *DB) compactSegments(ctx context.Context, plan gcPlan, deleted map[string]bool, headAfter bool, st *GCStats) error {
	dec := db.decoder(true)
	for _, sp := range plan.compact {
		if ctx.Err() != nil || db.closed.Load() {
			return errors.Join(ctx.Err(), db.checkOpen())
		}
		removed := 0
		var r record.Record
		info, err := db.log.Compact(sp.id, func(pos wal.Pos, raw []byte) ([]byte, bool, error) {
			if err := dec.Decode(raw, pos, db.segmentFile(pos.Segment), &r); err != nil {
				return nil, false, err
			}
			run := recordRun(&r)
			if !db.deadRecord(&r, deleted, headAfter, plan.explicit) || (run != "" && !sp.runs[run]) {
				return nil, false, nil
			}
			removed++
			return layout.ReclaimedNote{Kind: r.Kind, Run: run, Seq: r.Seq}.Marshal(), true, nil
		})
		if err != nil {
			return fmt.Errorf("compact segment %d: %w", sp.id, err)
		}
		if removed != sp.n {
			return fmt.Errorf("compact segment %d: %d dead records found, %d planned", sp.id, removed, sp.n)
		}
		st.Compacted++
		st.CompactedBytes += info.Reclaimed
		if info.Kept == 0 {
			st.Emptied++
		}
	}
	return nil
}
