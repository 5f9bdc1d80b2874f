package engine

// Erasing one memory key across a run, and the values of erasable memory
// keys (Options.ErasableKeys) sealed with a data key of their own
// (docs/DESIGN.md, "Erasing a memory key"): internal/erasure holds both;
// this file is the API and the DB as the package's Store (eraseStore);
// hooks.go's prepare hook seals (Eraser.Seal), the reads open (Open).

import (
	"context"
	"errors"
	"time"

	"github.com/continuumdb/continuum/chain"
	erasing "github.com/continuumdb/continuum/internal/erasure"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

// ErrNotErasable is returned by EraseKey for a memory key of a run whose
// values were never sealed with a key of their own (the key was not in
// Options.ErasableKeys when they were written): they can be erased only
// with the run (Erase).
var ErrNotErasable = errors.New("engine: memory key is not erasable")

// ErrNothingToErase is returned by EraseKey for a memory key whose values
// are all erased already.
var ErrNothingToErase = errors.New("engine: nothing to erase")

// MaxMemoryKeyLen bounds an erasable memory key, in bytes.
const MaxMemoryKeyLen = record.MaxMemoryKeyLen

// ErasedKey is the erasure of one memory key of a run, as its erase-key
// record says.
type ErasedKey struct {
	Run    string
	Key    string
	Seq    uint64     // the run's last seq when the key was erased
	Head   chain.Hash // the erasure's link (beside the run's chain, from its head at Seq)
	KeyNos []uint64   // the data keys it erased
	At     time.Time
	Reason string
}

// EraseKey erases the values of memory key key of run id in an encrypted
// store: every value of it sealed so far, wherever it was copied, can
// never be opened again, and the run reads the key as absent until a new
// value is written. It returns once KEYS no longer holds their keys.
// reason is recorded in the erase-key record (at most MaxDeleteReason
// bytes; "" records "erased by request").
//
// It fails with ErrKeyring on a plaintext store, ErrRunDeleted for a
// deleted run (Erase it whole), ErrNotErasable for a key whose values were
// never sealed with a key of their own, and ErrNothingToErase when they
// are all erased already.
func (db *DB) EraseKey(ctx context.Context, id, key, reason string) (ErasedKey, error) {
	if err := db.checkOpen(); err != nil {
		return ErasedKey{}, err
	}
	// "No such run" is decided on the log's deletions: those before
	// CHECKPOINT's replay position are known once the check has run.
	if err := db.checkRegistry(); err != nil {
		return ErasedKey{}, err
	}
	k, err := db.eraser.EraseKey(ctx, (*tableRuns)(db), id, key, reason)
	return ErasedKey(k), err
}

// newEraser is the DB's erasure capability, over the DB (eraseStore).
func newEraser(db *DB) *erasing.Eraser {
	return erasing.New(erasing.Config{Store: eraseStore{db}, ErasableKeys: db.opts.ErasableKeys,
		ErrInvalidDelta: ErrInvalidDelta, ErrInvalidOptions: ErrInvalidOptions, ErrNotErasable: ErrNotErasable,
		ErrNothingToErase: ErrNothingToErase, ErrClosed: ErrClosed, Refusals: retentionErrs})
}

// eraseStore is the DB as package internal/erasure's Store: its KEYS
// (keys.go), sealer, chain and log.
type eraseStore struct{ db *DB }

func (s eraseStore) LockKeys() (*seal.Table, *seal.Keys) { return s.db.keys.Lock() }
func (s eraseStore) UnlockKeys()                         { s.db.keys.Unlock() }
func (s eraseStore) ReplaceKeys(next *seal.Table) error  { return s.db.keys.Replace(next) }
func (s eraseStore) AddKey(scope string) error           { return s.db.keys.Add(scope) }
func (s eraseStore) Sealer() *record.Sealer              { return s.db.sealer }

func (s eraseStore) Link(run string, seq uint64, prev chain.Hash, payload []byte) chain.Hash {
	return s.db.hasher.Link(run, seq, prev, payload)
}

func (s eraseStore) Note(run string, seq uint64, head chain.Hash, final bool) ([]byte, error) {
	c := chain.Checkpoint{StoreID: s.db.StoreID(), RunID: run, Seq: seq, Head: head, Final: final}
	if s.db.signer == nil {
		return chain.MarshalCheckpoint(c), nil
	}
	return s.db.signer.SignCheckpoint(c)
}

func (s eraseStore) Append(ctx context.Context, rec []byte) error {
	_, err := s.db.append(ctx, rec)
	return err
}
