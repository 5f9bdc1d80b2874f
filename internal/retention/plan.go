package retention

import (
	"context"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Plan is what a collection reclaims below the replay position.
type Plan struct {
	Keep    uint64 // the first segment kept: the ones below are the dead prefix
	Compact []SegPlan
	FPs     []ledger.Fingerprint // of the dead intents and certificates that go
	Scanned int64                // bytes of records read
	// explicit says, of each action whose intent was read, whether its key
	// is not its run's default key (Dead).
	explicit  map[ledger.Fingerprint]bool
	deleted   map[string]bool
	headAfter bool
}

// SegPlan is one segment to compact.
type SegPlan struct {
	ID   uint64
	Runs map[string]bool // the deleted runs whose dead records go from it
	N    int             // records that go (a check against the log)
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

// FrameSpan is the bytes a record of n bytes takes in a segment (wal's
// framing: a 16-byte header, padding to 8).
func FrameSpan(n int) int64 {
	return (int64(n) + wal.RecordHeaderSize + wal.RecordAlign - 1) &^ (wal.RecordAlign - 1)
}

// RunOf is the run a record belongs to ("" for a store head).
func RunOf(r *record.Record) string {
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

// Dead says whether r is dead: a record of a deleted run (of its ledger
// records, those of default-key actions), or a superseded store head (see
// the package's comment). headAfter: a durable store head follows every
// record read; explicit: of each action whose intent was read, whether
// its key is explicit.
func Dead(r *record.Record, deleted map[string]bool, headAfter bool, explicit map[ledger.Fingerprint]bool) bool {
	switch r.Kind {
	case record.KindDelete, record.KindErase:
		return false
	case record.KindEraseKey:
		// Kept while its run has records; what it erased goes with them.
		return deleted[r.Run]
	case record.KindIntent, record.KindCert:
		if r.Erased {
			// Sealed with an erased run's key (the records of its
			// explicit-key actions are sealed with the store's).
			return deleted[r.Run]
		}
		if r.Kind == record.KindIntent {
			return deleted[r.Intent.RunID] && !explicit[r.Intent.Fingerprint]
		}
		return deleted[r.Cert.RunID] && !explicit[r.Cert.Fingerprint]
	case record.KindStoreHead:
		if headAfter {
			return true
		}
		h, err := chain.ParseStoreHead(r.Note)
		if err != nil {
			return false
		}
		for _, rh := range h.Runs {
			if !deleted[rh.RunID] {
				return false
			}
		}
		return true
	case record.KindRun, record.KindFork, record.KindAtom, record.KindFail, record.KindEnd, record.KindCheckpoint, record.KindRollback:
		return deleted[r.Run]
	case record.KindWait, record.KindEvent, record.KindWake:
		return deleted[r.Run] // waits go with their run's other records
	case record.KindStreamChunk, record.KindStreamAbandon:
		// Streams go with their run (internal/stream).
		return deleted[r.Run]
	}
	return false
}

// PlanLog reads the log from its start up to floor (CHECKPOINT's replay
// position: only the sealed segments before floor's are considered) and
// plans what goes: the dead prefix, and the segments to compact (ratio:
// Options.CompactDead). closed is checked every few thousand records.
func PlanLog(ctx context.Context, c *record.Cursor, floor wal.Pos, deleted map[string]bool, headAfter bool, ratio float64, closed func() error) (Plan, error) {
	plan := Plan{Keep: floor.Segment, explicit: map[ledger.Fingerprint]bool{}, deleted: deleted, headAfter: headAfter}
	sums, err := plan.summarize(ctx, c, floor, closed)
	if err != nil {
		return plan, err
	}
	plan.decide(sums, ratio)
	return plan, nil
}

// summarize is PlanLog's scan.
func (plan *Plan) summarize(ctx context.Context, c *record.Cursor, floor wal.Pos, closed func() error) ([]*segSummary, error) {
	var sums []*segSummary
	var cur *segSummary
	for n := 0; c.Next(); n++ {
		if n%4096 == 0 {
			if err := stopped(ctx, closed); err != nil {
				return nil, err
			}
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
		span := FrameSpan(len(r.Raw))
		cur.size += span
		plan.Scanned += int64(len(r.Raw))
		if !Dead(r, plan.deleted, plan.headAfter, plan.explicit) {
			cur.live += span
			continue
		}
		p := &cur.heads
		if run := RunOf(r); run != "" {
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
// earlier segment (the package's comment). A segment goes whole (with the
// prefix, or compacted to a stub) when every record of it goes; it is
// compacted when what goes is at least ratio of its bytes (ratio < 0:
// never for that), or when a deleted run with records that go from it
// goes on, without its end, into a later segment that could go whole (so
// that it does).
func (plan *Plan) decide(sums []*segSummary, ratio float64) {
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
		sp := SegPlan{ID: s.id, Runs: map[string]bool{}, N: s.heads.n}
		dead := s.heads.bytes
		fps := s.heads.fps
		unblocks := false
		for run, p := range s.runs {
			if retained[run] {
				continue
			}
			sp.Runs[run] = true
			sp.N += p.n
			dead += p.bytes
			fps = append(fps, p.fps...)
			if last, ok := lastWhole[run]; ok && last > i && !s.ends[run] {
				unblocks = true
			}
		}
		whole := dead == s.size
		switch {
		case whole && prefix:
			plan.FPs = append(plan.FPs, fps...) // removed with the prefix
			continue
		case prefix:
			plan.Keep, prefix = s.id, false
		}
		if sp.N > 0 && (whole || unblocks || (ratio >= 0 && float64(dead) >= ratio*float64(s.size))) {
			plan.Compact = append(plan.Compact, sp)
			plan.FPs = append(plan.FPs, fps...)
			continue
		}
		for run := range s.runs {
			retained[run] = true
		}
	}
}
