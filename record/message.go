package record

import (
	"encoding/binary"
	"fmt"
)

// Messages between runs: the data of the atom body extensions ExtTagSent
// and ExtTagConsumed (atomext.go). Every constant in this file is frozen,
// like those of format.go.
//
// ExtTagSent, the messages an atom sends, in the order it sent them:
//
//	uvarint n | n x ( uvarint len | to run id | uvarint len | payload )
//
// n is 1..MaxMessagesPerAtom, a payload at most MaxMessageSize bytes. The
// message at place i (from 0) is named by MessageID{From: the atom's run,
// Seq: the atom's seq, Index: i}: its id is the log's, stable across
// restarts and copies of the store.
//
// ExtTagConsumed, the messages an atom consumes, in the order it received
// them:
//
//	uvarint n | n x ( uvarint len | from run id | uvarint seq | uvarint index )
//
// n is 1..MaxMessagesPerAtom; seq is at least 1 (an atom's), index below
// MaxMessagesPerAtom; the ids of one sender strictly ascend (a run
// consumes each sender's messages in the order they were sent, once), so
// that no id appears twice. That a consumed message exists, is addressed
// to the consuming run and is the next of its sender to it is the log's
// to say, across atoms: verify checks it.
//
// Both are part of the atom body, so of its chained payload: a message
// exists if and only if the atom that sends it is committed (the same log
// record), and its consumption is committed with the consuming atom.

const (
	// MaxMessagesPerAtom bounds the messages one atom sends, and the
	// messages one atom consumes.
	MaxMessagesPerAtom = 1 << 12
	// MaxMessageSize bounds a message's payload, in bytes.
	MaxMessageSize = 1 << 20
)

// SentMessage is one message of an ExtTagSent extension.
type SentMessage struct {
	To      string // the receiving run's id
	Payload []byte // aliases the body when decoded
}

// MessageID names a message: the run that sent it, the seq of the atom
// that sent it, and its place among that atom's messages.
type MessageID struct {
	From  string
	Seq   uint64
	Index uint32
}

// Less orders the ids of one sender: by seq, then index.
func (m MessageID) Less(o MessageID) bool {
	return m.Seq < o.Seq || m.Seq == o.Seq && m.Index < o.Index
}

func (m MessageID) String() string {
	return fmt.Sprintf("%q/%d/%d", m.From, m.Seq, m.Index)
}

// AppendSent appends the data of an ExtTagSent extension: msgs, 1 to
// MaxMessagesPerAtom of them (the caller's duty, like their bounds).
func AppendSent(dst []byte, msgs []SentMessage) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(msgs)))
	for _, m := range msgs {
		dst = AppendString(dst, m.To)
		dst = AppendBytes(dst, m.Payload)
	}
	return dst
}

// DecodeSent decodes the data of an ExtTagSent extension. The payloads
// alias data.
func DecodeSent(data []byte) ([]SentMessage, error) {
	f := Fields{b: data}
	n := f.Uvarint("message count")
	// Each message takes at least 3 bytes (a run id of 1 byte).
	if f.err == nil && (n == 0 || n > MaxMessagesPerAtom || n > uint64(len(data))/3) {
		f.Fail("message count %d out of range 1..%d or beyond the data", n, MaxMessagesPerAtom)
	}
	if f.err != nil {
		return nil, fmt.Errorf("sent messages: %w", f.err)
	}
	msgs := make([]SentMessage, 0, n)
	for i := uint64(0); i < n && f.err == nil; i++ {
		to := f.RunID()
		p := f.Bytes("payload", MaxMessageSize)
		msgs = append(msgs, SentMessage{To: to, Payload: p})
	}
	if err := f.Done("sent messages"); err != nil {
		return nil, fmt.Errorf("sent messages: %w", err)
	}
	return msgs, nil
}

// AppendConsumed appends the data of an ExtTagConsumed extension: ids, 1
// to MaxMessagesPerAtom of them, each sender's ascending (the caller's
// duty).
func AppendConsumed(dst []byte, ids []MessageID) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, id := range ids {
		dst = AppendString(dst, id.From)
		dst = binary.AppendUvarint(dst, id.Seq)
		dst = binary.AppendUvarint(dst, uint64(id.Index))
	}
	return dst
}

// DecodeConsumed decodes the data of an ExtTagConsumed extension.
func DecodeConsumed(data []byte) ([]MessageID, error) {
	f := Fields{b: data}
	n := f.Uvarint("consumed count")
	// Each id takes at least 4 bytes.
	if f.err == nil && (n == 0 || n > MaxMessagesPerAtom || n > uint64(len(data))/4) {
		f.Fail("consumed count %d out of range 1..%d or beyond the data", n, MaxMessagesPerAtom)
	}
	if f.err != nil {
		return nil, fmt.Errorf("consumed messages: %w", f.err)
	}
	ids := make([]MessageID, 0, n)
	var last map[string]MessageID // the previous id of each sender, when there are several ids
	for i := uint64(0); i < n && f.err == nil; i++ {
		id := MessageID{From: f.RunID()}
		id.Seq = f.Uvarint("seq")
		index := f.Uvarint("index")
		if f.err != nil {
			break
		}
		switch {
		case id.Seq == 0:
			f.Fail("message %d: seq 0 is no atom's", i)
		case index >= MaxMessagesPerAtom:
			f.Fail("message %d: index %d, an atom sends at most %d", i, index, MaxMessagesPerAtom)
		}
		id.Index = uint32(index)
		if n > 1 && f.err == nil {
			if last == nil {
				last = make(map[string]MessageID)
			}
			if p, ok := last[id.From]; ok && !p.Less(id) {
				f.Fail("message %d: %v after %v of the same sender (each sender's ids ascend)", i, id, p)
			}
			last[id.From] = id
		}
		ids = append(ids, id)
	}
	if err := f.Done("consumed messages"); err != nil {
		return nil, fmt.Errorf("consumed messages: %w", err)
	}
	return ids, nil
}

// Messages decodes the message extensions of an atom body: what it sends
// and what it consumes (nil, nil for an atom without them).
func (a *AtomBody) Messages() (sent []SentMessage, consumed []MessageID, err error) {
	if data, ok := a.Ext(ExtTagSent); ok {
		if sent, err = DecodeSent(data); err != nil {
			return nil, nil, err
		}
	}
	if data, ok := a.Ext(ExtTagConsumed); ok {
		if consumed, err = DecodeConsumed(data); err != nil {
			return nil, nil, err
		}
	}
	return sent, consumed, nil
}
