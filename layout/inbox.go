package layout

// INBOX: the messages between runs not consumed yet, as of an engine
// checkpoint. Every constant in this file is frozen, like those of
// format.go.
//
// INBOX, version 1:
//
//	"CNTMINBX" | version u16 LE | uvarint gen | uvarint replay segment | uvarint replay offset |
//	uvarint nended | nended x (uvarint len | run id) |
//	uvarint ndeleted | ndeleted x (uvarint len | run id) |
//	uvarint nqueues | nqueues x queue | crc32c u32 LE of all before
//	queue: uvarint len | to run id | uvarint len | from run id |
//	       uvarint cursor seq | uvarint cursor index |
//	       uvarint n | n x (uvarint seq | uvarint index | uvarint at segment | uvarint at offset |
//	                        uvarint len | payload)
//
// It is derived from the log (the atoms' ExtTagSent and ExtTagConsumed
// extensions, the ends and deletions of runs): gen and the replay position
// are those of the CHECKPOINT written with it, and it holds the state at
// or after that position, so that the log's tail after it, applied again,
// changes nothing it already reflects. A queue is the messages of one
// sender to one receiver: its cursor is the last message the receiver
// consumed (seq 0: none), its messages those sent after it, ascending, each
// with the position of the atom that sent it (the order across senders).
// Ended lists the runs that ended or were deleted, sorted: a message to
// one is never delivered. Deleted lists the runs deleted, sorted: their
// messages not consumed are withdrawn.
//
// An INBOX that is missing, damaged or of another checkpoint is rebuilt
// from the log before the replay position (engine's inbox rebuild); verify
// checks one that is used against the log.

import (
	"encoding/binary"
	"math"

	"github.com/continuumdb/continuum/internal/crc32c"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// InboxName is the file of the messages not consumed yet.
const InboxName = "INBOX"

const (
	inboxMagic   = "CNTMINBX"
	inboxVersion = 1
)

// Inbox is the content of INBOX.
type Inbox struct {
	Gen     uint64
	Replay  wal.Pos
	Ended   []string // runs that ended or were deleted
	Deleted []string // runs deleted
	Queues  []InboxQueue
}

// InboxQueue is what one sender sent one receiver and the receiver has not
// consumed yet.
type InboxQueue struct {
	To, From string
	// Cursor is the last message of From that To consumed (Seq 0: none).
	CursorSeq   uint64
	CursorIndex uint32
	Pending     []InboxMessage // ascending, all after the cursor
}

// InboxMessage is one message not consumed yet.
type InboxMessage struct {
	Seq     uint64
	Index   uint32
	At      wal.Pos // where the atom that sent it is in the log
	Payload []byte  // aliases the input when parsed
}

// Marshal encodes i.
func (i *Inbox) Marshal() []byte {
	b := make([]byte, 0, 64)
	b = append(b, inboxMagic...)
	b = binary.LittleEndian.AppendUint16(b, inboxVersion)
	b = binary.AppendUvarint(b, i.Gen)
	b = binary.AppendUvarint(b, i.Replay.Segment)
	b = binary.AppendUvarint(b, uint64(i.Replay.Offset))
	for _, ids := range [][]string{i.Ended, i.Deleted} {
		b = binary.AppendUvarint(b, uint64(len(ids)))
		for _, id := range ids {
			b = record.AppendString(b, id)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(i.Queues)))
	for qi := range i.Queues {
		q := &i.Queues[qi]
		b = record.AppendString(b, q.To)
		b = record.AppendString(b, q.From)
		b = binary.AppendUvarint(b, q.CursorSeq)
		b = binary.AppendUvarint(b, uint64(q.CursorIndex))
		b = binary.AppendUvarint(b, uint64(len(q.Pending)))
		for _, m := range q.Pending {
			b = binary.AppendUvarint(b, m.Seq)
			b = binary.AppendUvarint(b, uint64(m.Index))
			b = binary.AppendUvarint(b, m.At.Segment)
			b = binary.AppendUvarint(b, uint64(m.At.Offset))
			b = record.AppendBytes(b, m.Payload)
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32c.Checksum(b))
}

// ParseInbox decodes INBOX (named name in errors). Damage is a
// *record.CorruptionError.
func ParseInbox(name string, b []byte) (*Inbox, error) {
	body, err := checkedBody(name, b, inboxMagic, len(inboxMagic)+2+4, "an inbox file", inboxVersion)
	if err != nil {
		return nil, err
	}
	d := record.NewFields(body, 10)
	in := &Inbox{Gen: d.Uvarint("generation")}
	in.Replay.Segment = d.Uvarint("replay segment")
	in.Replay.Offset = offset(d, "replay offset")
	in.Ended = runIDs(d, "ended", len(body))
	in.Deleted = runIDs(d, "deleted", len(body))
	n := d.Uvarint("queue count")
	if d.Err() == nil && n > uint64(len(body)) {
		d.Fail("queue count %d exceeds the file", n)
	}
	for k := uint64(0); k < n && d.Err() == nil; k++ {
		q := InboxQueue{To: d.RunID(), From: d.RunID()}
		q.CursorSeq = d.Uvarint("cursor seq")
		q.CursorIndex = index(d, "cursor index")
		m := d.Uvarint("message count")
		if d.Err() == nil && m > uint64(len(body)) {
			d.Fail("message count %d exceeds the file", m)
		}
		prev := record.MessageID{Seq: q.CursorSeq, Index: q.CursorIndex}
		for j := uint64(0); j < m && d.Err() == nil; j++ {
			msg := InboxMessage{Seq: d.Uvarint("seq"), Index: index(d, "index")}
			msg.At.Segment = d.Uvarint("segment")
			msg.At.Offset = offset(d, "offset")
			msg.Payload = d.Bytes("payload", record.MaxMessageSize)
			id := record.MessageID{Seq: msg.Seq, Index: msg.Index}
			if d.Err() == nil && (msg.Seq == 0 || !prev.Less(id)) {
				d.Fail("queue %q -> %q: message %d/%d does not follow %d/%d", q.From, q.To, msg.Seq, msg.Index, prev.Seq, prev.Index)
			}
			prev = id
			q.Pending = append(q.Pending, msg)
		}
		in.Queues = append(in.Queues, q)
	}
	if err := d.Done("inbox file"); err != nil {
		return nil, record.Corruptf(name, "%v", err)
	}
	return in, nil
}

func offset(d *record.Fields, what string) int64 {
	off := d.Uvarint(what)
	if off > math.MaxInt64 {
		d.Fail("%s %d exceeds the largest file offset", what, off)
		return 0
	}
	return int64(off)
}

func index(d *record.Fields, what string) uint32 {
	i := d.Uvarint(what)
	if i >= record.MaxMessagesPerAtom {
		d.Fail("%s %d: an atom sends at most %d messages", what, i, record.MaxMessagesPerAtom)
		return 0
	}
	return uint32(i)
}

func runIDs(d *record.Fields, what string, size int) []string {
	n := d.Uvarint(what + " count")
	if d.Err() == nil && n > uint64(size) {
		d.Fail("%s count %d exceeds the file", what, n)
	}
	var ids []string
	for k := uint64(0); k < n && d.Err() == nil; k++ {
		ids = append(ids, d.RunID())
	}
	return ids
}
