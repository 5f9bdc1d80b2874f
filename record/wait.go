package record

// Waits, events and wakes (engine/waits.go, internal/wait): a run waits
// durably for a named event, or for the clock, and the log holds the wait,
// each event sent to the run and each wake that ends a wait otherwise.
// Every constant in this file is frozen, like those of format.go.
//
//	wait  14 | uvarint len | run id | uvarint seq | head [32] | link [32]
//	         | varint declared (unix ns) | varint deadline (unix ns, 0: none)
//	         | uvarint len | name
//	event 15 | uvarint len | run id | uvarint seq | head [32] | link [32]
//	         | varint sent (unix ns) | uvarint len | name
//	         | uvarint len | sender id | uvarint len | payload
//	wake  16 | uvarint len | run id | uvarint seq | head [32] | link [32]
//	         | varint at (unix ns) | reason
//
// seq and head are the run's last seq and head when the record was
// written: the point of the run's history it follows. Like an erase-key
// record's, the record is no link of the run's chain (the run goes on
// from head) but a link beside it: link = chain.Hasher.Link(run, seq,
// head, payload), payload being the kind's mark (WaitMark, EventMark,
// WakeMark) and the fields from the time to the end, so that a changed
// name, deadline, sender, payload, time or reason fails it.
//
// A wait is named by its run and seq: a run declares at most one wait
// after each atom, and no atom commits while the run's wait is open, so
// a wake at seq s ends the wait at seq s. A wait with an empty name is a
// timer: no event matches it, and its deadline is set. reason is
// WakeTimeout (the deadline passed: at is the clock reading that found it
// past, at least the deadline) or WakeCancel (the run's own cancel).
//
// An event names the wait it may match by name (never empty) and is
// idempotent by its sender id within its run. In an encrypted store its
// payload is sealed (seal.go's format, with the run's data key), opened
// by the engine, not by the Decoder.
//
// Which wait an event is delivered to is no field of any record: it is
// the log's order that decides (docs/DESIGN.md, "Waits and timers"): an
// event matches the run's open wait of its name if there is one when it
// is written, else the next wait of that name the run declares; a wait
// whose deadline a wake records as passed matches nothing more.

import (
	"encoding/binary"
	"fmt"

	"github.com/continuumdb/continuum/chain"
)

// The kinds of the records of waits.
const (
	KindWait  Kind = 14
	KindEvent Kind = 15
	KindWake  Kind = 16
)

// The marks that start the chained payloads of wait, event and wake
// records.
const (
	WaitMark  = "continuum/wait\x00"
	EventMark = "continuum/event\x00"
	WakeMark  = "continuum/wake\x00"
)

// The reasons of a wake record.
const (
	WakeTimeout = 1
	WakeCancel  = 2
)

const (
	// MaxWaitName bounds the name of a wait or an event, in bytes.
	MaxWaitName = 256
	// MaxSenderID bounds an event's sender id, in bytes.
	MaxSenderID = 256
	// MaxEventPayload bounds an event's payload as the record holds it
	// (sealed, in an encrypted store), in bytes.
	MaxEventPayload = 1<<20 + MaxSealOverhead
)

// WaitFields are the fields of a wait, event or wake record after its
// link (Record.Wait). Byte slices alias the record.
type WaitFields struct {
	At       int64  // wait: declared; event: sent; wake: the clock reading it was written at
	Deadline int64  // wait: unix ns, 0 for none
	Name     string // wait (empty: a timer), event
	Sender   string // event
	Payload  []byte // event, sealed in an encrypted store
	Reason   uint8  // wake
}

// AppendWaitPayload appends the chained payload of a record of kind k
// (KindWait, KindEvent, KindWake): its mark, then its fields from the
// time on.
func AppendWaitPayload(dst []byte, k Kind, w *WaitFields) []byte {
	switch k {
	case KindWait:
		dst = append(dst, WaitMark...)
	case KindEvent:
		dst = append(dst, EventMark...)
	default:
		dst = append(dst, WakeMark...)
	}
	return appendWaitFields(dst, k, w)
}

func appendWaitFields(dst []byte, k Kind, w *WaitFields) []byte {
	dst = binary.AppendVarint(dst, w.At)
	switch k {
	case KindWait:
		dst = binary.AppendVarint(dst, w.Deadline)
		dst = AppendString(dst, w.Name)
	case KindEvent:
		dst = AppendString(dst, w.Name)
		dst = AppendString(dst, w.Sender)
		dst = AppendBytes(dst, w.Payload)
	default:
		dst = append(dst, w.Reason)
	}
	return dst
}

// AppendWaitRecord appends a wait, event or wake record (k) of run: seq
// and head are the run's last seq and head, link = chain.Hasher.Link(run,
// seq, head, AppendWaitPayload(k, w)). The fields' bounds are the
// caller's duty (CheckWaitFields).
func AppendWaitRecord(dst []byte, k Kind, run string, seq uint64, head, link chain.Hash, w *WaitFields) []byte {
	dst = append(dst, byte(k))
	dst = AppendString(dst, run)
	dst = binary.AppendUvarint(dst, seq)
	dst = append(dst, head[:]...)
	dst = append(dst, link[:]...)
	return appendWaitFields(dst, k, w)
}

// CheckWaitFields says why w is no valid record of kind k, or nil.
func CheckWaitFields(k Kind, w *WaitFields) error {
	switch k {
	case KindWait:
		switch {
		case len(w.Name) > MaxWaitName:
			return fmt.Errorf("a wait's name of %d bytes, the limit is %d", len(w.Name), MaxWaitName)
		case w.Deadline < 0:
			return fmt.Errorf("a deadline before 1970 (%d)", w.Deadline)
		case w.Name == "" && w.Deadline == 0:
			return fmt.Errorf("a timer (a wait without a name) without a deadline")
		}
	case KindEvent:
		switch {
		case w.Name == "" || len(w.Name) > MaxWaitName:
			return fmt.Errorf("an event's name of %d bytes, it must be 1 to %d", len(w.Name), MaxWaitName)
		case w.Sender == "" || len(w.Sender) > MaxSenderID:
			return fmt.Errorf("a sender id of %d bytes, it must be 1 to %d", len(w.Sender), MaxSenderID)
		case len(w.Payload) > MaxEventPayload:
			return fmt.Errorf("an event payload of %d bytes, the limit is %d", len(w.Payload), MaxEventPayload)
		}
	case KindWake:
		if w.Reason != WakeTimeout && w.Reason != WakeCancel {
			return fmt.Errorf("unknown wake reason %d", w.Reason)
		}
	default:
		return fmt.Errorf("kind %v is no wait record's", k)
	}
	return nil
}

// decodeWait decodes the fields of a wait, event or wake record after its
// kind: Run, Seq, Final (the run's head at Seq), Head (the link), Payload
// (the chained payload, a copy) and Wait.
func decodeWait(f *Fields, raw []byte, r *Record, names *runNames) {
	r.Run = names.runID(f, true)
	r.Seq = f.Uvarint("seq")
	r.Final = f.Hash("head")
	r.Head = f.Hash("link")
	start := f.off
	w := &WaitFields{At: f.Varint("time")}
	switch r.Kind {
	case KindWait:
		w.Deadline = f.Varint("deadline")
		w.Name = string(f.Bytes("name", MaxWaitName))
	case KindEvent:
		w.Name = string(f.Bytes("name", MaxWaitName))
		w.Sender = string(f.Bytes("sender id", MaxSenderID))
		w.Payload = f.Bytes("payload", MaxEventPayload)
	default:
		w.Reason = f.Byte("reason")
	}
	if f.err != nil {
		return
	}
	if err := CheckWaitFields(r.Kind, w); err != nil {
		f.Fail("%v", err)
		return
	}
	if err := f.Done(r.Kind.String() + " record"); err != nil {
		return
	}
	r.Wait = w
	mark := WaitMark
	switch r.Kind {
	case KindEvent:
		mark = EventMark
	case KindWake:
		mark = WakeMark
	}
	r.Payload = append([]byte(mark), raw[start:f.off]...)
}
