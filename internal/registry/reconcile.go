package registry

import (
	"fmt"
	"sort"
	"strings"

	"github.com/continuumdb/continuum/internal/erasure"
	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
)

// Table is the engine's table of runs as Reconcile changes it; its
// methods are called under the engine's lock.
type Table interface {
	// Deleted reports whether the engine's deletions hold run id.
	Deleted(id string) bool
	// Built reports whether run id is built (not a row of CHECKPOINT
	// waiting for its first use).
	Built(id string) bool
	// Drop drops the row of run id, not built: it is never built from it.
	Drop(id string)
	// Add builds run id from lr: CHECKPOINT does not list it, or its row
	// was dropped.
	Add(id string, lr *Run)
	// Fix handles run id, built from row c, which disagrees with the log
	// (err says so): withdrawn and broken if the log does not hold it (lr
	// nil); else rebuilt from lr if it has not moved since Open, broken
	// otherwise.
	Fix(id string, c *layout.CheckpointRun, lr *Run, err error)
	// Relink points every fork at the parent the table now holds.
	Relink()
}

// Settle merges the deletions a Scan found (found.Gone) into deleted, the
// engine's, then makes t's runs agree with the log's (Reconcile), all
// under the engine's lock. A deletion that disagrees with one deleted
// holds is returned as why, before t changes (the deletions merged before
// it stay); else mismatch is Reconcile's.
func Settle(rows []layout.CheckpointRun, log map[string]*Run, found *Collector, deleted *retention.Registry, t Table, broken func(id, why string) error) (mismatch, why string) {
	ids, gone := found.Gone.Sorted()
	for i, id := range ids {
		if why := deleted.Merge(id, gone[i]); why != "" {
			return "", why
		}
	}
	return Reconcile(rows, log, t, broken), ""
}

// Reconcile makes t's runs agree with the log's (log, from Scan) where
// CHECKPOINT's rows disagree with them, trusting the log, and describes
// what differed ("" if nothing; at most 8 disagreements, then how many
// more). broken returns the error a run of CHECKPOINT whose row is wrong
// for why fails with.
func Reconcile(rows []layout.CheckpointRun, log map[string]*Run, t Table, broken func(id, why string) error) string {
	var diffs []string
	listed := make(map[string]bool, len(rows))
	for i := range rows {
		c := &rows[i]
		listed[c.ID] = true
		lr := log[c.ID]
		if lr == nil && t.Deleted(c.ID) {
			// Deleted (or erased) at or after the replay position: the
			// replay withdrew the run, the row is merely older. (Dropping
			// the row as a mismatch would count it out of the lazy rows a
			// second time when the replay built it.)
			continue
		}
		why := Disagrees(c, lr)
		if why == "" {
			continue
		}
		diffs = append(diffs, why)
		if t.Built(c.ID) {
			t.Fix(c.ID, c, lr, broken(c.ID, why))
		} else {
			t.Drop(c.ID)
			if lr != nil {
				t.Add(c.ID, lr)
			}
		}
	}
	for id, lr := range log {
		if listed[id] || t.Deleted(id) || t.Built(id) { // built: created again in the tail, which the replay refused
			continue
		}
		diffs = append(diffs, fmt.Sprintf("run %q is in the log, not in CHECKPOINT", id))
		t.Add(id, lr)
	}
	if len(diffs) > 0 {
		// A fork built from a row may point at a run replaced or added.
		t.Relink()
	}
	sort.Strings(diffs)
	if len(diffs) > 8 {
		diffs = append(diffs[:8], fmt.Sprintf("and %d more", len(diffs)-8))
	}
	return strings.Join(diffs, "; ")
}

// Collector is the Host of a Scan that gathers what it meets of the
// other capabilities: the deletions (Gone, retention's registry) and the
// erase-key records (KeyErasures, of the whole log). Stop returns the
// engine's ErrClosed once it is closing (nil: never stops). Others, if
// not nil, is handed the records of other kinds the cursor's Skip let
// through (nil: they are ignored).
type Collector struct {
	Gone        retention.Registry
	KeyErasures []erasure.KeyErasure
	Stop        func() error
	Others      func(r *record.Record) error
}

// Other hands r to Others.
func (h *Collector) Other(r *record.Record) error {
	if h.Others == nil {
		return nil
	}
	return h.Others(r)
}

// Deleted merges r, a delete or erase record, into Gone.
func (h *Collector) Deleted(r *record.Record, parent string) string {
	d := retention.GoneOf(r)
	d.Parent = parent
	return h.Gone.Merge(r.Run, d)
}

// KeyErased notes the erase-key record r.
func (h *Collector) KeyErased(r *record.Record) {
	h.KeyErasures = append(h.KeyErasures, erasure.KeyErasureOf(r))
}

// IsDeleted reports whether Gone holds run.
func (h *Collector) IsDeleted(run string) bool { return h.Gone.Has(run) }

// Closed returns Stop's error.
func (h *Collector) Closed() error {
	if h.Stop == nil {
		return nil
	}
	return h.Stop()
}
