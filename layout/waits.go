package layout

// WAITS: the index of the runs' waits (internal/wait), as of an engine
// checkpoint. Every constant in this file is frozen, like those of
// format.go.
//
// WAITS, version 1:
//
//	"CNTMWAIT" | version u16 LE | uvarint gen | uvarint replay segment | uvarint replay offset |
//	varint high | uvarint nruns | nruns x run | crc32c u32 LE of all before
//	run:    uvarint len | run id | uvarint mark segment | uvarint mark offset |
//	        byte hasWait | [wait] |
//	        uvarint npending | npending x event |
//	        uvarint nsenders | nsenders x (uvarint len | sender id | digest [32]byte)
//	wait:   uvarint seq | uvarint len | name | varint declared | varint deadline |
//	        byte outcome | varint ended | uvarint ready | [event, if outcome is 1 (delivered)]
//	event:  uvarint len | name | uvarint len | sender id | uvarint seq | varint sent |
//	        uvarint len | payload
//
// It is derived from the log (its wait, event and wake records, and the
// atoms and ends of the runs): gen and the replay position are those of
// the CHECKPOINT written with it. Each run's entry reflects a prefix of
// that run's records of waits in the log's order, the records up to its
// mark (the position of the last one it reflects, at or after the replay
// position or not), so that Open replays over it exactly the run's
// records after the mark: no record is applied twice. A run's wait is
// its last one that no atom took as of CHECKPOINT's rows; ready is its
// place in the list of the ended waits not taken (1 first; 0: not listed,
// an open or a cancelled wait). Pending lists the events no wait took, in
// the log's order for each name; senders every sender id the run took an
// event of, sorted, with its event's digest (internal/wait.Digest).
// High is the latest time the log's records of waits held when it was
// captured (the index's clock never reads earlier). Runs are sorted by
// id, each once. Payloads are plaintext: the file is
// sealed whole with the store's key when the store seals
// (record.PlaceWaits).
//
// A WAITS that is missing, damaged or of another checkpoint is rebuilt
// from the whole log (internal/wait, Load).

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/continuumdb/continuum/internal/crc32c"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// WaitsName is the file of the index of waits.
const WaitsName = "WAITS"

const (
	waitsMagic   = "CNTMWAIT"
	waitsVersion = 1
	// waitsMaxOutcome is the last outcome of a wait (internal/wait:
	// open, delivered, timed out, cancelled).
	waitsMaxOutcome = 3
	waitsDelivered  = 1
	waitsCancelled  = 3
)

// Waits is the content of WAITS.
type Waits struct {
	Gen    uint64
	Replay wal.Pos
	High   int64      // unix ns: the latest time a record of waits held
	Runs   []WaitsRun // sorted by ID
}

// WaitsRun is what the index holds of one run.
type WaitsRun struct {
	ID string
	// Mark is the position of the run's last record of waits the entry
	// reflects: Open applies the run's records after it only.
	Mark    wal.Pos
	Wait    *WaitsWait   // nil: none that no atom took
	Pending []WaitsEvent // events no wait took, in the log's order per name
	Senders []WaitsSender
}

// WaitsWait is a run's wait. Outcome is internal/wait's (0 open, 1
// delivered, 2 timed out, 3 cancelled).
type WaitsWait struct {
	Seq                uint64
	Name               string
	Declared, Deadline int64
	Outcome            uint8
	Ended              int64
	Ready              uint64      // place in the ready list, 1 first; 0: not listed
	Event              *WaitsEvent // outcome 1: the event it took
}

// WaitsEvent is an event. Payload aliases the input when parsed.
type WaitsEvent struct {
	Name, Sender string
	Seq          uint64
	Sent         int64
	Payload      []byte
}

// WaitsSender is a sender id the run took an event of.
type WaitsSender struct {
	ID     string
	Digest [32]byte
}

// Marshal encodes w.
func (w *Waits) Marshal() []byte {
	b := make([]byte, 0, 64+len(w.Runs)*48)
	b = append(b, waitsMagic...)
	b = binary.LittleEndian.AppendUint16(b, waitsVersion)
	b = binary.AppendUvarint(b, w.Gen)
	b = binary.AppendUvarint(b, w.Replay.Segment)
	b = binary.AppendUvarint(b, uint64(w.Replay.Offset))
	b = binary.AppendVarint(b, w.High)
	b = binary.AppendUvarint(b, uint64(len(w.Runs)))
	for i := range w.Runs {
		r := &w.Runs[i]
		b = record.AppendString(b, r.ID)
		b = binary.AppendUvarint(b, r.Mark.Segment)
		b = binary.AppendUvarint(b, uint64(r.Mark.Offset))
		if x := r.Wait; x == nil {
			b = append(b, 0)
		} else {
			b = append(b, 1)
			b = binary.AppendUvarint(b, x.Seq)
			b = record.AppendString(b, x.Name)
			b = binary.AppendVarint(b, x.Declared)
			b = binary.AppendVarint(b, x.Deadline)
			b = append(b, x.Outcome)
			b = binary.AppendVarint(b, x.Ended)
			b = binary.AppendUvarint(b, x.Ready)
			if x.Outcome == waitsDelivered {
				b = appendWaitsEvent(b, x.Event)
			}
		}
		b = binary.AppendUvarint(b, uint64(len(r.Pending)))
		for k := range r.Pending {
			b = appendWaitsEvent(b, &r.Pending[k])
		}
		b = binary.AppendUvarint(b, uint64(len(r.Senders)))
		for _, s := range r.Senders {
			b = record.AppendString(b, s.ID)
			b = append(b, s.Digest[:]...)
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32c.Checksum(b))
}

func appendWaitsEvent(b []byte, e *WaitsEvent) []byte {
	if e == nil {
		e = &WaitsEvent{}
	}
	b = record.AppendString(b, e.Name)
	b = record.AppendString(b, e.Sender)
	b = binary.AppendUvarint(b, e.Seq)
	b = binary.AppendVarint(b, e.Sent)
	return record.AppendBytes(b, e.Payload)
}

// ParseWaits decodes WAITS (named name in errors) and checks what one
// file can say of itself: runs sorted and each once, names, sender ids
// and payloads within their bounds, each wait's outcome with its event
// and place in the ready list, no place twice. Damage is a
// *record.CorruptionError.
func ParseWaits(name string, b []byte) (*Waits, error) {
	var runs []WaitsRun
	w, err := ScanWaits(name, b, nil, func(r *WaitsRun) error {
		c := *r
		if r.Wait != nil {
			x := *r.Wait
			if x.Event != nil {
				e := *x.Event
				x.Event = &e
			}
			c.Wait = &x
		}
		c.Pending = slices.Clone(r.Pending)
		c.Senders = slices.Clone(r.Senders)
		runs = append(runs, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	w.Runs = runs
	return w, nil
}

// ScanWaits is ParseWaits without the table of runs: it calls fn with
// each run in the file's order, once the whole file's checksum is
// checked, and stops at fn's first error, which it returns. r, and what
// it points to, are reused by the next call: fn copies what it keeps
// (payloads alias b). Runs of the result is nil. id, if not nil, makes
// each run's ID from its bytes (a checked run id, aliasing b): a caller
// that holds the store's run ids already returns its own string, and
// spares the copy.
func ScanWaits(name string, b []byte, id func([]byte) string, fn func(r *WaitsRun) error) (*Waits, error) {
	body, err := checkedBody(name, b, waitsMagic, len(waitsMagic)+2+4, "a waits file", waitsVersion)
	if err != nil {
		return nil, err
	}
	d := record.NewFields(body, 10)
	w := &Waits{Gen: d.Uvarint("generation")}
	w.Replay.Segment = d.Uvarint("replay segment")
	w.Replay.Offset = offset(d, "replay offset")
	w.High = d.Varint("high")
	n := d.Uvarint("run count")
	if d.Err() == nil && n > uint64(len(body)) {
		d.Fail("run count %d exceeds the file", n)
	}
	var ready map[uint64]string
	var r WaitsRun
	var x WaitsWait
	var ev WaitsEvent
	prev := ""
	for k := uint64(0); k < n && d.Err() == nil; k++ {
		r = WaitsRun{Pending: r.Pending[:0], Senders: r.Senders[:0]}
		if b := d.RunIDBytes(); d.Err() == nil {
			if id != nil {
				r.ID = id(b)
			} else {
				r.ID = string(b)
			}
		}
		if d.Err() == nil && k > 0 && prev >= r.ID {
			d.Fail("run %q follows run %q: the runs are not sorted, or one is there twice", r.ID, prev)
		}
		prev = r.ID
		r.Mark.Segment = d.Uvarint("mark segment")
		r.Mark.Offset = offset(d, "mark offset")
		switch d.Byte("wait flag") {
		case 0:
		case 1:
			x = WaitsWait{Seq: d.Uvarint("wait seq"), Name: waitsString(d, "wait name", record.MaxWaitName)}
			x.Declared = d.Varint("declared")
			x.Deadline = d.Varint("deadline")
			x.Outcome = d.Byte("outcome")
			x.Ended = d.Varint("ended")
			x.Ready = d.Uvarint("ready place")
			if x.Outcome == waitsDelivered {
				ev = waitsEvent(d)
				x.Event = &ev
			}
			if d.Err() == nil {
				if why := checkWaitsWait(&x); why != "" {
					d.Fail("run %q: the wait after seq %d: %s", r.ID, x.Seq, why)
				} else if x.Ready != 0 {
					if ready == nil {
						ready = map[uint64]string{}
					}
					if other, ok := ready[x.Ready]; ok {
						d.Fail("runs %q and %q are both at place %d of the ready list", other, r.ID, x.Ready)
					}
					ready[x.Ready] = r.ID
				}
			}
			r.Wait = &x
		default:
			if d.Err() == nil {
				d.Fail("run %q: wait flag is neither 0 nor 1", r.ID)
			}
		}
		m := d.Uvarint("pending count")
		if d.Err() == nil && m > uint64(len(body)) {
			d.Fail("pending count %d exceeds the file", m)
		}
		for j := uint64(0); j < m && d.Err() == nil; j++ {
			r.Pending = append(r.Pending, waitsEvent(d))
		}
		m = d.Uvarint("sender count")
		if d.Err() == nil && m > uint64(len(body)) {
			d.Fail("sender count %d exceeds the file", m)
		}
		for j := uint64(0); j < m && d.Err() == nil; j++ {
			s := WaitsSender{ID: waitsString(d, "sender id", record.MaxSenderID)}
			s.Digest = d.Hash("digest")
			if d.Err() == nil && j > 0 && r.Senders[j-1].ID >= s.ID {
				d.Fail("run %q: sender %q follows %q: not sorted, or there twice", r.ID, s.ID, r.Senders[j-1].ID)
			}
			r.Senders = append(r.Senders, s)
		}
		if d.Err() == nil {
			if err := fn(&r); err != nil {
				return nil, err
			}
		}
	}
	if err := d.Done("waits file"); err != nil {
		return nil, record.Corruptf(name, "%v", err)
	}
	return w, nil
}

// checkWaitsWait says what is wrong with a wait, "" if nothing.
// WaitsRunCount returns the run count WAITS's header states (0 if b is
// not a waits file), so that a reader can size its tables before
// ScanWaits; it checks nothing else.
func WaitsRunCount(b []byte) int {
	if len(b) < len(waitsMagic)+2+4 || string(b[:8]) != waitsMagic {
		return 0
	}
	d := record.NewFields(b[:len(b)-4], 10)
	d.Uvarint("generation")
	d.Uvarint("replay segment")
	d.Uvarint("replay offset")
	d.Varint("high")
	n := d.Uvarint("run count")
	if d.Err() != nil || n > uint64(len(b)) {
		return 0
	}
	return int(n)
}

func checkWaitsWait(x *WaitsWait) string {
	switch {
	case x.Outcome > waitsMaxOutcome:
		return fmt.Sprintf("outcome %d is none of the four", x.Outcome)
	case x.Deadline < 0:
		return fmt.Sprintf("a deadline at %d, before 1970", x.Deadline)
	case x.Outcome == 0 && (x.Ended != 0 || x.Ready != 0):
		return fmt.Sprintf("open, yet ended at %d and at place %d of the ready list", x.Ended, x.Ready)
	case x.Outcome == waitsCancelled && x.Ready != 0:
		return fmt.Sprintf("cancelled, yet at place %d of the ready list", x.Ready)
	case x.Outcome != 0 && x.Outcome != waitsCancelled && x.Ready == 0:
		return "ended by an event or a timeout, yet not in the ready list"
	case x.Outcome == waitsDelivered && x.Event.Name != x.Name:
		return fmt.Sprintf("delivered an event named %q to a wait for %q", x.Event.Name, x.Name)
	case x.Name == "" && x.Deadline == 0:
		return "a timer without a deadline"
	}
	return ""
}

func waitsEvent(d *record.Fields) WaitsEvent {
	e := WaitsEvent{Name: waitsString(d, "event name", record.MaxWaitName), Sender: waitsString(d, "event sender", record.MaxSenderID)}
	e.Seq = d.Uvarint("event seq")
	e.Sent = d.Varint("event sent")
	e.Payload = d.Bytes("event payload", record.MaxEventPayload)
	if d.Err() == nil && (e.Name == "" || e.Sender == "") {
		d.Fail("an event of name %q and sender %q: both must be set", e.Name, e.Sender)
	}
	return e
}

func waitsString(d *record.Fields, what string, max int) string {
	return string(d.Bytes(what, max))
}
