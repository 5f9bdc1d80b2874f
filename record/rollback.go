package record

// The rollback record (KindRollback). Frozen like everything in
// format.go:
//
//	rollback 11 | uvarint len | run id | uvarint seq | uvarint to | head [32] |
//	             varint started (unix ns) | uvarint n | n x undo
//
// In an encrypted store the undo list (uvarint n | n x undo) is sealed
// with the run's key, at the place (KindRollback, run, seq): seal.go.
//
//	undo := uvarint seq | fingerprint [32] | uvarint len | tool | how 1 B |
//	        [uvarint len | ctool | uvarint len | cargs | uvarint len | ckey]
//	how:    0 not undone (the action has no compensation: no fields follow)
//	        1 compensation, 2 idempotent compensation (the three fields follow)
//
// seq is the seq of the atom that completes the rollback, 1 + the run's
// last atom when the rollback began, and head the run's head then,
// h(seq-1); 0 <= to < seq. The undo entries are the certified actions of
// atoms to+1 .. seq-1 and of the atom a crash interrupted at seq, newest
// first (by atom, then the reverse of the order the atom performed them):
// seq is the atom that lists the action (to < seq <= the record's seq),
// fingerprint its fingerprint, tool its tool (empty for an action settled
// by Resolve without ever being dispatched, which has no intent, and so
// no compensation); ctool, cargs (canonical JSON, redacted) and
// ckey (never empty: the key the compensation runs with, the agent's or
// ledger.CompensationKey(fingerprint)) are its compensation as its intent
// recorded it. An entry's seqs never increase from one entry to the next.
//
// The atom that completes the rollback (at seq, delta one replace_frame
// op: the run's frame at to) lists the fingerprints of the compensations
// it ran, in the record's order, and is chained over its body, its
// results' digests, then RollbackSeal(the rollback record).

import (
	"encoding/binary"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/ledger"
	"github.com/zeebo/blake3"
)

// Bounds of a rollback record.
const (
	// MaxRollbackUndo bounds the undo entries of one rollback record.
	MaxRollbackUndo = 1 << 20
	// MaxRollbackField bounds a tool name, a compensation's args and its
	// key in a rollback record.
	MaxRollbackField = 16 << 20
)

// The how byte of an undo entry.
const (
	undoNone      = 0
	undoComp      = 1
	undoCompIdemp = 2
	minUndoEntry  = 1 + 32 + 1 + 1 // seq, fingerprint, empty tool, how
)

// Undo is one entry of a rollback record: a certified action the rollback
// reaches and how it is undone.
type Undo struct {
	Seq    uint64             // the atom that lists the action
	Action ledger.Fingerprint // the action's fingerprint
	Tool   string             // the action's tool
	// Compensation is the action that undoes it, its Key filled in (never
	// empty); nil: the action has none, and the rollback does not undo it.
	Compensation *ledger.Compensation
}

// AppendRollback appends a rollback record of run: the rollback to seq
// to, completed by the atom at seq, begun when the run's head was head.
func AppendRollback(dst []byte, run string, seq, to uint64, head chain.Hash, started int64, undo []Undo) []byte {
	return appendUndo(appendRollbackHeader(dst, run, seq, to, head, started), undo)
}

// appendRollbackHeader appends a rollback record up to its undo list,
// which an encrypted store seals (seal.go).
func appendRollbackHeader(dst []byte, run string, seq, to uint64, head chain.Hash, started int64) []byte {
	dst = append(dst, byte(KindRollback))
	dst = AppendString(dst, run)
	dst = binary.AppendUvarint(dst, seq)
	dst = binary.AppendUvarint(dst, to)
	dst = append(dst, head[:]...)
	return binary.AppendVarint(dst, started)
}

// appendUndo appends a rollback record's undo list: its count, then its
// entries.
func appendUndo(dst []byte, undo []Undo) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(undo)))
	for i := range undo {
		u := &undo[i]
		dst = binary.AppendUvarint(dst, u.Seq)
		dst = append(dst, u.Action[:]...)
		dst = AppendString(dst, u.Tool)
		c := u.Compensation
		switch {
		case c == nil:
			dst = append(dst, undoNone)
			continue
		case c.Idempotent:
			dst = append(dst, undoCompIdemp)
		default:
			dst = append(dst, undoComp)
		}
		dst = AppendString(dst, c.Tool)
		dst = AppendBytes(dst, c.Args)
		dst = AppendString(dst, c.Key)
	}
	return dst
}

// RollbackSeal is what the atom completing a rollback is chained over
// after its results' digests: BLAKE3-256 of the whole rollback record, as
// the log holds it (raw, its kind byte included).
func RollbackSeal(raw []byte) [32]byte { return blake3.Sum256(raw) }

// decodeRollbackHeader reads the fields of a rollback record after its
// kind, up to its undo list.
func decodeRollbackHeader(f *Fields, r *Record) {
	r.Run = f.RunID()
	r.Seq = f.Uvarint("seq")
	r.To = f.Uvarint("to")
	r.Head = f.Hash("head")
	r.Started = f.Varint("started")
	if f.err == nil && r.Seq == 0 {
		f.Fail("seq 0 cannot complete a rollback (the completing atom follows the run's creation)")
	}
	if f.err == nil && r.To >= r.Seq {
		f.Fail("rolls back to seq %d, not before its own seq %d", r.To, r.Seq)
	}
}

// decodeUndo reads a rollback record's undo list (of r, whose header is
// read) and checks that nothing follows it.
func decodeUndo(f *Fields, r *Record) {
	if f.err != nil {
		return
	}
	n := f.Uvarint("undo count")
	if f.err == nil && (n > MaxRollbackUndo || n*minUndoEntry > uint64(len(f.b)-f.off)) {
		f.Fail("undo count %d exceeds the record", n)
	}
	if f.err != nil {
		return
	}
	r.Undo = make([]Undo, n)
	for i := range r.Undo {
		u := &r.Undo[i]
		u.Seq = f.Uvarint("undo seq")
		u.Action = ledger.Fingerprint(f.Hash("undo fingerprint"))
		u.Tool = string(f.Bytes("undo tool", MaxRollbackField))
		how := f.Byte("undo how")
		if f.err != nil {
			return
		}
		switch {
		case u.Seq <= r.To || u.Seq > r.Seq:
			f.Fail("undo %d: seq %d is not after the target %d and at most the rollback's seq %d", i, u.Seq, r.To, r.Seq)
		case i > 0 && u.Seq > r.Undo[i-1].Seq:
			f.Fail("undo %d: seq %d after seq %d (entries are newest first)", i, u.Seq, r.Undo[i-1].Seq)
		case u.Tool == "" && how != undoNone:
			f.Fail("undo %d: a compensation of an action without a tool", i)
		case how > undoCompIdemp:
			f.Fail("undo %d: unknown how %d", i, how)
		}
		if f.err != nil || how == undoNone {
			continue
		}
		c := &ledger.Compensation{Idempotent: how == undoCompIdemp}
		c.Tool = string(f.Bytes("compensation tool", MaxRollbackField))
		c.Args = f.Bytes("compensation args", MaxRollbackField)
		c.Key = string(f.Bytes("compensation key", MaxRollbackField))
		if f.err == nil && (c.Tool == "" || c.Key == "") {
			f.Fail("undo %d: compensation without a tool or a key", i)
		}
		u.Compensation = c
	}
	f.Done("rollback record")
}
