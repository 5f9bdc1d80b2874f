package wait

// WAITS (layout/waits.go): the index as the engine checkpoint saves it,
// and its load.

import (
	"container/heap"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
)

// Row is what CHECKPOINT's row says of a run: its last seq and whether it
// ended (ok false: it has no row).
type Row func(run string) (last uint64, ended, ok bool)

// Capture returns WAITS for the checkpoint of generation gen at replay
// position replay. The engine calls it with the index loaded, after
// every run's row is captured (row): a wait before its run's last seq
// was taken, and a run that ended waits no more; both leave the index
// here, so that the file, and the memory, hold the waits that matter.
func (x *Index) Capture(gen uint64, replay wal.Pos, row Row) (*layout.Waits, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.mu.loaded || x.mu.loadErr != nil {
		return nil, fmt.Errorf("wait: capture of an index not loaded (%v)", x.mu.loadErr)
	}
	ids := make([]string, 0, len(x.mu.runs))
	for id, rw := range x.mu.runs {
		if row != nil {
			if last, ended, ok := row(id); ok {
				if ended {
					x.goneLocked(id)
					continue
				}
				if rw.w.Run != "" && rw.w.Seq < last {
					x.takenLocked(id, rw, last)
					if x.mu.runs[id] == nil {
						continue
					}
				}
			}
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	rank := make(map[*Wait]uint64, x.mu.ready.Len())
	i := uint64(0)
	for e := x.mu.ready.Front(); e != nil; e = e.Next() {
		i++
		rank[e.Value.(*Wait)] = i
	}
	f := &layout.Waits{Gen: gen, Replay: replay, High: x.mu.high, Runs: make([]layout.WaitsRun, len(ids))}
	for k, id := range ids {
		rw := x.mu.runs[id]
		fr := &f.Runs[k]
		fr.ID, fr.Mark = id, rw.mark
		if w := rw.cur(); w != nil {
			fw := &layout.WaitsWait{Seq: w.Seq, Name: w.Name, Declared: w.Declared, Deadline: w.Deadline,
				Outcome: uint8(w.Outcome), Ended: w.Ended, Ready: rank[w]}
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
	return f, nil
}

func fileEvent(e *Event) layout.WaitsEvent {
	return layout.WaitsEvent{Name: e.Name, Sender: e.Sender, Seq: e.Seq, Sent: e.Sent, Payload: e.Payload}
}

// loadFileLocked reads WAITS into the index (empty), or says why it
// cannot: the file is missing, damaged, of another checkpoint, or says
// what the log's records could not have made (an event whose sender's
// digest is not its own, a time past the file's latest). It returns the
// marks of the runs whose mark is at or after the replay position (nil:
// none), which the tail's replay needs.
//
// Its cost is decoding: one map insert per run, no allocation of its own
// for a run that only waits (entries come from slabs, run ids from the
// Source when it has them, wait names interned).
func (x *Index) loadFileLocked(src Source) (map[string]wal.Pos, string) {
	name, b, err := src.WaitsFile(x.mu.gen)
	if layout.NotExist(err) {
		return nil, "it is missing"
	}
	if err != nil {
		return nil, err.Error()
	}
	var id func([]byte) string
	if ids, ok := src.(RunIDs); ok {
		id = ids.RunID
	}
	l := &fileLoad{x: x, names: map[string]string{"": ""}}
	n := layout.WaitsRunCount(b)
	x.mu.runs = make(map[string]*runWaits, n)
	x.mu.timers = make(deadlines, 0, n)
	var why string
	f, err := layout.ScanWaits(name, b, id, func(fr *layout.WaitsRun) error {
		why = l.run(fr)
		if why != "" {
			return errStop
		}
		return nil
	})
	switch {
	case why != "":
		return nil, why
	case err != nil:
		return nil, err.Error()
	case f.Gen != x.mu.gen || f.Replay != x.mu.replay:
		return nil, fmt.Sprintf("it was written by checkpoint %d at %v, CHECKPOINT is %d at %v", f.Gen, f.Replay, x.mu.gen, x.mu.replay)
	case l.high > f.High:
		return nil, fmt.Sprintf("it holds a time, %d, after its latest, %d", l.high, f.High)
	}
	heap.Init(&x.mu.timers) // linear
	slices.SortFunc(l.ready, func(a, b ranked) int {
		switch {
		case a.rank < b.rank:
			return -1
		case a.rank > b.rank:
			return 1
		}
		return 0
	})
	for _, r := range l.ready {
		r.w.ready = x.mu.ready.PushBack(r.w)
	}
	x.mu.high = f.High
	return l.marks, ""
}

// slabRuns is how many entries one allocation holds: as many as fill
// 8 KiB, a size class of the Go allocator (73 of 112 bytes: 16 bytes
// unused, where 64 would leave 1 KiB). A slab stays while one of its
// entries does, so a load's entries cost one allocation per slabRuns
// runs, and at worst, once all but one of a slab's runs left the index,
// 8 KiB for that one.
const slabRuns = 8192 / int(unsafe.Sizeof(runWaits{}))

// fileLoad is the state of one load of WAITS.
type fileLoad struct {
	x     *Index
	names map[string]string // one string per wait or event name
	slab  []runWaits
	ready []ranked
	high  int64
	marks map[string]wal.Pos
}

type ranked struct {
	w    *Wait
	rank uint64
}

func (l *fileLoad) intern(s string) string {
	if v, ok := l.names[s]; ok {
		return v
	}
	l.names[s] = s
	return s
}

// errStop stops a scan of WAITS whose content is refused.
var errStop = errors.New("wait: WAITS refused")

// run puts the run of WAITS fr (reused by the next call) in the index, or
// says why the file is not usable; it raises l.high to the latest time
// the run holds.
func (l *fileLoad) run(fr *layout.WaitsRun) string {
	x := l.x
	if len(l.slab) == 0 {
		l.slab = make([]runWaits, slabRuns)
	}
	rw := &l.slab[0] // fr.ID is there once: ScanWaits checks the order
	l.slab = l.slab[1:]
	rw.mark = fr.Mark
	if !fr.Mark.Less(x.mu.replay) {
		if l.marks == nil {
			l.marks = map[string]wal.Pos{}
		}
		l.marks[fr.ID] = fr.Mark
	}
	if len(fr.Senders) > 0 {
		rw.extra().senders = make(map[string][32]byte, len(fr.Senders))
		for _, s := range fr.Senders {
			rw.more.senders[s.ID] = s.Digest
		}
	}
	event := func(fe *layout.WaitsEvent) (*Event, string) {
		e := &Event{Run: fr.ID, Name: l.intern(fe.Name), Sender: fe.Sender, Seq: fe.Seq, Sent: fe.Sent,
			Payload: append([]byte(nil), fe.Payload...), Digest: Digest(fe.Name, fe.Payload)}
		if d, ok := rw.sent()[e.Sender]; !ok || d != e.Digest {
			return nil, fmt.Sprintf("run %q: the event of sender %q is not the one its sender id names", fr.ID, e.Sender)
		}
		l.high = max(l.high, e.Sent)
		return e, ""
	}
	if fw := fr.Wait; fw != nil {
		rw.w = Wait{Run: fr.ID, Seq: fw.Seq, Name: l.intern(fw.Name), Declared: fw.Declared, Deadline: fw.Deadline,
			Outcome: Outcome(fw.Outcome), Ended: fw.Ended, heapAt: -1}
		w := &rw.w
		l.high = max(l.high, w.Declared, w.Ended)
		if fw.Event != nil {
			e, why := event(fw.Event)
			if why != "" {
				return why
			}
			w.Event = e
		}
		if w.Outcome == Open && w.Deadline != 0 {
			w.heapAt = int32(len(x.mu.timers))
			x.mu.timers = append(x.mu.timers, w)
		}
		if fw.Ready != 0 {
			l.ready = append(l.ready, ranked{w, fw.Ready})
		}
	}
	for i := range fr.Pending {
		e, why := event(&fr.Pending[i])
		if why != "" {
			return why
		}
		m := rw.extra()
		if m.pending == nil {
			m.pending = map[string][]*Event{}
		}
		m.pending[e.Name] = append(m.pending[e.Name], e)
	}
	x.mu.runs[fr.ID] = rw
	return ""
}
