package wait

// WAITS (layout/waits.go): the index as the engine checkpoint saves it,
// and its load.

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"

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
				if rw.wait != nil && rw.wait.Seq < last {
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
		if w := rw.wait; w != nil {
			fw := &layout.WaitsWait{Seq: w.Seq, Name: w.Name, Declared: w.Declared, Deadline: w.Deadline,
				Outcome: uint8(w.Outcome), Ended: w.Ended, Ready: rank[w]}
			if w.Event != nil {
				e := fileEvent(w.Event)
				fw.Event = &e
			}
			fr.Wait = fw
		}
		names := make([]string, 0, len(rw.pending))
		for name := range rw.pending {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			for _, e := range rw.pending[name] {
				fr.Pending = append(fr.Pending, fileEvent(e))
			}
		}
		for s, d := range rw.senders {
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
// digest is not its own, a time past the file's latest).
func (x *Index) loadFileLocked(src Source) string {
	name, b, err := src.WaitsFile(x.mu.gen)
	if layout.NotExist(err) {
		return "it is missing"
	}
	if err != nil {
		return err.Error()
	}
	f, err := layout.ParseWaits(name, b)
	if err != nil {
		return err.Error()
	}
	if f.Gen != x.mu.gen || f.Replay != x.mu.replay {
		return fmt.Sprintf("it was written by checkpoint %d at %v, CHECKPOINT is %d at %v", f.Gen, f.Replay, x.mu.gen, x.mu.replay)
	}
	names := map[string]string{} // one string per name
	intern := func(s string) string {
		if v, ok := names[s]; ok {
			return v
		}
		names[s] = s
		return s
	}
	type ranked struct {
		w    *Wait
		rank uint64
	}
	var ready []ranked
	x.mu.runs = make(map[string]*runWaits, len(f.Runs))
	for k := range f.Runs {
		fr := &f.Runs[k]
		rw := &runWaits{mark: fr.Mark}
		if len(fr.Senders) > 0 {
			rw.senders = make(map[string][32]byte, len(fr.Senders))
			for _, s := range fr.Senders {
				rw.senders[s.ID] = s.Digest
			}
		}
		event := func(fe *layout.WaitsEvent) (*Event, string) {
			e := &Event{Run: fr.ID, Name: intern(fe.Name), Sender: fe.Sender, Seq: fe.Seq, Sent: fe.Sent,
				Payload: append([]byte(nil), fe.Payload...), Digest: Digest(fe.Name, fe.Payload)}
			if d, ok := rw.senders[e.Sender]; !ok || d != e.Digest {
				return nil, fmt.Sprintf("run %q: the event of sender %q is not the one its sender id names", fr.ID, e.Sender)
			}
			if e.Sent > f.High {
				return nil, fmt.Sprintf("run %q: the event of sender %q was sent at %d, after the file's latest time %d", fr.ID, e.Sender, e.Sent, f.High)
			}
			return e, ""
		}
		if fw := fr.Wait; fw != nil {
			w := &Wait{Run: fr.ID, Seq: fw.Seq, Name: intern(fw.Name), Declared: fw.Declared, Deadline: fw.Deadline,
				Outcome: Outcome(fw.Outcome), Ended: fw.Ended, heapAt: -1}
			if max(w.Declared, w.Ended) > f.High {
				return fmt.Sprintf("run %q: its wait holds a time after the file's latest %d", fr.ID, f.High)
			}
			if fw.Event != nil {
				e, why := event(fw.Event)
				if why != "" {
					return why
				}
				w.Event = e
			}
			if w.Outcome == Open && w.Deadline != 0 {
				w.heapAt = len(x.mu.timers)
				x.mu.timers = append(x.mu.timers, w)
			}
			if fw.Ready != 0 {
				ready = append(ready, ranked{w, fw.Ready})
			}
			rw.wait = w
		}
		for i := range fr.Pending {
			e, why := event(&fr.Pending[i])
			if why != "" {
				return why
			}
			if rw.pending == nil {
				rw.pending = map[string][]*Event{}
			}
			rw.pending[e.Name] = append(rw.pending[e.Name], e)
		}
		x.mu.runs[fr.ID] = rw
	}
	heap.Init(&x.mu.timers) // linear; a file written in deadline order is one already
	slices.SortFunc(ready, func(a, b ranked) int {
		switch {
		case a.rank < b.rank:
			return -1
		case a.rank > b.rank:
			return 1
		}
		return 0
	})
	for _, r := range ready {
		r.w.ready = x.mu.ready.PushBack(r.w)
	}
	x.mu.high = f.High
	return ""
}
