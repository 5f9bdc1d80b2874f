package wait

// WAITS (layout/waits.go): the index as the engine checkpoint saves it
// (Capture), and the table the index reads it as, in place, under an
// overlay of what changed since (x.mu.runs).

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
)

// Row is what CHECKPOINT's row says of a run: its last seq and whether it
// ended (ok false: it has no row).
type Row func(run string) (last uint64, ended, ok bool)

// CheckpointRows is the Row of a checkpoint's rows (sorted by id, as
// CHECKPOINT holds them): a row's last seq, and ended for any status but
// active (0).
func CheckpointRows(rows []layout.CheckpointRun) Row {
	return func(run string) (uint64, bool, bool) {
		i, ok := slices.BinarySearchFunc(rows, run, func(c layout.CheckpointRun, id string) int { return strings.Compare(c.ID, id) })
		if !ok {
			return 0, false, false
		}
		return rows[i].LastSeq, rows[i].Status != 0, true
	}
}

// Mapper is what a Source may implement to hand WAITS's bytes mapped
// from its file, read only, rather than read into memory (so that they
// are no part of the heap): release unmaps them, once the index no
// longer reads them (nil: nothing to release). Like WaitsFile, a missing
// file is an error matching fs.ErrNotExist.
type Mapper interface {
	MapWaitsFile(gen uint64) (name string, b []byte, release func(), err error)
}

// TableOpener is what a Source may implement to open WAITS as a table
// read from its file (an encrypted store's, sealed per block:
// layout.OpenSealedWaits), its blocks read as the index needs them:
// release lets go of the file. An error matching ErrNotTable says the
// file is of a form the index reads from its bytes (Mapper, WaitsFile):
// the store does not seal it, or sealed it whole (written before
// 2026-12). Like WaitsFile, a missing file is an error matching
// fs.ErrNotExist.
type TableOpener interface {
	OpenWaitsTable(gen uint64) (t *layout.WaitsTable, release func(), err error)
}

// ErrNotTable is TableOpener's error for a WAITS it does not open as a
// table.
var ErrNotTable = errors.New("wait: WAITS is not a table sealed per block")

// table is WAITS version 2 as the index reads it, and which of its runs
// the overlay holds. Guarded by the index's mutex, as all of x.mu.
//
// A run of the table is "overlaid" once anything changed it (Apply,
// Taken, Gone, a load's replay of the tail): the overlay (x.mu.runs)
// then holds its entry, copied from the table and changed there, or
// nothing if it left; the table's entry of an overlaid run is dead to
// every query. The overlay's set only grows until Capture writes the
// next table, which replaces this one and empties the overlay.
type table struct {
	t       *layout.WaitsTable
	release func()   // unmaps t's bytes (nil: they are the heap's)
	over    []uint64 // bit i: run i is overlaid
	dlStart int      // the deadline entries before it are all of overlaid runs
	rdStart int      // the ready entries before it are all dead (overlaid, not ready from the table)
	live    Stats    // the counts of the runs not overlaid (Applied unused)
	// peeked is the last run peekLocked decoded from the table (not
	// overlaid: overlaying it clears this), so that entryLocked of the
	// same run does not decode it again; nobody changes a peeked entry.
	peeked peeked
}

type peeked struct {
	i  int
	rw *runWaits
}

func newTable(t *layout.WaitsTable, release func()) *table {
	return &table{t: t, release: unmapOnce(t, release), over: make([]uint64, (t.Runs+63)/64),
		live: Stats{Runs: t.Runs, Open: t.Timers + t.Open, Ready: t.ReadyLen, Pending: t.Pending}}
}

func (tb *table) overlaid(i int) bool { return tb.over[i/64]&(1<<(i%64)) != 0 }

// unmapOnce returns release made idempotent, and called too once t is
// unreachable (an index dropped without a Capture after it: a DB closed),
// nil if release is.
func unmapOnce(t *layout.WaitsTable, release func()) func() {
	if release == nil {
		return nil
	}
	release = sync.OnceFunc(release)
	runtime.AddCleanup(t, func(f func()) { f() }, release)
	return release
}

// free lets go of the table's bytes.
func (tb *table) free() {
	if tb != nil && tb.release != nil {
		tb.release()
		tb.release = nil
	}
}

// Capture returns WAITS (version 2) for the checkpoint of generation gen
// at replay position replay, and makes it the index's table, the overlay
// emptied. The engine calls it with the index loaded, after every run's
// row is captured (row): a wait before its run's last seq was taken, and
// a run that ended waits no more; both leave the index here, so that the
// file, and the memory, hold the waits that matter. It merges the table
// and the overlay in the runs' order, streaming; its cost is the table's
// runs and the overlay's.
func (x *Index) Capture(gen uint64, replay wal.Pos, row Row) ([]byte, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.mu.loaded || x.mu.loadErr != nil {
		return nil, fmt.Errorf("wait: capture of an index not loaded (%v)", x.mu.loadErr)
	}
	var b []byte
	err := guard(func() (err error) { b, err = x.captureLocked(gen, replay, row); return err })
	if err != nil {
		x.rebuildLocked(err)
		if x.mu.loadErr != nil {
			return nil, x.mu.loadErr
		}
		if b, err = x.captureLocked(gen, replay, row); err != nil {
			return nil, err
		}
	}
	t, err := layout.OpenWaitsTable(layout.WaitsName, b)
	if err != nil {
		return nil, fmt.Errorf("wait: capture: the table written does not open: %w", err)
	}
	x.installLocked(newTable(t, nil))
	return b, nil
}

// installLocked makes tb the index's table, the overlay empty.
func (x *Index) installLocked(tb *table) {
	x.mu.table.free()
	x.mu.table = tb
	x.mu.runs = map[string]*runWaits{}
	x.mu.timers = nil
	x.mu.ready.Init()
	x.mu.treadyN = 0
	x.mu.goneSince = nil
}

// captureLocked writes the next table: the table's runs not overlaid
// and the overlay's, merged by id.
func (x *Index) captureLocked(gen uint64, replay wal.Pos, row Row) ([]byte, error) {
	tb := x.mu.table
	// The ready list's order: the table's live entries, then the overlay's.
	rank := map[string]uint64{}
	var n uint64
	if tb != nil {
		for k := tb.rdStart; k < tb.t.ReadyLen; k++ {
			i, err := tb.t.ReadyRun(k)
			if err != nil {
				return nil, err
			}
			id, err := tb.t.RunID(i)
			if err != nil {
				return nil, err
			}
			if tb.overlaid(i) {
				if rw := x.mu.runs[string(id)]; rw == nil || !rw.w.tready {
					continue
				}
			}
			n++
			rank[string(id)] = n
		}
	}
	for e := x.mu.ready.Front(); e != nil; e = e.Next() {
		n++
		rank[e.Value.(*Wait).Run] = n
	}
	ids := make([]string, 0, len(x.mu.runs))
	for id := range x.mu.runs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := layout.NewWaitsBuilder(gen, replay, x.mu.high)
	var fr layout.WaitsRun
	add := func(fr *layout.WaitsRun) {
		if row != nil {
			if last, ended, ok := row(fr.ID); ok {
				if ended {
					return
				}
				if fr.Wait != nil && fr.Wait.Seq < last {
					fr.Wait = nil // taken, and the run left if nothing else of it is kept
					if len(fr.Pending) == 0 && len(fr.Senders) == 0 {
						return
					}
				}
			}
		}
		if fr.Wait != nil {
			fr.Wait.Ready = rank[fr.ID]
		}
		out.Add(fr)
	}
	k, prev := 0, ""
	var or layout.WaitsRun
	emitOverlay := func(upTo string, all bool) {
		for ; k < len(ids) && (all || ids[k] < upTo); k++ {
			fileRun(ids[k], x.mu.runs[ids[k]], &or)
			add(&or)
		}
	}
	if tb != nil {
		for i := range tb.t.Runs {
			if err := tb.t.Run(i, nil, &fr); err != nil {
				return nil, err
			}
			if i > 0 && fr.ID <= prev {
				return nil, fmt.Errorf("wait: %s: run %q follows run %q: the runs are not sorted", layout.WaitsName, fr.ID, prev)
			}
			prev = fr.ID
			emitOverlay(fr.ID, false)
			if tb.overlaid(i) {
				continue
			}
			if k < len(ids) && ids[k] == fr.ID {
				return nil, fmt.Errorf("wait: %s: run %q is in the overlay but not marked so", layout.WaitsName, fr.ID)
			}
			add(&fr)
		}
	}
	emitOverlay("", true)
	return out.Bytes(), nil
}

// fileRun fills fr (reused) with the overlay's entry rw of run id.
func fileRun(id string, rw *runWaits, fr *layout.WaitsRun) {
	*fr = layout.WaitsRun{ID: id, Mark: rw.mark, Pending: fr.Pending[:0], Senders: fr.Senders[:0]}
	if w := rw.cur(); w != nil {
		fw := &layout.WaitsWait{Seq: w.Seq, Name: w.Name, Declared: w.Declared, Deadline: w.Deadline,
			Outcome: uint8(w.Outcome), Ended: w.Ended}
		if w.Event != nil {
			e := fileEvent(w.Event)
			fw.Event = &e
		}
		fr.Wait = fw
	}
	names := make([]string, 0, len(rw.kept()))
	for name := range rw.kept() {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, e := range rw.kept()[name] {
			fr.Pending = append(fr.Pending, fileEvent(e))
		}
	}
	for s, d := range rw.sent() {
		fr.Senders = append(fr.Senders, layout.WaitsSender{ID: s, Digest: d})
	}
	slices.SortFunc(fr.Senders, func(a, b layout.WaitsSender) int { return strings.Compare(a.ID, b.ID) })
}

func fileEvent(e *Event) layout.WaitsEvent {
	return layout.WaitsEvent{Name: e.Name, Sender: e.Sender, Seq: e.Seq, Sent: e.Sent, Payload: e.Payload}
}

// openFileLocked opens WAITS as the index's table (version 1 is decoded
// and encoded as version 2 once, in memory), or says why it cannot: the
// file is missing, damaged or of another checkpoint. What each run's
// entry says (its event's digest its sender id's, no time past the
// file's latest) is checked when the entry is first read.
func (x *Index) openFileLocked(src Source) string {
	t, release, err := openTable(src, x.mu.gen)
	if layout.NotExist(err) {
		return "it is missing"
	}
	switch {
	case err != nil:
	case t.Gen != x.mu.gen || t.Replay != x.mu.replay:
		err = fmt.Errorf("it was written by checkpoint %d at %v, CHECKPOINT is %d at %v", t.Gen, t.Replay, x.mu.gen, x.mu.replay)
	}
	if err != nil {
		if release != nil {
			release()
		}
		return err.Error()
	}
	x.mu.table = newTable(t, release)
	x.mu.high = t.High
	return ""
}

// openTable opens the Source's WAITS of generation gen as a table: as
// the Source opens it (TableOpener), else from its bytes, mapped
// (Mapper) or read (version 1 is decoded and encoded as version 2 once,
// in memory).
func openTable(src Source, gen uint64) (*layout.WaitsTable, func(), error) {
	if o, ok := src.(TableOpener); ok {
		t, release, err := o.OpenWaitsTable(gen)
		if !errors.Is(err, ErrNotTable) {
			return t, release, err
		}
	}
	var name string
	var b []byte
	var release func()
	var err error
	if m, ok := src.(Mapper); ok {
		name, b, release, err = m.MapWaitsFile(gen)
	} else {
		name, b, err = src.WaitsFile(gen)
	}
	if err != nil {
		return nil, nil, err
	}
	if layout.WaitsVersion(b) != 2 {
		w, err := layout.ParseWaits(name, b)
		if release != nil {
			release()
			release = nil
		}
		if err != nil {
			return nil, nil, err
		}
		b = w.MarshalTable()
	}
	t, err := layout.OpenWaitsTable(name, b)
	if err != nil && release != nil {
		release()
		release = nil
	}
	return t, release, err
}

// Installed says that WAITS of generation gen, as the last Capture
// returned it, is durable in its file: if the Source opens the file as a
// table (TableOpener: sealed per block) or maps it (Mapper), the index
// reads the file from now on, and lets go of its own copy. Nothing
// changes if the file is not that table.
func (x *Index) Installed(gen uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	tb := x.mu.table
	_, opens := x.mu.src.(TableOpener)
	_, maps := x.mu.src.(Mapper)
	if !opens && !maps || tb == nil || tb.release != nil || tb.t.Gen != gen {
		return
	}
	var t *layout.WaitsTable
	var release func()
	same := false
	err := guard(func() (err error) {
		if t, release, err = openTable(x.mu.src, gen); err == nil && release != nil {
			same = t.Same(tb.t)
		}
		return err
	})
	if err != nil || release == nil || !same {
		if release != nil {
			release()
		}
		return
	}
	tb.t, tb.release = t, unmapOnce(t, release)
}

// ErrClosed is the index's error once Close let go of it.
var ErrClosed = errors.New("wait: the index is closed")

// Close lets go of the table (unmaps WAITS) and empties the index: its
// queries answer nothing and its error is ErrClosed. For the DB's Close.
func (x *Index) Close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.resetLocked()
	x.mu.loadErr = ErrClosed
}

// decodeLocked returns the table's run i as an entry of the index (not
// in the overlay), or the damage that makes the table unusable: the
// entry's own, an event whose digest is not its sender id's, a time past
// the file's latest.
func (x *Index) decodeLocked(i int) (*runWaits, error) {
	tb := x.mu.table
	var fr layout.WaitsRun
	if err := tb.t.Run(i, nil, &fr); err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("wait: %s: run %q: %s", layout.WaitsName, fr.ID, fmt.Sprintf(format, args...))
	}
	rw := &runWaits{mark: fr.Mark}
	if len(fr.Senders) > 0 {
		rw.extra().senders = make(map[string][32]byte, len(fr.Senders))
		for _, s := range fr.Senders {
			rw.more.senders[s.ID] = s.Digest
		}
	}
	high := tb.t.High
	event := func(fe *layout.WaitsEvent) (*Event, error) {
		e := &Event{Run: fr.ID, Name: fe.Name, Sender: fe.Sender, Seq: fe.Seq, Sent: fe.Sent,
			Payload: append([]byte(nil), fe.Payload...), Digest: Digest(fe.Name, fe.Payload)}
		if d, ok := rw.sent()[e.Sender]; !ok || d != e.Digest {
			return nil, bad("the event of sender %q is not the one its sender id names", e.Sender)
		}
		if e.Sent > high {
			return nil, bad("an event sent at %d, after the file's latest time, %d", e.Sent, high)
		}
		return e, nil
	}
	if fw := fr.Wait; fw != nil {
		rw.w = Wait{Run: fr.ID, Seq: fw.Seq, Name: fw.Name, Declared: fw.Declared, Deadline: fw.Deadline,
			Outcome: Outcome(fw.Outcome), Ended: fw.Ended, heapAt: -1, tready: fw.Ready != 0}
		if max(fw.Declared, fw.Ended) > high {
			return nil, bad("a wait of time %d, after the file's latest, %d", max(fw.Declared, fw.Ended), high)
		}
		if fw.Event != nil {
			e, err := event(fw.Event)
			if err != nil {
				return nil, err
			}
			rw.w.Event = e
		}
	}
	for k := range fr.Pending {
		e, err := event(&fr.Pending[k])
		if err != nil {
			return nil, err
		}
		m := rw.extra()
		if m.pending == nil {
			m.pending = map[string][]*Event{}
		}
		m.pending[e.Name] = append(m.pending[e.Name], e)
	}
	return rw, nil
}

// counts is what rw adds to the index's Stats.
func (rw *runWaits) counts() Stats {
	s := Stats{Runs: 1}
	if rw.w.Run != "" && rw.w.Outcome == Open {
		s.Open = 1
	}
	if rw.w.tready {
		s.Ready = 1
	}
	for _, es := range rw.kept() {
		s.Pending += len(es)
	}
	return s
}

// findLocked returns the table's index of run, if the table holds it and
// it is not overlaid.
func (x *Index) findLocked(run string) (int, bool, error) {
	tb := x.mu.table
	if tb == nil {
		return 0, false, nil
	}
	i, ok, err := tb.t.Find(run)
	if err != nil || !ok || tb.overlaid(i) {
		return 0, false, err
	}
	return i, true, nil
}

// peekLocked returns what the index holds of run, from the overlay or
// decoded from the table (then not the overlay's: not to be changed);
// nil: nothing.
func (x *Index) peekLocked(run string) (*runWaits, error) {
	if rw := x.mu.runs[run]; rw != nil {
		return rw, nil
	}
	i, ok, err := x.findLocked(run)
	if err != nil || !ok {
		return nil, err
	}
	if p := &x.mu.table.peeked; p.rw != nil && p.i == i {
		return p.rw, nil
	}
	rw, err := x.decodeLocked(i)
	if err == nil {
		x.mu.table.peeked = peeked{i, rw}
	}
	return rw, err
}

// overlayLocked marks the table's run i overlaid, with rw (nil: it
// left) its entry in the overlay.
func (x *Index) overlayLocked(i int, run string, rw *runWaits) {
	tb := x.mu.table
	tb.over[i/64] |= 1 << (i % 64)
	if tb.peeked.i == i {
		tb.peeked = peeked{}
	}
	if rw == nil {
		return
	}
	c := rw.counts()
	tb.live.Runs -= c.Runs
	tb.live.Open -= c.Open
	tb.live.Ready -= c.Ready
	tb.live.Pending -= c.Pending
	x.mu.runs[run] = rw
	if w := rw.cur(); w != nil {
		w.Run = run
		if w.Outcome == Open && w.Deadline != 0 {
			x.pushTimerLocked(w)
		}
		if w.tready {
			x.mu.treadyN++
		}
	}
}

// entryLocked returns run's entry in the overlay, made (from the table's,
// if it holds the run) if needed.
func (x *Index) entryLocked(run string) (*runWaits, error) {
	if rw := x.mu.runs[run]; rw != nil {
		return rw, nil
	}
	tb := x.mu.table
	if tb != nil {
		i, ok, err := tb.t.Find(run)
		if err != nil {
			return nil, err
		}
		if ok && !tb.overlaid(i) {
			rw := tb.peeked.rw // the run just peeked at, decoded already (FireDue: Current, then Apply)
			if rw == nil || tb.peeked.i != i {
				if rw, err = x.decodeLocked(i); err != nil {
					return nil, err
				}
			}
			tb.peeked = peeked{}
			x.overlayLocked(i, run, rw)
			return rw, nil
		}
	}
	rw := &runWaits{}
	x.mu.runs[run] = rw
	return rw, nil
}

// tableDueLocked returns the table's open waits not overlaid whose
// deadline is at or before now, up to max, in the section's order.
func (x *Index) tableDueLocked(now int64, max int) ([]Wait, error) {
	tb := x.mu.table
	if tb == nil {
		return nil, nil
	}
	var out []Wait
	for k := tb.dlStart; k < tb.t.Timers && len(out) < max; k++ {
		at, i, err := tb.t.Deadline(k)
		if err != nil {
			return nil, err
		}
		if tb.overlaid(i) {
			if k == tb.dlStart {
				tb.dlStart++
			}
			continue
		}
		if at > now {
			break
		}
		rw, err := x.decodeLocked(i)
		if err != nil {
			return nil, err
		}
		if rw.w.Run == "" || rw.w.Outcome != Open || rw.w.Deadline != at {
			return nil, fmt.Errorf("wait: %s: deadline entry %d says run %q waits until %d; its entry says otherwise", layout.WaitsName, k, rw.w.Run, at)
		}
		if n := len(out); n > 0 && out[n-1].Deadline == at && out[n-1].Run >= rw.w.Run {
			return nil, fmt.Errorf("wait: %s: deadline entry %d is out of order", layout.WaitsName, k)
		}
		out = append(out, rw.w.copy())
	}
	return out, nil
}

// tableNextLocked returns the earliest deadline of the table's open waits
// not overlaid.
func (x *Index) tableNextLocked() (int64, bool, error) {
	tb := x.mu.table
	if tb == nil {
		return 0, false, nil
	}
	for ; tb.dlStart < tb.t.Timers; tb.dlStart++ {
		at, i, err := tb.t.Deadline(tb.dlStart)
		if err != nil {
			return 0, false, err
		}
		if !tb.overlaid(i) {
			return at, true, nil
		}
	}
	return 0, false, nil
}

// tableReadyLocked returns up to max of the table's ready waits still
// ready (not overlaid, or overlaid and not taken), in the section's
// order.
func (x *Index) tableReadyLocked(max int) ([]Wait, error) {
	tb := x.mu.table
	if tb == nil {
		return nil, nil
	}
	var out []Wait
	for k := tb.rdStart; k < tb.t.ReadyLen && len(out) < max; k++ {
		i, err := tb.t.ReadyRun(k)
		if err != nil {
			return nil, err
		}
		if tb.overlaid(i) {
			id, err := tb.t.RunID(i)
			if err != nil {
				return nil, err
			}
			if rw := x.mu.runs[string(id)]; rw != nil && rw.w.tready {
				out = append(out, rw.w.copy())
			} else if k == tb.rdStart {
				tb.rdStart++
			}
			continue
		}
		rw, err := x.decodeLocked(i)
		if err != nil {
			return nil, err
		}
		if !rw.w.tready {
			return nil, fmt.Errorf("wait: %s: ready entry %d names run %q, whose wait is not ready", layout.WaitsName, k, rw.w.Run)
		}
		out = append(out, rw.w.copy())
	}
	return out, nil
}
