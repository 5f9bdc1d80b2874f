package offline

// What Inspect and Export show of a run's waits (record.KindWait,
// KindEvent, KindWake; engine/waits.go): each wait with how it ended and
// the event it took, and the events no wait took yet, rebuilt from the
// log in its order as the engine's index builds them.

import (
	"time"

	"github.com/continuumdb/continuum/record"
)

// WaitInfo is a run's wait as the log says.
type WaitInfo struct {
	Seq      uint64 // the atom it follows (the run's last seq when declared)
	Name     string // "" for a timer (a sleep)
	Declared time.Time
	Deadline time.Time // zero: none
	// Outcome is "open", "delivered" (Event ended it), "timed out",
	// "cancelled", or "withdrawn" (an atom committed while it was open).
	Outcome string
	Ended   time.Time // the recorded time of its end; zero while open or withdrawn
	Event   *EventInfo
	// Taken: an atom of the run committed after it (the one that acted on
	// its outcome, or, for a withdrawn wait, went on without it).
	Taken bool
}

// EventInfo is an event sent to a run.
type EventInfo struct {
	Name   string
	Sender string
	Seq    uint64 // the run's last seq when it was sent
	Sent   time.Time
	// Payload is the event's payload; nil when Sealed and not opened
	// (an encrypted store read without its keyring, or an erased run).
	Payload []byte
	Sealed  bool
}

// inspectWaits is the state of one run's waits during the build.
type inspectWaits struct {
	pending map[string][]*EventInfo
}

// noteWait applies a wait, event or wake record to its run's summary.
func (in *Inspector) noteWait(rec *record.Record) {
	w := rec.Wait
	if w == nil {
		return
	}
	r := in.run(rec.Run)
	if r.waits == nil {
		r.waits = &inspectWaits{}
	}
	sum := &r.sum
	var cur *WaitInfo
	if n := len(sum.Waits); n > 0 && !sum.Waits[n-1].Taken && sum.Waits[n-1].Seq == rec.Seq {
		cur = &sum.Waits[n-1]
	}
	switch rec.Kind {
	case record.KindWait:
		if cur != nil {
			return // verify reports it
		}
		wi := WaitInfo{Seq: rec.Seq, Name: w.Name, Declared: time.Unix(0, w.At), Outcome: "open"}
		if w.Deadline != 0 {
			wi.Deadline = time.Unix(0, w.Deadline)
		}
		if es := r.waits.pending[w.Name]; w.Name != "" && len(es) > 0 {
			wi.Outcome, wi.Ended, wi.Event = "delivered", wi.Declared, es[0]
			r.waits.pending[w.Name] = es[1:]
		}
		sum.Waits = append(sum.Waits, wi)
	case record.KindEvent:
		e := &EventInfo{Name: w.Name, Sender: w.Sender, Seq: rec.Seq, Sent: time.Unix(0, w.At), Sealed: in.st.db.sealed}
		if !e.Sealed {
			e.Payload = append([]byte(nil), w.Payload...)
		} else if s := in.st.db.sealer; s != nil {
			if p, err := s.Open(nil, w.Payload, record.KindEvent, rec.Run, rec.Seq); err == nil {
				e.Payload, e.Sealed = p, false
			}
		}
		if cur != nil && cur.Outcome == "open" && cur.Name == w.Name {
			cur.Outcome, cur.Ended, cur.Event = "delivered", e.Sent, e
			return
		}
		if r.waits.pending == nil {
			r.waits.pending = map[string][]*EventInfo{}
		}
		r.waits.pending[w.Name] = append(r.waits.pending[w.Name], e)
	case record.KindWake:
		if cur == nil || cur.Outcome != "open" {
			return // verify reports it
		}
		cur.Outcome, cur.Ended = "timed out", time.Unix(0, w.At)
		if w.Reason == record.WakeCancel {
			cur.Outcome = "cancelled"
		}
	}
}

// waitAtom notes atom seq of run: the wait before it is taken.
func (in *Inspector) waitAtom(r *inspectRun, seq uint64) {
	if n := len(r.sum.Waits); n > 0 && !r.sum.Waits[n-1].Taken && r.sum.Waits[n-1].Seq < seq {
		w := &r.sum.Waits[n-1]
		w.Taken = true
		if w.Outcome == "open" {
			w.Outcome = "withdrawn"
		}
	}
}

// finishWaits lists each run's events no wait took, in the order sent.
func (in *Inspector) finishWaits() {
	for _, r := range in.runs {
		if r.waits == nil {
			continue
		}
		for _, es := range r.waits.pending {
			for _, e := range es {
				r.sum.PendingEvents = append(r.sum.PendingEvents, *e)
			}
		}
		ps := r.sum.PendingEvents
		for i := 1; i < len(ps); i++ { // few: insertion sort by sent time
			for j := i; j > 0 && ps[j].Sent.Before(ps[j-1].Sent); j-- {
				ps[j], ps[j-1] = ps[j-1], ps[j]
			}
		}
	}
}

// ExportedWait is a wait (WaitInfo) as Export, and inspect --json, write
// it.
type ExportedWait struct {
	Seq      uint64         `json:"seq"`
	Name     string         `json:"name"`
	Declared string         `json:"declared"`           // RFC 3339 in UTC with nanoseconds
	Deadline string         `json:"deadline,omitempty"` // absent: none
	Outcome  string         `json:"outcome"`
	Ended    string         `json:"ended,omitempty"`
	Event    *ExportedEvent `json:"event,omitempty"`
}

// ExportedEvent is an event (EventInfo) as Export writes it; the payload
// is absent when it is sealed and was not opened.
type ExportedEvent struct {
	Name    string        `json:"name"`
	Sender  string        `json:"sender"`
	Seq     uint64        `json:"seq"`
	Sent    string        `json:"sent"`
	Payload ExportedValue `json:"payload,omitempty"`
	Sealed  bool          `json:"sealed,omitempty"`
}

func exportTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// NewExportedEvent returns e in the form Export writes. It shares e's
// payload.
func NewExportedEvent(e *EventInfo) *ExportedEvent {
	if e == nil {
		return nil
	}
	return &ExportedEvent{Name: e.Name, Sender: e.Sender, Seq: e.Seq, Sent: exportTime(e.Sent), Payload: e.Payload, Sealed: e.Sealed}
}

// NewExportedWait returns w in the form Export writes.
func NewExportedWait(w WaitInfo) ExportedWait {
	return ExportedWait{Seq: w.Seq, Name: w.Name, Declared: exportTime(w.Declared), Deadline: exportTime(w.Deadline),
		Outcome: w.Outcome, Ended: exportTime(w.Ended), Event: NewExportedEvent(w.Event)}
}
