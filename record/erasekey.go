package record

// An erase-key record (KindEraseKey) says that the values of one memory
// key of a run were erased (crypto-shredding: each value of an erasable
// memory key is sealed with a data key of its own scope,
// seal.MemoryScope(run, key), and the record names the data keys it
// erases, which the key table drops once the record is durable):
//
//	erase key 13 | uvarint len | run id | uvarint seq | head [32] | link [32]
//	             | varint erased (unix ns) | uvarint len | memory key
//	             | uvarint n | n x uvarint key no | uvarint len | reason | note
//
// seq and head are the run's last seq and head when the key was erased:
// the point of the run's history the erasure follows. It is no link of the
// run's chain (the run goes on from head; a live run may have a key
// erased), but a link beside it: link = chain.Hasher.Link(run, seq, head,
// AppendEraseKeyPayload(...)), over EraseKeyMark and the fields from
// erased to reason, so that a changed key, key number, time or reason
// fails it. note is the chain checkpoint of (run, seq, link), never final,
// signed when the store has a signing key: it makes the erasure as
// provable as a deletion. The key numbers are ascending, at least one, at
// most MaxEraseKeyNos. An erase-key record is never reclaimed while its
// run has records.

import (
	"encoding/binary"

	"github.com/continuumdb/continuum/chain"
)

// KindEraseKey is the kind of an erase-key record.
const KindEraseKey Kind = 13

// EraseKeyMark starts the chained payload of an erase-key record.
const EraseKeyMark = "continuum/erase-key\x00"

const (
	// MaxMemoryKeyLen bounds the memory key an erase-key record names, in
	// bytes: a memory scope (run, NUL, key) must fit seal.MaxScope.
	MaxMemoryKeyLen = 4<<10 - MaxRunIDLen - 1
	// MaxEraseKeyNos bounds the data keys one erase-key record erases.
	MaxEraseKeyNos = 1 << 16
)

// AppendEraseKeyPayload appends the chained payload of an erase-key
// record: EraseKeyMark, then its fields from erased to reason.
func AppendEraseKeyPayload(dst []byte, erased int64, key string, nos []uint64, reason string) []byte {
	dst = append(dst, EraseKeyMark...)
	dst = appendEraseKeyFields(dst, erased, key, nos, reason)
	return dst
}

func appendEraseKeyFields(dst []byte, erased int64, key string, nos []uint64, reason string) []byte {
	dst = binary.AppendVarint(dst, erased)
	dst = AppendString(dst, key)
	dst = binary.AppendUvarint(dst, uint64(len(nos)))
	for _, no := range nos {
		dst = binary.AppendUvarint(dst, no)
	}
	return AppendString(dst, reason)
}

// AppendEraseKey appends an erase-key record: the values of memory key key
// of run, sealed with the data keys numbered nos, are erased; seq and head
// are the run's last seq and head, link = chain.Hasher.Link(run, seq,
// head, AppendEraseKeyPayload(erased, key, nos, reason)) and note the
// chain checkpoint of (run, seq, link).
func AppendEraseKey(dst []byte, run string, seq uint64, head, link chain.Hash, erased int64, key string, nos []uint64, reason string, note []byte) []byte {
	dst = append(dst, byte(KindEraseKey))
	dst = AppendString(dst, run)
	dst = binary.AppendUvarint(dst, seq)
	dst = append(dst, head[:]...)
	dst = append(dst, link[:]...)
	dst = appendEraseKeyFields(dst, erased, key, nos, reason)
	return append(dst, note...)
}

// decodeEraseKey decodes the fields of an erase-key record after its kind.
func decodeEraseKey(f *Fields, raw []byte, r *Record) {
	r.Run = f.RunID()
	r.Seq = f.Uvarint("seq")
	r.Final = f.Hash("head")
	r.Head = f.Hash("link")
	start := f.off
	r.Deleted = f.Varint("erased")
	r.Key = string(f.Bytes("memory key", MaxMemoryKeyLen))
	n := f.Uvarint("key count")
	switch {
	case f.err != nil:
	case r.Key == "":
		f.Fail("an empty memory key")
	case n == 0 || n > MaxEraseKeyNos:
		f.Fail("%d data keys (1 to %d)", n, MaxEraseKeyNos)
	default:
		r.KeyNos = make([]uint64, 0, n)
		for i := uint64(0); i < n && f.err == nil; i++ {
			no := f.Uvarint("key no")
			if f.err == nil && i > 0 && no <= r.KeyNos[i-1] {
				f.Fail("key no %d after %d: not ascending", no, r.KeyNos[i-1])
			}
			r.KeyNos = append(r.KeyNos, no)
		}
	}
	r.Reason = string(f.Bytes("reason", MaxDeleteReason))
	if f.err != nil {
		return
	}
	r.Payload = append([]byte(EraseKeyMark), raw[start:f.off]...)
	decodeLinkNote(f, r, false, "erasure")
}

// decodeLinkNote reads the rest of r, a delete, erase or erase-key record,
// as the chain checkpoint of its link: of (r.Run, r.Seq, r.Head), final
// or not as the kind says (what names the link in an error).
func decodeLinkNote(f *Fields, r *Record, final bool, what string) {
	r.Note = f.Rest()
	switch c, err := chain.ParseCheckpoint(r.Note); {
	case len(r.Note) > MaxDeleteNote:
		f.Fail("its checkpoint is %d bytes, the limit is %d", len(r.Note), MaxDeleteNote)
	case err != nil:
		f.Fail("its checkpoint: %v", err)
	case c.RunID != r.Run || c.Seq != r.Seq || c.Head != r.Head || c.Final != final:
		f.Fail("its checkpoint names run %q seq %d head %x (final %v), not the %s's", c.RunID, c.Seq, c.Head[:8], c.Final, what)
	default:
		r.Checkpoint = c
	}
}
