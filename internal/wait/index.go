package wait

import (
	"container/heap"
	"container/list"
	"fmt"
	"sync"
	"time"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
	"github.com/zeebo/blake3"
)

// Outcome says how a wait stands.
type Outcome uint8

// The outcomes of a wait.
const (
	Open      Outcome = iota // not ended
	Delivered                // an event matched it
	TimedOut                 // its deadline passed (a wake record, WakeTimeout)
	Cancelled                // the run cancelled it (a wake record, WakeCancel)
)

func (o Outcome) String() string {
	switch o {
	case Open:
		return "open"
	case Delivered:
		return "delivered"
	case TimedOut:
		return "timed out"
	case Cancelled:
		return "cancelled"
	}
	return fmt.Sprintf("outcome-%d", uint8(o))
}

// Event is an event as the index holds it. Payload is the plaintext,
// owned by the index: callers copy it before they hand it out.
type Event struct {
	Run, Name, Sender string
	Seq               uint64 // the run's last seq when it was sent
	Sent              int64  // unix ns, the recorded reading
	Payload           []byte
	Digest            [32]byte // BLAKE3-256 of name, NUL, payload: what a repeated send is compared by
}

// Wait is a wait as the index holds it; callers get copies.
type Wait struct {
	Run      string
	Seq      uint64 // the run's last seq when declared: the wait's name in its run
	Name     string // "" for a timer
	Declared int64  // unix ns
	Deadline int64  // unix ns, 0: none
	Ended    int64  // unix ns, the recorded reading of its end: the event's or the wake's time (the wait's own when it matched a kept event)
	Event    *Event // Delivered: the event it took (shared: read only)

	ready   *list.Element // its place in the ready list, nil if not there
	heapAt  int32         // its place in the deadline heap, -1 if not there
	Outcome Outcome
	tready  bool // ready in the table's ready section, and still so (its place there is its place in the list)
}

// runWaits is what the index holds of one run: one allocation of 112
// bytes for a run that waits and has no kept event nor sender id.
type runWaits struct {
	w    Wait     // the run's last wait, if w.Run != ""
	more *runMore // nil: no kept event, no sender id
	// mark is the log position of the run's last record applied: a Load
	// over WAITS applies the run's records after it only.
	mark wal.Pos
}

// runMore is what a run that took events holds besides its wait.
type runMore struct {
	pending map[string][]*Event // events no wait took yet, by name, in log order
	senders map[string][32]byte // the digest of each sender id's event
}

// cur returns the run's last wait, nil: none. The pointer is the run's
// entry's: the heap and the ready list hold it until dropLocked.
func (rw *runWaits) cur() *Wait {
	if rw.w.Run == "" {
		return nil
	}
	return &rw.w
}

// kept returns the run's events no wait took (nil: none).
func (rw *runWaits) kept() map[string][]*Event {
	if rw.more == nil {
		return nil
	}
	return rw.more.pending
}

// sent returns the run's sender ids' digests (nil: none).
func (rw *runWaits) sent() map[string][32]byte {
	if rw.more == nil {
		return nil
	}
	return rw.more.senders
}

// extra returns rw.more, made if needed.
func (rw *runWaits) extra() *runMore {
	if rw.more == nil {
		rw.more = &runMore{}
	}
	return rw.more
}

// empty reports whether rw holds nothing: no wait, no kept event, no
// sender id.
func (rw *runWaits) empty() bool {
	return rw.w.Run == "" && len(rw.kept()) == 0 && len(rw.sent()) == 0
}

// Index is the waits of a store's runs. Its methods take its own mutex;
// the engine serializes the records of one run (and Apply's order is the
// log's for each run).
type Index struct {
	clock func() time.Time
	fire  sync.Mutex // one FireDue at a time

	mu struct {
		sync.Mutex
		loaded  bool
		loadErr error    // sticky
		gen     uint64   // the checkpoint Load starts from (From), 0: none
		replay  wal.Pos  // its replay position
		rebuilt string   // why WAITS was not used ("": it was, or there was none)
		early   []string // runs Gone before Load: dropped once it is done
		src     Source   // Load's, for a rebuild from the log when the table turns out damaged
		// table is WAITS as last loaded or captured (nil: none), read in
		// place; runs, timers and ready are the overlay: what changed
		// since (file.go, table).
		table  *table
		runs   map[string]*runWaits
		timers deadlines  // the overlay's open waits with a deadline, earliest first
		ready  *list.List // of *Wait: the overlay's waits ended by an event or a timeout and not taken, in the order they ended, after the table's
		// treadyN counts the overlay's waits ready from the table (tready).
		treadyN int
		// goneSince are the runs Gone since the table, done again after
		// a rebuild from the log.
		goneSince []string
		high      int64 // the highest time any applied record holds: the clock's floor
		changed   chan struct{}
		applied   uint64 // records applied, for the tests and the observer
	}
}

// New returns an empty index whose clock is clock (nil: time.Now).
func New(clock func() time.Time) *Index {
	if clock == nil {
		clock = time.Now
	}
	x := &Index{clock: clock}
	x.mu.runs = map[string]*runWaits{}
	x.mu.ready = list.New()
	x.mu.changed = make(chan struct{})
	return x
}

// From sets where the next Load starts: WAITS of the checkpoint of
// generation gen (0: none), whose replay position is replay.
func (x *Index) From(gen uint64, replay wal.Pos) {
	x.mu.Lock()
	x.mu.gen, x.mu.replay = gen, replay
	x.mu.Unlock()
}

// FromCheckpoint is From at Open: CHECKPOINT cp's generation and from,
// the replay position, or (cp nil: none) the whole log.
func (x *Index) FromCheckpoint(cp *layout.Checkpoint, from wal.Pos) {
	if cp == nil {
		x.From(0, wal.Pos{})
		return
	}
	x.From(cp.Gen, from)
}

// Load builds the index once: from WAITS (Source.WaitsFile) when From
// named a checkpoint and the file is that checkpoint's and sound, then the
// log's records of waits from its replay position, each run's after the
// run's mark; else from the whole log. Later calls return the first
// call's error. Nothing else of the index may be used before Load
// returned nil, but Gone.
func (x *Index) Load(src Source) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.mu.loaded {
		return x.mu.loadErr
	}
	x.mu.loaded = true
	x.mu.src = src
	var from wal.Pos
	if x.mu.gen != 0 {
		var why string
		if err := guard(func() error { why = x.openFileLocked(src); return nil }); err != nil {
			why = err.Error()
		}
		if why != "" {
			x.resetLocked()
			x.mu.rebuilt = why
			src.Rebuilding(why)
		} else {
			from = x.mu.replay
		}
	}
	var damage error
	err := src.Scan(from, func(rec *record.Record, payload []byte) error {
		err := guard(func() error {
			if x.mu.runs[rec.Run] == nil { // not changed by the tail yet
				rw, err := x.peekLocked(rec.Run)
				if err != nil {
					return err
				}
				if rw != nil && !rw.mark.Less(rec.Pos) {
					return nil // WAITS reflects it: the run's records after its mark only
				}
			}
			return x.applyLocked(rec, payload)
		})
		if err != nil {
			damage = err
		}
		return err
	})
	if damage != nil {
		x.rebuildLocked(damage)
		err = x.mu.loadErr
	}
	if err != nil {
		x.mu.loadErr = fmt.Errorf("wait: load the waits from the log: %w", err)
		x.resetLocked()
		return x.mu.loadErr
	}
	for _, run := range x.mu.early {
		x.must(func() error { return x.goneLocked(run) })
	}
	x.mu.early = nil
	return x.mu.loadErr
}

// resetLocked empties the index.
func (x *Index) resetLocked() {
	x.installLocked(nil)
	x.mu.high = 0
}

// rebuildLocked builds the index from the whole log (the Source's) after
// the table turned out damaged (damage): a table is used only as long as
// every part of it read is sound, and never for a wrong answer. The
// runs gone since the table are gone again; a failed read of the log
// is the index's sticky error (Err).
func (x *Index) rebuildLocked(damage error) {
	x.rebuildFromLogLocked(fmt.Sprintf("it is damaged: %v", damage))
}

// rebuildFromLogLocked is the rebuild, why saying what made it (Rebuilt);
// false: the log's read failed (the index's sticky error).
func (x *Index) rebuildFromLogLocked(why string) bool {
	gone := x.mu.goneSince
	x.resetLocked()
	x.mu.rebuilt = why
	x.mu.src.Rebuilding(why)
	err := x.mu.src.Scan(wal.Pos{}, func(rec *record.Record, payload []byte) error {
		return x.applyLocked(rec, payload) // no table: no error
	})
	if err != nil {
		x.resetLocked()
		x.mu.loadErr = fmt.Errorf("wait: rebuild the waits from the log: %w", err)
		return false
	}
	for _, run := range gone {
		x.goneLocked(run)
	}
	return true
}

// Err returns the index's sticky error: its load's, or a rebuild's.
func (x *Index) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.mu.loadErr
}

// must runs f, and once again after a rebuild from the log if f met a
// damaged table (with no table, f meets none), or a read of the mapped
// table faulted (guard).
func (x *Index) must(f func() error) {
	g := f
	if tb := x.mu.table; tb != nil && tb.t.Runs > 0 { // else nothing of the table is read
		g = func() error { return guard(f) }
	}
	if err := g(); err != nil {
		x.rebuildLocked(err)
		f()
	}
}

// Rebuilt says why WAITS was not used, once the index is loaded ("": it
// was, or From named no checkpoint).
func (x *Index) Rebuilt() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.mu.rebuilt
}

// Loaded reports whether Load ran.
func (x *Index) Loaded() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.mu.loaded
}

// Now is the index's clock reading in unix ns: the clock's, or the
// highest time the log's wait records hold if that is later, so that a
// clock that moves back never ends, or un-ends, a wait by a reading
// earlier than one the log already holds.
func (x *Index) Now() int64 {
	now := x.clock().UnixNano()
	x.mu.Lock()
	defer x.mu.Unlock()
	return max(now, x.mu.high)
}

// Digest is what a repeated event is compared by.
func Digest(name string, payload []byte) [32]byte {
	h := blake3.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(payload)
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// Sent returns the digest of the event run's sender sent, if any.
func (x *Index) Sent(run, sender string) ([32]byte, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var d [32]byte
	var ok bool
	x.must(func() error {
		rw, err := x.peekLocked(run)
		if rw != nil {
			d, ok = rw.sent()[sender]
		}
		return err
	})
	return d, ok
}

// Current returns a copy of the run's last wait, if it has one that no
// atom took (committed is the run's last seq: a wait before it was
// taken).
func (x *Index) Current(run string, committed uint64) (Wait, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var w Wait
	var ok bool
	x.must(func() error {
		rw, err := x.peekLocked(run)
		if rw != nil && rw.w.Run != "" && rw.w.Seq >= committed {
			w, ok = rw.w.copy(), true
		}
		return err
	})
	return w, ok
}

// Pending returns the events of run that no wait took, in the order a
// wait of their name would take them.
func (x *Index) Pending(run string) []Event {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []Event
	x.must(func() error {
		rw, err := x.peekLocked(run)
		if rw != nil {
			for _, es := range rw.kept() {
				for _, e := range es {
					out = append(out, *e)
				}
			}
		}
		return err
	})
	return out
}

// Apply applies a wait, event or wake record, durable in the log, in the
// log's order for its run; payload is an event's plaintext payload. It is
// idempotent: a record applied already (a wait at or before the run's
// last one, an event of a sender seen, a wake of a wait that ended)
// changes nothing.
func (x *Index) Apply(rec *record.Record, payload []byte) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.must(func() error { return x.applyLocked(rec, payload) })
}

// applyLocked applies rec to the overlay; its error is the table's
// damage met (nothing applied).
func (x *Index) applyLocked(rec *record.Record, payload []byte) error {
	w := rec.Wait
	if w == nil {
		return nil
	}
	rw, err := x.entryLocked(rec.Run)
	if err != nil {
		return err
	}
	x.mu.high = max(x.mu.high, w.At)
	x.mu.applied++
	rw.mark = rec.Pos
	switch rec.Kind {
	case record.KindWait:
		if cw := rw.cur(); cw != nil && cw.Seq >= rec.Seq {
			return nil
		}
		x.dropLocked(rw.cur()) // a later wait: the run's atoms took this one
		rw.w = Wait{Run: rec.Run, Seq: rec.Seq, Name: w.Name, Declared: w.At, Deadline: w.Deadline, heapAt: -1}
		nw := &rw.w
		if es := rw.kept()[w.Name]; w.Name != "" && len(es) > 0 {
			x.endLocked(nw, Delivered, w.At, es[0])
			if len(es) == 1 {
				delete(rw.more.pending, w.Name)
			} else {
				rw.more.pending[w.Name] = es[1:]
			}
			return nil
		}
		if nw.Deadline != 0 {
			x.pushTimerLocked(nw)
		}
	case record.KindEvent:
		if _, ok := rw.sent()[w.Sender]; ok {
			return nil
		}
		m := rw.extra()
		if m.senders == nil {
			m.senders = map[string][32]byte{}
		}
		e := &Event{Run: rec.Run, Name: w.Name, Sender: w.Sender, Seq: rec.Seq, Sent: w.At,
			Payload: append([]byte(nil), payload...), Digest: Digest(w.Name, payload)}
		m.senders[w.Sender] = e.Digest
		if cw := rw.cur(); cw != nil && cw.Outcome == Open && cw.Name == w.Name && cw.Seq == rec.Seq {
			x.endLocked(cw, Delivered, w.At, e)
			return nil
		}
		if m.pending == nil {
			m.pending = map[string][]*Event{}
		}
		m.pending[w.Name] = append(m.pending[w.Name], e)
	case record.KindWake:
		cw := rw.cur()
		if cw == nil || cw.Seq != rec.Seq || cw.Outcome != Open {
			return nil
		}
		o := TimedOut
		if w.Reason == record.WakeCancel {
			o = Cancelled
		}
		x.endLocked(cw, o, w.At, nil)
	}
	return nil
}

// endLocked ends the open wait w.
func (x *Index) endLocked(w *Wait, o Outcome, at int64, e *Event) {
	w.Outcome, w.Ended, w.Event = o, at, e
	if w.heapAt >= 0 {
		heap.Remove(&x.mu.timers, int(w.heapAt))
	}
	if o != Cancelled {
		w.ready = x.mu.ready.PushBack(w)
	}
	close(x.mu.changed)
	x.mu.changed = make(chan struct{})
}

// pushTimerLocked puts the open wait w in the overlay's deadline heap.
func (x *Index) pushTimerLocked(w *Wait) { heap.Push(&x.mu.timers, w) }

// dropLocked takes w (nil: none) out of the heap and the ready list.
func (x *Index) dropLocked(w *Wait) {
	if w == nil {
		return
	}
	if w.tready {
		w.tready = false
		x.mu.treadyN--
	}
	if w.heapAt >= 0 {
		heap.Remove(&x.mu.timers, int(w.heapAt))
	}
	if w.ready != nil {
		x.mu.ready.Remove(w.ready)
		w.ready = nil
	}
}

// Taken says that run committed an atom at seq: its wait before seq, if
// it ended, is taken (no longer ready), and the memory it held goes.
func (x *Index) Taken(run string, seq uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.must(func() error {
		rw, err := x.peekLocked(run)
		if err != nil || rw == nil || rw.w.Run == "" || rw.w.Seq >= seq {
			return err
		}
		if rw, err = x.entryLocked(run); err != nil {
			return err
		}
		x.takenLocked(run, rw, seq)
		return nil
	})
}

func (x *Index) takenLocked(run string, rw *runWaits, seq uint64) {
	if rw.w.Run == "" || rw.w.Seq >= seq {
		return
	}
	x.dropLocked(&rw.w)
	rw.w = Wait{}
	if rw.empty() {
		delete(x.mu.runs, run)
	}
}

// Gone says that run ended or was deleted: nothing of it waits any more.
// Before Load, it is noted and done once Load is.
func (x *Index) Gone(run string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.mu.loaded {
		x.mu.early = append(x.mu.early, run)
		return
	}
	x.must(func() error { return x.goneLocked(run) })
}

func (x *Index) goneLocked(run string) error {
	if x.mu.table != nil {
		x.mu.goneSince = append(x.mu.goneSince, run)
		i, ok, err := x.findLocked(run)
		if err != nil {
			return err
		}
		if ok {
			rw, err := x.decodeLocked(i)
			if err != nil {
				return err
			}
			x.overlayLocked(i, run, rw)
		}
	}
	rw := x.mu.runs[run]
	if rw == nil {
		return nil
	}
	x.dropLocked(rw.cur())
	delete(x.mu.runs, run)
	return nil
}

// Due returns copies of up to max open waits whose deadline is at or
// before now, earliest first (then by run): the table's deadline section
// walked from its start and the overlay's heap, merged; the cost is that
// of the due ones, and of the table's waits the overlay ended since the
// table was written (passed once).
func (x *Index) Due(now int64, max int) []Wait {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []Wait
	x.must(func() error {
		t, err := x.tableDueLocked(now, max)
		if err != nil {
			return err
		}
		o := x.overlayDueLocked(now, max)
		out = make([]Wait, 0, min(max, len(t)+len(o)))
		for len(out) < max && (len(t) > 0 || len(o) > 0) {
			if len(o) == 0 || len(t) > 0 && (t[0].Deadline < o[0].Deadline || t[0].Deadline == o[0].Deadline && t[0].Run < o[0].Run) {
				out, t = append(out, t[0]), t[1:]
			} else {
				out, o = append(out, o[0]), o[1:]
			}
		}
		return nil
	})
	return out
}

// overlayDueLocked is Due of the overlay's heap.
func (x *Index) overlayDueLocked(now int64, max int) []Wait {
	var out []Wait
	// The heap's root is the earliest; the due ones are a subtree at the
	// root, walked in order of deadline without popping them (they stay
	// until their wake record is applied).
	var walk deadlines
	if len(x.mu.timers) > 0 && x.mu.timers[0].Deadline <= now {
		walk = append(walk, x.mu.timers[0])
	}
	for len(walk) > 0 && len(out) < max {
		w := heap.Pop(&walkHeap{&walk}).(*Wait)
		out = append(out, w.copy())
		for _, c := range [2]int{2*int(w.heapAt) + 1, 2*int(w.heapAt) + 2} {
			if c < len(x.mu.timers) && x.mu.timers[c].Deadline <= now {
				heap.Push(&walkHeap{&walk}, x.mu.timers[c])
			}
		}
	}
	return out
}

// NextDeadline returns the earliest deadline of an open wait.
func (x *Index) NextDeadline() (int64, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var at int64
	var ok bool
	x.must(func() error {
		t, tok, err := x.tableNextLocked()
		if err != nil {
			return err
		}
		at, ok = t, tok
		if len(x.mu.timers) > 0 && (!ok || x.mu.timers[0].Deadline < at) {
			at, ok = x.mu.timers[0].Deadline, true
		}
		return nil
	})
	return at, ok
}

// Ready returns copies of up to max waits that ended by an event or a
// timeout and that no atom took, in the order they ended: the table's
// ready section's, then the overlay's list.
func (x *Index) Ready(max int) []Wait {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []Wait
	x.must(func() error {
		var err error
		if out, err = x.tableReadyLocked(max); err != nil {
			return err
		}
		for e := x.mu.ready.Front(); e != nil && len(out) < max; e = e.Next() {
			out = append(out, e.Value.(*Wait).copy())
		}
		return nil
	})
	return out
}

// Changed returns a channel closed when a wait ends next.
func (x *Index) Changed() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.mu.changed
}

// Stats are the index's counts.
type Stats struct {
	Runs, Open, Ready, Pending int
	Applied                    uint64
}

// Stats returns the index's counts; Pending counts events no wait took.
func (x *Index) Stats() Stats {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := Stats{Runs: len(x.mu.runs), Open: len(x.mu.timers), Ready: x.mu.ready.Len() + x.mu.treadyN, Applied: x.mu.applied}
	if tb := x.mu.table; tb != nil {
		s.Runs += tb.live.Runs
		s.Open += tb.live.Open
		s.Ready += tb.live.Ready
		s.Pending += tb.live.Pending
	}
	for _, rw := range x.mu.runs {
		for _, es := range rw.kept() {
			s.Pending += len(es)
		}
		if rw.w.Run != "" && rw.w.Outcome == Open && rw.w.Deadline == 0 {
			s.Open++
		}
	}
	return s
}

func (w *Wait) copy() Wait {
	c := *w
	c.heapAt, c.ready, c.tready = -1, nil, false
	return c
}

// deadlines is a heap of open waits by deadline, then run.
type deadlines []*Wait

func (h deadlines) Len() int { return len(h) }
func (h deadlines) Less(i, j int) bool {
	if h[i].Deadline != h[j].Deadline {
		return h[i].Deadline < h[j].Deadline
	}
	return h[i].Run < h[j].Run
}
func (h deadlines) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapAt, h[j].heapAt = int32(i), int32(j)
}
func (h *deadlines) Push(v any) {
	w := v.(*Wait)
	w.heapAt = int32(len(*h))
	*h = append(*h, w)
}
func (h *deadlines) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.heapAt = -1
	return w
}

// walkHeap orders a walk of the deadline heap's due subtree without
// moving its waits' places (heapAt) in the real heap.
type walkHeap struct{ h *deadlines }

func (w walkHeap) Len() int           { return len(*w.h) }
func (w walkHeap) Less(i, j int) bool { return deadlines(*w.h).Less(i, j) }
func (w walkHeap) Swap(i, j int)      { (*w.h)[i], (*w.h)[j] = (*w.h)[j], (*w.h)[i] }
func (w walkHeap) Push(v any)         { *w.h = append(*w.h, v.(*Wait)) }
func (w walkHeap) Pop() any {
	old := *w.h
	v := old[len(old)-1]
	*w.h = old[:len(old)-1]
	return v
}
