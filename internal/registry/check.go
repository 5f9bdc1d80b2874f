package registry

import (
	"sync"
	"sync/atomic"

	"github.com/continuumdb/continuum/internal/wait"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Engine is what a Check needs of the engine (see the package's doc);
// its methods are called on the goroutine that runs the check, without
// the engine's lock held unless a method says so.
type Engine interface {
	// WaitsFromFile reports whether the index of waits was loaded from
	// WAITS: the same read of the log then gathers the log's records of
	// waits, and WAITS is compared with them.
	WaitsFromFile() bool
	// ReadLog reads the log's runs before to (Scan, with a Collector),
	// handing its records of waits to waits if it is not nil.
	ReadLog(to wal.Pos, waits *wait.Check) (map[string]*Run, *Collector, error)
	// Settle is Settle over the engine's deletions and table of runs,
	// under the engine's lock.
	Settle(rows []layout.CheckpointRun, log map[string]*Run, found *Collector) (mismatch, why string)
	// Corrupt is the error the check fails with when a deletion the log
	// holds disagrees with one the engine holds (why).
	Corrupt(why string) error
	// Heal finishes what the log's deletions and key erasures, now all
	// known, leave to do (erasures an older KEYS undid).
	Heal(found *Collector)
	// Disagreed reports how CHECKPOINT's runs disagreed with the log's
	// (the log's are used).
	Disagreed(mismatch string)
	// CheckWaits compares WAITS with the log's records of waits
	// (wait.Waits.CheckFile) for the runs live says the log holds live,
	// and returns the disagreement.
	CheckWaits(waits *wait.Check, to wal.Pos, live wait.Live) (string, error)
}

// Check is the one-time comparison of CHECKPOINT's runs with the log,
// set up by an Open from a CHECKPOINT (a nil *Check: Open did not start
// from one, and there is nothing to check). Its steps, in their order
// (Run): the log read once before the replay position, its deletions
// merged and the table of runs reconciled, the healing the deletions
// allow, then WAITS compared with the same read's records of waits.
type Check struct {
	rows []layout.CheckpointRun // CHECKPOINT's table, sorted by id (immutable)
	to   wal.Pos                // CHECKPOINT's replay position

	once     sync.Once
	checked  atomic.Bool // the runs were reconciled (once's body got that far)
	err      error       // set inside once
	mismatch string      // the disagreements found; set inside once, read once checked
	// waitsMismatch is how WAITS disagreed with the log (the index was
	// rebuilt from the log); set inside once, read once waitsDone.
	waitsMismatch string
	waitsDone     atomic.Bool // the check of WAITS ran (or had nothing to check)
}

// NewCheck sets up the check of rows, CHECKPOINT's table of runs (sorted,
// not changed after), against the log before to, its replay position.
func NewCheck(rows []layout.CheckpointRun, to wal.Pos) *Check {
	return &Check{rows: rows, to: to}
}

// Run runs the check once, over e, and returns its error (every call
// after the first returns the first's). A nil c returns nil.
func (c *Check) Run(e Engine) error {
	if c == nil {
		return nil
	}
	c.once.Do(func() {
		defer c.waitsDone.Store(true)
		var waits *wait.Check // the log's copy of the waits, for this read only
		if e.WaitsFromFile() {
			waits = wait.NewCheck(c.to)
		}
		runs, found, err := e.ReadLog(c.to, waits)
		if err != nil {
			c.err = err
			return
		}
		mismatch, why := e.Settle(c.rows, runs, found)
		if why != "" {
			c.err = e.Corrupt(why)
			return
		}
		c.mismatch = mismatch
		c.checked.Store(true)
		e.Heal(found)
		if mismatch != "" {
			e.Disagreed(mismatch)
		}
		if waits != nil {
			c.waitsMismatch, c.err = e.CheckWaits(waits, c.to, found.Live(runs))
		}
	})
	return c.err
}

// Unchecked reports whether CHECKPOINT's runs are still to be checked
// against the log (Run has not reconciled them).
func (c *Check) Unchecked() bool { return c != nil && !c.checked.Load() }

// Checked reports whether Run reconciled the runs.
func (c *Check) Checked() bool { return c != nil && c.checked.Load() }

// Mismatch returns what Run found, once it reconciled the runs ("" if
// the runs agreed, or before).
func (c *Check) Mismatch() string {
	if !c.Checked() {
		return ""
	}
	return c.mismatch
}

// WaitsDone reports whether the check of WAITS ran, or had nothing to
// check (false for a nil c: there is no check).
func (c *Check) WaitsDone() bool { return c != nil && c.waitsDone.Load() }

// WaitsMismatch returns how WAITS disagreed with the log, once its check
// ran ("" if it agreed, was not compared, or before).
func (c *Check) WaitsMismatch() string {
	if !c.WaitsDone() {
		return ""
	}
	return c.waitsMismatch
}

// Live is, for the check of WAITS, the runs the log holds live: neither
// ended (before the replay position or after it) nor deleted; last is
// the run's last seq in the whole log.
func (h *Collector) Live(log map[string]*Run) wait.Live {
	return func(id string) (uint64, bool) {
		lr := log[id]
		if lr == nil || lr.End != nil || lr.EndAfter != nil || h.Gone.Has(id) {
			return 0, false
		}
		return lr.Last + uint64(len(lr.After)), true
	}
}

// SkipFor is the Skip of the check's read of the log: Skip, except that
// the records of waits are let through when waits is set (for the check
// of WAITS, in the same read), and seen is called for each stream record
// the read meets (the log before the replay holds streams).
func SkipFor(waits bool, seen func()) func(record.Kind, []byte) bool {
	return func(k record.Kind, raw []byte) bool {
		if k == record.KindStreamChunk || k == record.KindStreamAbandon {
			seen()
		}
		if waits && (k == record.KindWait || k == record.KindEvent || k == record.KindWake) {
			return false
		}
		return Skip(k, raw)
	}
}

// AddWaits is the Collector's Others of the check's read: each record of
// waits is added to waits with its event's payload (payload's, which
// opens it; its error stops the read).
func AddWaits(waits *wait.Check, payload func(*record.Record) ([]byte, error)) func(*record.Record) error {
	return func(r *record.Record) error {
		p, err := payload(r)
		if err != nil {
			return err
		}
		waits.Add(r, p)
		return nil
	}
}
