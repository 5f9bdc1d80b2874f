package wait

// The check of the index's table (WAITS as Open loaded it, or as a
// Capture since wrote it) against the log, a moment after Open: a WAITS
// forged with its checksums recomputed is self-consistent, and only the
// log shows it (docs/DESIGN.md, "The log is the truth (I9), in full");
// and Waits's side of it: CheckFile, Trusted (no record decided on the
// table's word before the check), the first Ready's due waits read back
// from the log one by one (dueInLog).

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Live says what the log says of a run: its last seq, and whether it
// lives (the log created it, and neither ended nor deleted it). The
// check compares only live runs: a Capture drops the others, and the
// engine refuses them whatever the index says.
type Live func(run string) (last uint64, ok bool)

// Check is the log's side of the comparison: every record of waits of the
// log, applied to an index of its own as a Scan meets them (Add), and a
// copy of those at or after the replay position, for the table's side.
// Not safe for concurrent use.
type Check struct {
	whole  *Index
	replay wal.Pos
	tail   []*record.Record
	last   wal.Pos // the position of the last record added
	n      int
}

// NewCheck returns an empty Check; replay is the replay position of the
// CHECKPOINT Open used: the table's side keeps the records from there.
func NewCheck(replay wal.Pos) *Check {
	c := &Check{whole: New(nil), replay: replay}
	c.whole.mu.loaded = true // an index of the log's records only: no table, nothing to load
	return c
}

// Add applies a wait, event or wake record of the log, in the log's
// order; payload is an event's plaintext (nil: erased). rec and payload
// are copied.
func (c *Check) Add(rec *record.Record, payload []byte) {
	if rec.Wait == nil || !c.last.Less(rec.Pos) && c.n > 0 {
		return // not a record of waits, or one added already
	}
	w := *rec.Wait
	w.Payload = bytes.Clone(payload)
	cp := &record.Record{Kind: rec.Kind, Run: rec.Run, Seq: rec.Seq, Pos: rec.Pos, Wait: &w}
	c.whole.Apply(cp, w.Payload)
	if !rec.Pos.Less(c.replay) {
		c.tail = append(c.tail, cp)
	}
	c.last, c.n = rec.Pos, c.n+1
}

// Last returns the position of the last record added, and whether one was.
func (c *Check) Last() (wal.Pos, bool) { return c.last, c.n > 0 }

// Records returns how many records were added.
func (c *Check) Records() int { return c.n }

// CheckTable compares the index's table (WAITS as loaded, or as a Capture
// since wrote it: not the overlay) with the log: the table with the
// log's records after its replay position applied, as Load applies them,
// must say of every live run what c, the log's every record, says: its
// wait after its last atom (name, times, outcome, the event it took), its
// events no wait took, its sender ids, the open waits due by deadline and
// the waits ready. more, if not nil, reads the log's records of waits
// after c's last (those appended since the scan that filled c) into c;
// it is called with the index's mutex held, and must take none of the
// engine's locks but the log's.
//
// It returns what disagrees ("" if nothing, or if the index has no
// table: it was built from the log), at most 8 disagreements then how
// many more. It changes nothing: Distrust does.
func (x *Index) CheckTable(c *Check, live Live, more func(c *Check) error) (string, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.mu.loaded || x.mu.loadErr != nil || x.mu.table == nil {
		return "", nil
	}
	if more != nil {
		if err := more(c); err != nil {
			return "", err
		}
	}
	t := x.mu.table.t
	var damaged string
	loaded := New(nil)
	loaded.From(t.Gen, t.Replay)
	// The table's bytes are the index's until its next install, which
	// needs the mutex held here.
	src := RecordSource{Name: layout.WaitsName, File: t.Bytes(), Table: t, Records: c.tail, Rebuilt: func(why string) { damaged = why }}
	if err := loaded.Load(src); err != nil {
		return "", err
	}
	if damaged != "" {
		return fmt.Sprintf("%s: %s", layout.WaitsName, damaged), nil
	}
	var diff string
	if err := guard(func() error { diff = compareIndexes(loaded, c.whole, live); return nil }); err != nil {
		return err.Error(), nil
	}
	return diff, nil
}

// compareIndexes describes where got (the table's side) and want (the
// log's) disagree on the live runs.
func compareIndexes(got, want *Index, live Live) string {
	runs := map[string]bool{}
	for _, x := range []*Index{got, want} {
		x.mu.Lock()
		for id := range x.mu.runs {
			runs[id] = true
		}
		if tb := x.mu.table; tb != nil {
			for i := range tb.t.Runs {
				if id, err := tb.t.RunID(i); err == nil {
					runs[string(id)] = true
				}
			}
		}
		x.mu.Unlock()
	}
	var diffs []string
	lasts := map[string]uint64{}
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range runs {
			if !yield(id) {
				return
			}
		}
	}) {
		last, ok := live(id)
		if !ok {
			continue
		}
		lasts[id] = last
		g, err := runView(got, id, last)
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("run %q: %v", id, err))
			continue
		}
		if w, _ := runView(want, id, last); g != w {
			diffs = append(diffs, fmt.Sprintf("run %q: WAITS says %s; the log says %s", id, g, w))
		}
	}
	listed := func(ws []Wait) []string {
		var out []string
		for _, w := range ws {
			if last, ok := lasts[w.Run]; ok && w.Seq >= last {
				out = append(out, fmt.Sprintf("%s/%d@%d", w.Run, w.Seq, w.Deadline))
			}
		}
		slices.Sort(out) // the order of ends across runs is the order they were applied in
		return out
	}
	if g, w := listed(got.Ready(math.MaxInt)), listed(want.Ready(math.MaxInt)); !slices.Equal(g, w) {
		diffs = append(diffs, fmt.Sprintf("WAITS lists %d waits ready (run/seq@deadline) %s, the log %d %s", len(g), some(g), len(w), some(w)))
	}
	if g, w := listed(got.Due(math.MaxInt64, math.MaxInt)), listed(want.Due(math.MaxInt64, math.MaxInt)); !slices.Equal(g, w) {
		diffs = append(diffs, fmt.Sprintf("WAITS lists %d open waits by deadline (run/seq@deadline) %s, the log %d %s", len(g), some(g), len(w), some(w)))
	}
	if len(diffs) > 8 {
		diffs = append(diffs[:8], fmt.Sprintf("and %d more", len(diffs)-8))
	}
	return strings.Join(diffs, "; ")
}

// runView is what x says of run, whose last seq is last: its wait after
// it, its kept events and its sender ids, with times and digests; err is
// the damage met reading it.
func runView(x *Index, run string, last uint64) (string, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	rw, err := x.peekLocked(run)
	if err != nil || rw == nil {
		return "nothing", err
	}
	var fr layout.WaitsRun
	fileRun(run, rw, &fr)
	var b strings.Builder
	if w := fr.Wait; w != nil && w.Seq >= last {
		fmt.Fprintf(&b, "a wait after seq %d for %q declared at %d, deadline %d, %v at %d", w.Seq, w.Name, w.Declared, w.Deadline, Outcome(w.Outcome), w.Ended)
		if e := w.Event; e != nil {
			fmt.Fprintf(&b, " by the event of sender %q at seq %d (%x)", e.Sender, e.Seq, short(Digest(e.Name, e.Payload)))
		}
	} else {
		b.WriteString("no wait")
	}
	for _, e := range fr.Pending {
		fmt.Fprintf(&b, ", kept %q of sender %q at seq %d (%x)", e.Name, e.Sender, e.Seq, short(Digest(e.Name, e.Payload)))
	}
	for _, s := range fr.Senders {
		fmt.Fprintf(&b, ", sender %q (%x)", s.ID, s.Digest[:8])
	}
	return b.String(), nil
}

// some is up to 4 of ss, and how many more.
func some(ss []string) string {
	if len(ss) <= 4 {
		return fmt.Sprint(ss)
	}
	return fmt.Sprintf("%v and %d more", ss[:4], len(ss)-4)
}

// short is the first 8 bytes of a digest.
func short(d [32]byte) []byte { return d[:8] }

// Distrust makes the index the log's alone, why being what the check
// found: before Load, Load reads the whole log and not WAITS; after it,
// the index is rebuilt from the whole log now (the rebuild after damage
// met late: the runs Gone since the table are dropped again). Rebuilt
// says why from then on.
func (x *Index) Distrust(why string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	why = "it disagrees with the log: " + why
	if !x.mu.loaded {
		x.mu.gen, x.mu.replay = 0, wal.Pos{}
		x.mu.rebuilt = why
		return
	}
	if x.mu.loadErr != nil || x.mu.src == nil {
		return
	}
	if !x.rebuildFromLogLocked(why) {
		return
	}
	close(x.mu.changed)
	x.mu.changed = make(chan struct{})
}

// FromFile reports whether the index was loaded, or will load, from WAITS
// (From named a checkpoint and nothing made it rebuild from the log), so
// that its answers may be a forged file's until CheckTable.
func (x *Index) FromFile() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.mu.gen != 0 && x.mu.rebuilt == "" && x.mu.loadErr == nil
}

// Mark returns the log position of the last record of run the index
// reflects (its entry's mark, the table's or the overlay's); ok false:
// the index holds nothing of run. A caller that reads the record there
// checks a single answer against the log without the whole check
// (Waits.dueInLog).
func (x *Index) Mark(run string) (wal.Pos, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var p wal.Pos
	var ok bool
	x.must(func() error {
		rw, err := x.peekLocked(run)
		if rw != nil {
			p, ok = rw.mark, true
		}
		return err
	})
	return p, ok
}

// maxDueInLog bounds the due waits a Ready checks one by one against the
// log before the check of WAITS ended; past it, it waits for the check.
const maxDueInLog = 4096

// unchecked reports whether the index may answer on WAITS's word: it is
// (or will be) loaded from WAITS, and the check against the log has not
// ended.
func (w *Waits) unchecked() bool { return w.core.Checking() && w.idx.FromFile() }

// Trusted returns once what the index decides is the log's word: at once
// when the index was built from the log, or once the check of WAITS
// against the log (Core.CheckLog) ran. Every call that writes a record of
// waits, or hands an atom the wait it takes, waits for it first, so that
// no record is decided on a forged WAITS's word.
func (w *Waits) Trusted() error {
	if !w.unchecked() {
		return nil
	}
	return w.core.CheckLog()
}

// dueInLog reports whether each open wait of ws (Due's) is the log's: the
// record at its run's mark (the last record the index reflects of the
// run) is the wait's own record, with its name, time and deadline. One
// read of the log per wait: the first Ready after a restart records the
// due timeouts on the log's word at the cost of the due ones, not of the
// whole check. (What it cannot see: a wait the log ended, reopened by a
// forger who also moved its run's mark back to the wait's record; the
// check a moment after Open finds that.)
func (w *Waits) dueInLog(ws []Wait) bool {
	src := w.core.Source()
	dec := src.Decoder()
	var r record.Record
	for i := range ws {
		d := &ws[i]
		pos, ok := w.idx.Mark(d.Run)
		if !ok || d.Outcome != Open {
			return false
		}
		raw, err := src.Log.ReadAt(pos)
		if err != nil {
			return false
		}
		if err := dec.Decode(raw, pos, src.File(pos.Segment), &r); err != nil {
			return false
		}
		if r.Kind != record.KindWait || r.Wait == nil || r.Run != d.Run || r.Seq != d.Seq ||
			r.Wait.Name != d.Name || r.Wait.At != d.Declared || r.Wait.Deadline != d.Deadline {
			return false
		}
	}
	return true
}

// CheckFile compares the index's table (WAITS as Open loaded it,
// CheckTable) with c, the log's records of waits up to its last, and
// those appended since (read through the Source from c's last, or from
// replay, CHECKPOINT's replay position), for the runs live says live; on
// any disagreement, which it returns, the index is rebuilt from the log
// (Distrust, which warns through the Source). An index whose load failed
// is not compared: every use of it returns its error.
func (w *Waits) CheckFile(c *Check, replay wal.Pos, live Live) (string, error) {
	if err := w.Load(); err != nil {
		return "", nil
	}
	more := func(c *Check) error {
		from, ok := c.Last()
		if !ok {
			from = replay
		}
		return w.core.Source().Scan(from, func(r *record.Record, payload []byte) error {
			c.Add(r, payload)
			return nil
		})
	}
	diff, err := w.idx.CheckTable(c, live, more)
	if err != nil {
		return "", fmt.Errorf("engine: check WAITS against the log: %w", err)
	}
	if diff == "" {
		return "", nil
	}
	w.idx.Distrust(diff)
	w.changed()
	return diff, w.idx.Err()
}
