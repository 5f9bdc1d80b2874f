package record

// The log's records. Every constant in this file is frozen: a store written
// by one version must stay readable by every later one. A new record gets
// a new kind, a new body gets a new version byte; an old one never changes
// meaning.
//
// Each log record (one wal record) starts with a kind byte:
//
//	run         1 | uvarint len | run id | nonce [16] | varint created (unix ns)
//	intent      2 | compressed(ledger intent)
//	certificate 3 | compressed(ledger certificate)
//	atom        4 | uvarint len | run id | uvarint seq | head [32] | compressed(body)
//	fail        5 | uvarint len | run id | uvarint seq | uvarint len | reason
//	checkpoint  6 | chain checkpoint (signed note, or unsigned)
//	store head  7 | chain store head (signed note, or unsigned)
//	end         8 | uvarint len | run id | uvarint seq | head [32] | status | varint ended (unix ns) | uvarint len | result
//	fork        9 | uvarint len | run id | nonce [16] | varint created (unix ns) | uvarint len | parent id | uvarint at | parent head [32]
//	delete     10 | uvarint len | run id | uvarint seq | final head [32] | head [32] | varint deleted (unix ns) | uvarint len | reason | note
//	rollback   11 | uvarint len | run id | uvarint seq | uvarint to | head [32] | varint started (unix ns) | uvarint n | n x undo
//	erase      12 | the delete record's fields, byte for byte (a deletion that also erases)
//	erase key  13 | uvarint len | run id | uvarint seq | head [32] | link [32] | varint erased | uvarint len | key | uvarint n | n x uvarint key no | uvarint len | reason | note (erasekey.go)
//	wait       14 | uvarint len | run id | uvarint seq | head [32] | link [32] | varint declared | varint deadline | uvarint len | name (wait.go)
//	event      15 | uvarint len | run id | uvarint seq | head [32] | link [32] | varint sent | uvarint len | name | uvarint len | sender | uvarint len | payload (wait.go)
//	wake       16 | uvarint len | run id | uvarint seq | head [32] | link [32] | varint at | reason (wait.go)
//	stream chunk   18 | uvarint len | run id | uvarint seq | uvarint attempt | uvarint len | stream | uvarint offset | data (stream.go)
//	stream abandon 19 | uvarint len | run id | uvarint seq | uvarint attempt (stream.go)
//
// A rollback record (rollback.go) starts the rollback of a run to seq to:
// it is written, durably, before the first compensation runs, and names
// what the rollback undoes, newest first. seq is the seq of the atom that
// completes the rollback (the run's last atom + 1 when it began), head the
// run's head then (h(seq-1)). The completing atom is chained over its
// body, its results' digests and then BLAKE3-256 of the whole rollback
// record (RollbackSeal), so the chain covers the record from that atom on.
//
// A delete record deletes an ended run by policy (retention): it is the
// run's deletion link, at seq (the end's seq + 1), after the run's final
// head (the end's link); head is chain.Hasher.Link over its chained
// payload (deleted | reason: AppendDeletePayload) from the final head.
// note is a chain checkpoint (chain.Checkpoint{RunID: run, Seq: seq,
// Head: head, Final: true}), signed when the store has a signing key, so
// that the deletion, its time and its reason are as provable as a final
// checkpoint even once every other record of the run has been reclaimed.
// A delete record is never reclaimed.
//
// An erase record deletes an ended run as a delete record does and says,
// besides, that the run's content was erased (crypto-shredding: the run's
// data key is dropped from the key table once the record is durable). Its
// fields are the delete record's; its link covers EraseMark before its
// time and reason (AppendErasePayload), so that a delete record relabelled
// as an erasure, or an erasure as a plain deletion, fails its link. It
// follows the run's end (seq = the end's seq + 1, final = the end's link)
// or, for a run deleted earlier, its delete record (seq = the deletion's
// seq + 1, final = the deletion's link). An erase record is never
// reclaimed.
//
// compressed(x) is frame.Compressor's format: a codec byte, a dictionary
// id, the payload. The ledger's intent and certificate are
// ledger.AppendIntent and ledger.AppendCertificate. An atom body is
//
//	version 1 | uvarint n | n x fingerprint [32] | delta (frame.AppendDelta)
//
// listing the fingerprints of the actions the atom performed, in call
// order; an atom with extensions (a branch's base, messages sent or
// consumed) has body version 2, which atomext.go describes. The chain links an atom over its chained payload: the body
// followed by BLAKE3-256 of each action's certified result (AppendPayload).
// The hash covers the content, not its compressed form, so a changed
// dictionary or a changed certificate is detected as surely as a changed
// delta.
//
// The delta may refer to certified results instead of holding them
// (frame.Delta.ReferResults: a tool message whose content is the result
// the atom's action returned): reference i is the certified result of the
// body's action i, and nothing else (ApplyAtom resolves it; a reference
// beyond the actions, or to an action without a done or resolved
// certificate, is damage). The chained payload holds the result's digest,
// so the chain commits to the resolved content as well.
//
// An end record ends a run: it is the last link of the run's chain, at seq
// (the run's last atom + 1), linked over its chained payload, the bytes
// after its head (status | ended | result: AppendEndPayload). Status is 1
// completed, 2 failed, 3 cancelled.
//
// A fork record creates a run forked from parent at seq at (0 <= at <=
// the parent's last atom) instead of a run record: the run's chain starts
// at seq at with chain.Hasher.ForkGenesis over it, the parent, at and the
// parent's head at at; its first atom is at+1.

import (
	"encoding/binary"
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/ledger"
	"github.com/zeebo/blake3"
)

// Kind is a log record's first byte.
type Kind byte

// The record kinds.
const (
	KindRun        Kind = 1
	KindIntent     Kind = 2
	KindCert       Kind = 3
	KindAtom       Kind = 4
	KindFail       Kind = 5
	KindCheckpoint Kind = 6
	KindStoreHead  Kind = 7
	KindEnd        Kind = 8
	KindFork       Kind = 9
	KindDelete     Kind = 10
	KindRollback   Kind = 11
	KindErase      Kind = 12

	// MaxKind is the highest kind this version knows.
	MaxKind = KindStreamAbandon
)

// Deletes reports whether a record of kind k deletes its run: a delete
// or an erase record.
func (k Kind) Deletes() bool { return k == KindDelete || k == KindErase }

// EraseMark starts the chained payload of an erase record (what tells its
// link from a delete record's).
const EraseMark = "continuum/erase\x00"

const (
	// AtomBodyVersion is the version byte of an atom body.
	AtomBodyVersion = 1
	// MaxActionsPerAtom bounds the actions one atom may perform.
	MaxActionsPerAtom = 1 << 16
	// MaxFailReason bounds the reason of a fail record, in bytes.
	MaxFailReason = 64 << 10
	// MaxEndResult bounds the result of an end record, in bytes.
	MaxEndResult = 64 << 10
	// MaxDeleteReason bounds the reason of a delete record, in bytes.
	MaxDeleteReason = 4 << 10
	// MaxDeleteNote bounds the chain checkpoint a delete record carries.
	MaxDeleteNote = 8 << 10

	// The statuses of an end record.
	EndCompleted = 1
	EndFailed    = 2
	EndCancelled = 3
)

var kindNames = [...]string{
	KindRun:        "run",
	KindIntent:     "intent",
	KindCert:       "certificate",
	KindAtom:       "atom",
	KindFail:       "fail",
	KindCheckpoint: "checkpoint",
	KindStoreHead:  "store-head",
	KindEnd:        "end",
	KindFork:       "fork",
	KindDelete:     "delete",
	KindRollback:   "rollback",
	KindErase:      "erase",
	KindEraseKey:   "erase-key",
	// waits (wait.go)
	KindWait:  "wait",
	KindEvent: "event",
	KindWake:  "wake",

	KindStreamChunk:   "stream-chunk",
	KindStreamAbandon: "stream-abandon",
}

// String is the kind's name, as inspect and verify print it.
func (k Kind) String() string {
	if k >= 1 && k <= MaxKind && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind-%d", byte(k))
}

// AppendRun appends a run record: the creation of run id.
func AppendRun(dst []byte, id string, nonce chain.Nonce, created int64) []byte {
	dst = append(dst, byte(KindRun))
	dst = AppendString(dst, id)
	dst = append(dst, nonce[:]...)
	return binary.AppendVarint(dst, created)
}

// AppendAtomHeader appends the header of an atom record; the compressed
// body follows it (frame.Compressor.Compress appends it).
func AppendAtomHeader(dst []byte, run string, seq uint64, head chain.Hash) []byte {
	dst = append(dst, byte(KindAtom))
	dst = AppendString(dst, run)
	dst = binary.AppendUvarint(dst, seq)
	return append(dst, head[:]...)
}

// AppendAtomBodyHeader appends the part of an atom body before its delta:
// the version and the fingerprints of the atom's actions. The caller
// appends the delta (frame.AppendDelta) directly after it, so the delta is
// encoded once, in place.
func AppendAtomBodyHeader(dst []byte, actions []ledger.Fingerprint) []byte {
	dst = append(dst, AtomBodyVersion)
	dst = binary.AppendUvarint(dst, uint64(len(actions)))
	for _, fp := range actions {
		dst = append(dst, fp[:]...)
	}
	return dst
}

// AppendAtomBody appends a whole atom body.
func AppendAtomBody(dst []byte, actions []ledger.Fingerprint, delta []byte) []byte {
	return append(AppendAtomBodyHeader(dst, actions), delta...)
}

// AppendPayload appends the chained payload of an atom: its body, then
// BLAKE3-256 of each action's certified result, in call order. The chain
// links the atom over it (chain.Hasher.Link).
func AppendPayload(dst, body []byte, results [][]byte) []byte {
	dst = append(dst, body...)
	for _, r := range results {
		sum := blake3.Sum256(r)
		dst = append(dst, sum[:]...)
	}
	return dst
}

// AppendFail appends a fail record: atom seq of run failed for reason.
func AppendFail(dst []byte, run string, seq uint64, reason string) []byte {
	dst = append(dst, byte(KindFail))
	dst = AppendString(dst, run)
	dst = binary.AppendUvarint(dst, seq)
	return AppendString(dst, reason)
}

// AppendEndPayload appends the chained payload of an end record: what
// follows its head.
func AppendEndPayload(dst []byte, status uint8, ended int64, result []byte) []byte {
	dst = append(dst, status)
	dst = binary.AppendVarint(dst, ended)
	return AppendBytes(dst, result)
}

// AppendEnd appends an end record of run at chain seq seq, whose head is
// chain.Hasher.Link over AppendEndPayload(status, ended, result).
func AppendEnd(dst []byte, run string, seq uint64, head chain.Hash, status uint8, ended int64, result []byte) []byte {
	dst = append(dst, byte(KindEnd))
	dst = AppendString(dst, run)
	dst = binary.AppendUvarint(dst, seq)
	dst = append(dst, head[:]...)
	return AppendEndPayload(dst, status, ended, result)
}

// AppendFork appends a fork record: the creation of run id, forked from
// parent at seq at, where parent's head was parentHead.
func AppendFork(dst []byte, id string, nonce chain.Nonce, created int64, parent string, at uint64, parentHead chain.Hash) []byte {
	dst = append(dst, byte(KindFork))
	dst = AppendString(dst, id)
	dst = append(dst, nonce[:]...)
	dst = binary.AppendVarint(dst, created)
	dst = AppendString(dst, parent)
	dst = binary.AppendUvarint(dst, at)
	return append(dst, parentHead[:]...)
}

// AppendDeletePayload appends the chained payload of a delete record:
// what the deletion link covers besides the final head.
func AppendDeletePayload(dst []byte, deleted int64, reason string) []byte {
	dst = binary.AppendVarint(dst, deleted)
	return AppendString(dst, reason)
}

// AppendDelete appends a delete record of run: its deletion link at seq
// (the end's seq + 1) after final (the end's link), head =
// chain.Hasher.Link(run, seq, final, AppendDeletePayload(deleted,
// reason)), and note, the chain checkpoint of (run, seq, head, final).
func AppendDelete(dst []byte, run string, seq uint64, final, head chain.Hash, deleted int64, reason string, note []byte) []byte {
	return appendDeletion(dst, KindDelete, run, seq, final, head, deleted, reason, note)
}

func appendDeletion(dst []byte, k Kind, run string, seq uint64, final, head chain.Hash, at int64, reason string, note []byte) []byte {
	dst = append(dst, byte(k))
	dst = AppendString(dst, run)
	dst = binary.AppendUvarint(dst, seq)
	dst = append(dst, final[:]...)
	dst = append(dst, head[:]...)
	dst = AppendDeletePayload(dst, at, reason)
	return append(dst, note...)
}

// AppendErasePayload appends the chained payload of an erase record:
// EraseMark, then what a delete record's covers.
func AppendErasePayload(dst []byte, erased int64, reason string) []byte {
	return AppendDeletePayload(append(dst, EraseMark...), erased, reason)
}

// AppendErase appends an erase record of run: its link at seq after final
// (the run's end, or its deletion), head = chain.Hasher.Link(run, seq,
// final, AppendErasePayload(erased, reason)), and note, the chain
// checkpoint of (run, seq, head, final).
func AppendErase(dst []byte, run string, seq uint64, final, head chain.Hash, erased int64, reason string, note []byte) []byte {
	return appendDeletion(dst, KindErase, run, seq, final, head, erased, reason, note)
}

// AppendNote appends a checkpoint or a store head record: the kind byte,
// then the chain's encoding (chain.Checkpoint or chain.StoreHead, signed
// or not).
func AppendNote(dst []byte, k Kind, note []byte) []byte {
	return append(append(dst, byte(k)), note...)
}

// AppendLedger appends an intent or certificate record: the kind byte and
// body (ledger.AppendIntent or ledger.AppendCertificate) compressed by
// comp with dictionary dictID (0: none).
func AppendLedger(dst []byte, k Kind, body []byte, comp Compressor, dictID uint32) []byte {
	return comp.Compress(append(dst, byte(k)), body, dictID)
}

// Compressor is what the records' compression envelope needs of
// frame.Compressor.
type Compressor interface {
	Compress(dst, src []byte, dictID uint32) []byte
	Decompress(dst, src []byte) ([]byte, error)
	Charge(src []byte) error
}
