package engine

// Erasing one memory key across a run, and the values of erasable memory
// keys (Options.ErasableKeys) sealed with a data key of their own
// (docs/DESIGN.md, "Erasing a memory key"): internal/erasure holds both;
// this file is the API, and gcCore (gc.go) is the package's Store;
// hooks.go's prepare hook seals (Eraser.Seal), the reads open (Open).

import (
	"context"
	"errors"
	"time"

	"github.com/continuumdb/continuum/chain"
	erasing "github.com/continuumdb/continuum/internal/erasure"
	"github.com/continuumdb/continuum/record"
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
	k, err := db.eraser.EraseKey(ctx, gcCore{db}, id, key, reason)
	return ErasedKey(k), err
}

// newEraser is the DB's erasure capability, over the DB (gcCore).
func newEraser(db *DB) *erasing.Eraser {
	return erasing.New(erasing.Config{Store: gcCore{db}, ErasableKeys: db.opts.ErasableKeys,
		ErrInvalidDelta: ErrInvalidDelta, ErrInvalidOptions: ErrInvalidOptions, ErrNotErasable: ErrNotErasable,
		ErrNothingToErase: ErrNothingToErase, ErrClosed: ErrClosed, Refusals: retentionErrs,
		Logger: db.logger, Fail: db.setBackgroundErr, Unclean: &db.unclean})
}
