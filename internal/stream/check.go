package stream

import (
	"fmt"

	"github.com/continuumdb/continuum/record"
)

// Checker checks the log's stream records against the rules of
// record/stream.go, fed every record of the log in order (verify). It
// keeps per run its last atom's seq and the highest attempt of the next
// seq, and per stream the next offset.
type Checker struct {
	// Trimmed says garbage collection trimmed the log: a record of a run
	// whose creation record is gone is then not damage by itself (its run
	// was deleted; Finish reports the runs that were not).
	Trimmed bool

	runs    map[string]*checkRun
	orphans map[string]string // run -> the first problem of a run the log never created
	// Chunks and Abandons count the stream records checked.
	Chunks, Abandons int
}

type checkRun struct {
	last    uint64 // the seq of the run's last atom (a fork's base before any)
	attempt uint64 // the highest attempt of seq last+1 with a chunk
	closed  uint64 // the highest attempt of seq last+1 a fail or abandon record settled
	ended   bool
	offsets map[string]uint64 // stream -> its next offset
}

// Note feeds the checker record r, of any kind, and returns why r breaks
// a rule of streams ("" if it breaks none).
func (c *Checker) Note(r *record.Record) string {
	if c.runs == nil {
		c.runs = map[string]*checkRun{}
		c.orphans = map[string]string{}
	}
	switch r.Kind {
	case record.KindRun:
		c.runs[r.Run] = &checkRun{}
	case record.KindFork:
		c.runs[r.Run] = &checkRun{last: r.Seq}
	case record.KindAtom:
		if cr := c.runs[r.Run]; cr != nil && r.Seq > cr.last {
			cr.last, cr.attempt, cr.closed = r.Seq, 0, 0
		}
	case record.KindFail:
		if cr := c.runs[r.Run]; cr != nil && r.Seq == cr.last+1 {
			cr.closed = cr.attempt
		}
	case record.KindEnd:
		if cr := c.runs[r.Run]; cr != nil {
			cr.ended = true
		}
	case record.KindDelete, record.KindErase:
		delete(c.runs, r.Run)
		delete(c.orphans, r.Run)
	case record.KindStreamChunk, record.KindStreamAbandon:
		return c.stream(r)
	}
	return ""
}

func (c *Checker) stream(r *record.Record) string {
	what := "stream chunk"
	if r.Kind == record.KindStreamAbandon {
		what = "stream abandon"
		c.Abandons++
	} else {
		c.Chunks++
	}
	cr := c.runs[r.Run]
	switch {
	case cr == nil:
		why := what + " of a run whose creation record is not in the log before it"
		if c.Trimmed {
			if _, ok := c.orphans[r.Run]; !ok {
				c.orphans[r.Run] = why
			}
			return ""
		}
		return why
	case cr.ended:
		return what + " after the run ended"
	case r.Seq != cr.last+1:
		return fmt.Sprintf("%s of seq %d, the run's next atom is seq %d", what, r.Seq, cr.last+1)
	}
	if r.Kind == record.KindStreamAbandon {
		if r.Attempt > cr.attempt {
			return fmt.Sprintf("abandons attempts up to %d of seq %d, whose chunks name attempts up to %d", r.Attempt, r.Seq, cr.attempt)
		}
		cr.closed = max(cr.closed, r.Attempt)
		return ""
	}
	if r.Attempt < cr.attempt {
		return fmt.Sprintf("chunk of attempt %d of seq %d after a chunk of attempt %d", r.Attempt, r.Seq, cr.attempt)
	}
	if r.Attempt <= cr.closed {
		return fmt.Sprintf("chunk of attempt %d of seq %d, after a fail or abandon record settled it", r.Attempt, r.Seq)
	}
	cr.attempt = r.Attempt
	if cr.offsets == nil {
		cr.offsets = map[string]uint64{}
	}
	if want := cr.offsets[r.Stream]; r.Offset != want {
		if r.Offset > want {
			return fmt.Sprintf("chunk at offset %d of stream %q: offsets %d to %d are missing", r.Offset, r.Stream, want, r.Offset-1)
		}
		return fmt.Sprintf("chunk at offset %d of stream %q again (the next is %d)", r.Offset, r.Stream, want)
	}
	cr.offsets[r.Stream]++
	return ""
}

// Finish returns, by run, why the stream records of runs the log never
// created and never deleted are damage (a trimmed log only).
func (c *Checker) Finish() map[string]string { return c.orphans }
