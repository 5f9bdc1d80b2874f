package record

// The records of an encrypted store (layout's ChainSealed; docs/DESIGN.md,
// "Encryption at rest"). The kinds and their fields are those of
// format.go; what holds agent data is sealed (package seal: AES-256-GCM
// under the run's data key) where the plaintext store has it:
//
//	atom        4 | uvarint len | run id | uvarint seq | head [32] | sealed(uvarint len | tail | compressed(body))
//	intent      2 | sealed(compressed(ledger intent))
//	certificate 3 | sealed(compressed(ledger certificate))
//	end         8 | ... | status | varint ended | uvarint len | sealed(result)
//	fail        5 | uvarint len | run id | uvarint seq | uvarint len | sealed(reason)
//	rollback   11 | ... | varint started | sealed(uvarint n | n x undo)
//
// The derived files seal what holds agent data too: the compressed frame
// of a frame file and of a snapshot (PlaceFrame), and the ledger's table,
// INBOX and WAITS, whole (PlaceLedgerTable, PlaceInbox, PlaceWaits); WAITS
// since 2026-12 per block instead (seal_block.go, PlaceWaitsBlock).
//
// Run ids, seqs, heads, kinds, statuses and times stay in the clear: verify
// checks the chain without any key. The chain links each record over its
// stored bytes: an atom over its sealed body, an end over status | ended |
// its sealed result. What the plaintext rule hashes besides an atom's body
// (BLAKE3 of each action's certified result, then a rollback's seal: the
// tail) is sealed inside the body, so that a deep verify, which opens it,
// checks it against the certificates as the plaintext rule does.
//
// The additional data of a sealed payload is its place (AppendAAD): the
// store id, the kind, the run and the seq, so that a payload moved to
// another record, run or store does not open. An intent's or a
// certificate's run and seq are inside it: they are sealed with the kind
// and store alone as their place, and their decoder checks that the run
// they name is the one whose key sealed them, or that the store's key
// sealed them: the records of an action with an explicit key belong to
// the store (another run may repeat the action and get its certificate),
// so erasing the run that ran it keeps them; an intent sealed so must
// have an explicit key.

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/seal"
)

// PlaceFrame is the kind of a sealed frame's place (AppendAAD): a frame
// file's or a snapshot's frame, compressed then sealed with its run's key,
// at its run and seq. It is no record kind: the derived files seal with it.
const PlaceFrame Kind = 0xf0

// PlaceLedgerTable, PlaceInbox and PlaceWaits are the kinds of the places
// of the ledger's table, of INBOX and of WAITS, each sealed whole with the
// store's key (they hold every run's), at the run "" and the checkpoint
// generation that wrote them (CHECKPOINT names it).
const (
	PlaceLedgerTable Kind = 0xf1
	PlaceInbox       Kind = 0xf2
	PlaceWaits       Kind = 0xf5
)

// SealStoreFile seals b, a derived file of the store (PlaceLedgerTable,
// PlaceInbox, PlaceWaits) of checkpoint generation gen, with the store's key.
func (s *Sealer) SealStoreFile(b []byte, k Kind, gen uint64) ([]byte, error) {
	return s.Seal(nil, b, k, "", gen)
}

// OpenStoreFile opens what SealStoreFile sealed.
func (s *Sealer) OpenStoreFile(b []byte, k Kind, gen uint64) ([]byte, error) {
	return s.Open(nil, b, k, "", gen)
}

// OpenFrame opens stored, the sealed compressed frame of run at seq (a
// frame file's or a snapshot's), into the compressed frame.
func (s *Sealer) OpenFrame(stored []byte, run string, seq uint64) ([]byte, error) {
	return s.Open(nil, stored, PlaceFrame, run, seq)
}

// aadMagic starts the additional data of every sealed payload of a log.
const aadMagic = "continuum/record sealed"

// MaxSealedTail bounds the tail sealed inside an atom body: a digest per
// action and a rollback's seal.
const MaxSealedTail = (MaxActionsPerAtom + 1) * 32

// Sealer seals and opens the payloads of an encrypted store's records
// with its data keys: a payload of run r with r's newest key.
type Sealer struct {
	Store [16]byte   // the store id, bound into every payload
	Keys  *seal.Keys // the store's unwrapped data keys
	// KeysFile names the key table's file: a payload sealed with a key
	// the table lacks is reported as that file's damage.
	KeysFile string
}

// AppendAAD appends the additional data of a payload of kind k of run at
// seq in store.
func AppendAAD(dst []byte, store [16]byte, k Kind, run string, seq uint64) []byte {
	dst = append(dst, aadMagic...)
	dst = append(dst, store[:]...)
	dst = append(dst, byte(k))
	dst = AppendString(dst, run)
	return binary.AppendUvarint(dst, seq)
}

// Seal appends plain sealed with run's data key, for the place (k, run,
// seq). A run without a key is an error: its key is added before its
// creation record.
func (s *Sealer) Seal(dst, plain []byte, k Kind, run string, seq uint64) ([]byte, error) {
	key, ok := s.Keys.Scope(run)
	if !ok {
		return dst, fmt.Errorf("record: run %q has no data key in the key table", run)
	}
	var aad [128]byte
	return key.Seal(dst, plain, AppendAAD(aad[:0], s.Store, k, run, seq))
}

// Open appends the plaintext of sealed, sealed for the place (k, run,
// seq). A payload that was changed or moved matches seal.ErrAuth; one
// whose key was erased, seal.ErrErased.
func (s *Sealer) Open(dst, sealed []byte, k Kind, run string, seq uint64) ([]byte, error) {
	var aad [128]byte
	return seal.Open(dst, sealed, AppendAAD(aad[:0], s.Store, k, run, seq), s.Keys.Key)
}

// openLedger opens an intent or a certificate (sealed with only its kind
// as its place) and returns the scope of the key that sealed it (also
// when that key was erased: the error then matches seal.ErrErased).
func (s *Sealer) openLedger(dst, sealed []byte, k Kind) ([]byte, string, error) {
	var aad [128]byte
	var scope string
	out, err := seal.Open(dst, sealed, AppendAAD(aad[:0], s.Store, k, "", 0), func(no uint64) (*seal.Key, error) {
		key, err := s.Keys.Key(no)
		switch {
		case err == nil:
			scope, _ = s.Keys.ScopeOf(no)
		case errors.Is(err, seal.ErrErased):
			scope, _ = s.Keys.ErasedScope(no)
		}
		return key, err
	})
	return out, scope, err
}

// SealLedger appends the sealed form of compressed, the compressed body
// of an intent or a certificate, for kind k, with the data key of scope:
// the record's run, or "" (the store's key) for an action with an
// explicit key (ledger.Intent.ExplicitKey), whose records another run
// may need once this one is erased.
func (s *Sealer) SealLedger(dst, compressed []byte, k Kind, scope string) ([]byte, error) {
	key, ok := s.Keys.Scope(scope)
	if !ok {
		return dst, fmt.Errorf("record: run %q has no data key in the key table", scope)
	}
	var aad [128]byte
	return key.Seal(dst, compressed, AppendAAD(aad[:0], s.Store, k, "", 0))
}

// AppendSealedRollback appends a rollback record of an encrypted store:
// AppendRollback's, its undo list (the actions' tools, the compensations'
// tools, arguments and keys) sealed with the run's key.
func (s *Sealer) AppendSealedRollback(dst []byte, run string, seq, to uint64, head chain.Hash, started int64, undo []Undo) ([]byte, error) {
	dst = appendRollbackHeader(dst, run, seq, to, head, started)
	return s.Seal(dst, appendUndo(nil, undo), KindRollback, run, seq)
}

// SealAtomBody appends the sealed body of atom seq of run: compressed
// (its compressed body) and tail (the digests of its actions' certified
// results, then a rollback's seal), sealed together. The chain links the
// atom over what it appends.
func (s *Sealer) SealAtomBody(dst []byte, run string, seq uint64, compressed, tail []byte) ([]byte, error) {
	plain := AppendAtomPlainHead(make([]byte, 0, binary.MaxVarintLen64+len(tail)+len(compressed)), tail)
	return s.SealAtomPlain(dst, run, seq, append(plain, compressed...))
}

// AppendAtomPlainHead appends the start of the plaintext that an atom
// body's seal covers: tail, the digests of its actions' certified results
// then a rollback's seal, with its length. The compressed body follows it,
// appended by the caller (into the same buffer, so that the body is
// compressed where it is sealed from); SealAtomPlain seals the whole.
func AppendAtomPlainHead(dst, tail []byte) []byte { return AppendBytes(dst, tail) }

// SealAtomPlain appends the sealed body of atom seq of run, plain being
// AppendAtomPlainHead's tail followed by the compressed body: what
// SealAtomBody appends, without its copy of the compressed body.
func (s *Sealer) SealAtomPlain(dst []byte, run string, seq uint64, plain []byte) ([]byte, error) {
	return s.Seal(dst, plain, KindAtom, run, seq)
}

// OpenAtomBody opens sealed, the stored body of atom seq of run, into its
// compressed body and its tail (both slices of what it appends to dst).
func (s *Sealer) OpenAtomBody(dst, sealed []byte, run string, seq uint64) (compressed, tail []byte, err error) {
	plain, err := s.Open(dst, sealed, KindAtom, run, seq)
	if err != nil {
		return nil, nil, err
	}
	f := Fields{b: plain, off: len(dst)}
	tail = f.Bytes("sealed tail", MaxSealedTail)
	if f.err == nil && len(tail)%32 != 0 {
		f.Fail("sealed tail of %d bytes, not whole digests", len(tail))
	}
	if f.err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrCorrupt, f.err)
	}
	return f.Rest(), tail, nil
}

// PlaceMemory is the kind of a sealed memory value's place (AppendAAD,
// with the memory key in the run's slot and seq 0): a value of an
// erasable memory key, sealed with the data key of its memory scope
// (seal.MemoryScope) before it enters a delta, and carried sealed by the
// frame (frame.Frame.Sealed) into frame files, snapshots and forks. Its
// place holds no run or seq: a fork carries its parent's sealed values,
// and a value moves from a delta into frames unchanged.
const PlaceMemory Kind = 0xf3

// SealValue appends value, a value of memory key key of run, sealed with
// the newest data key of their memory scope: the caller adds one (and
// makes the key table durable) before the first value.
func (s *Sealer) SealValue(dst, value []byte, run, key string) ([]byte, error) {
	k, ok := s.Keys.Scope(seal.MemoryScope(run, key))
	if !ok {
		return dst, fmt.Errorf("record: memory key %q of run %q has no data key in the key table", key, run)
	}
	var aad [128]byte
	return k.Seal(dst, value, AppendAAD(aad[:0], s.Store, PlaceMemory, key, 0))
}

// OpenValue appends the plaintext of sealed, a sealed value of memory key
// key. One whose data key was erased matches seal.ErrErased; one that was
// changed or moved to another key, seal.ErrAuth.
func (s *Sealer) OpenValue(dst, sealed []byte, key string) ([]byte, error) {
	var aad [128]byte
	return seal.Open(dst, sealed, AppendAAD(aad[:0], s.Store, PlaceMemory, key, 0), s.Keys.Key)
}
