package engine

// Erasing one memory key across a run (crypto-shredding; docs/DESIGN.md,
// "Erasing a memory key"), and the values of erasable memory keys
// (Options.ErasableKeys), sealed with a data key of their own before they
// enter a delta and opened on the way out. Package internal/erasure holds
// both (its keyerase.go and memory.go say the steps and what a crash
// leaves); this file is their glue: the public API, the hooks of the
// commit path, the reads and the replay, and the DB as the package's
// Store.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	erasing "github.com/continuumdb/continuum/internal/erasure"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

// ErrNotErasable is returned by EraseKey for a memory key of a run whose
// values were never sealed with a key of their own (the key was not in
// Options.ErasableKeys when they were written): they can be erased only
// with the run (Erase).
var ErrNotErasable = errors.New("engine: memory key is not erasable")

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

// newEraser is the DB's erasure capability, over the DB (eraseStore).
func newEraser(db *DB) *erasing.Eraser {
	return erasing.New(erasing.Config{Store: eraseStore{db}, ErasableKeys: db.opts.ErasableKeys,
		ErrInvalidDelta: ErrInvalidDelta, ErrInvalidOptions: ErrInvalidOptions,
		ErrNotErasable: ErrNotErasable, ErrNothingToErase: ErrNothingToErase})
}

// sealMemory returns d with the values it sets for erasable memory keys
// of run sealed with their own data keys (erasure.Eraser.Seal); own says
// the engine built d (a rollback's replace_frame).
func (db *DB) sealMemory(run string, d *frame.Delta, own bool) (*frame.Delta, error) {
	return db.eraser.Seal(run, d, own)
}

// unseal returns f with its sealed memory values opened; a value whose
// data key was erased is left out (erasure.Eraser.Open).
func (db *DB) unseal(f *frame.Frame) (*frame.Frame, error) { return db.eraser.Open(f) }

// checkSealedKeys reports, as KEYS's damage, a sealed memory value of f,
// run's frame as it comes into memory, whose data key KEYS does not hold
// (erasure.Eraser.CheckSealed).
func (db *DB) checkSealedKeys(run string, f *frame.Frame) error {
	return db.eraser.CheckSealed(run, f)
}

// EraseKey erases the values of memory key key of run id in an encrypted
// store: every value of it sealed so far (in the log, frame files,
// snapshots, forks and copies of them) can never be opened again, by
// anyone; the run reads the key as absent until a new value is written
// (sealed with a new data key). The chain still verifies, and verify
// lists the erasure (see the file's comment for the steps). It returns
// once KEYS no longer holds the keys. EraseKey of a key whose values are
// all erased already (none written since) fails with ErrNothingToErase.
//
// It fails with ErrKeyring on a plaintext store, ErrRunDeleted for a
// deleted run (erase it whole: Erase), and ErrNotErasable for a key whose
// values were never sealed with a key of their own. reason is recorded
// in the erase-key record (at most MaxDeleteReason bytes; "" records
// "erased by request").
func (db *DB) EraseKey(ctx context.Context, id, key, reason string) (ErasedKey, error) {
	if err := db.checkOpen(); err != nil {
		return ErasedKey{}, err
	}
	if db.keys == nil {
		return ErasedKey{}, fmt.Errorf("%w: erase memory key %q of run %q: the store is not encrypted, so no key can be shredded", ErrKeyring, key, id)
	}
	reason, err := db.eraser.Reason("erase key", reason)
	if err == nil {
		err = db.eraser.CheckKey(key)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return ErasedKey{}, err
	}
	if err := db.logFailed(); err != nil {
		return ErasedKey{}, fmt.Errorf("engine: erase key: the log failed earlier; reopen the store: %w", err)
	}
	db.mu.Lock()
	if db.mu.closed {
		db.mu.Unlock()
		return ErasedKey{}, ErrClosed
	}
	r := db.runLocked(id)
	deleted := db.deletedLocked(id)
	db.mu.Unlock()
	switch {
	case deleted:
		return ErasedKey{}, fmt.Errorf("%w: erase memory key %q of run %q: erase the run whole (Erase)", ErrRunDeleted, key, id)
	case r == nil:
		return ErasedKey{}, fmt.Errorf("engine: erase memory key %q of run %q: the store has no such run", key, id)
	}
	// The erasure is tracked from before its record's position is taken
	// until KEYS is written.
	tok := db.track()
	defer db.untrack(tok)
	nos, err := db.eraser.Retire(id, key)
	if err != nil {
		return ErasedKey{}, err
	}
	r.mu.Lock()
	seq, head, _ := r.chainHeadLocked()
	r.mu.Unlock()
	k, err := db.eraser.RecordKey(ctx, id, key, reason, seq, head, nos)
	return ErasedKey(k), err
}

// ErrNothingToErase is returned by EraseKey for a memory key whose values
// are all erased already.
var ErrNothingToErase = errors.New("engine: nothing to erase")

// healKeyErasures drops the data keys named by erase-key records of the
// log (es) that KEYS holds live: a KEYS older than the erasures (restored
// from a copy), from which the erased values could be opened again.
// Called once the log's records are all known (checkRegistry).
func (db *DB) healKeyErasures(es []erasing.KeyErasure) {
	keys, err := db.eraser.Heal(es)
	if len(keys) > 0 {
		db.logger.Warn("engine: KEYS still held data keys of erased memory keys (it is older than their erasure); erased them again", "keys", keys, "err", err)
	}
	if err != nil {
		db.setBackgroundErr(fmt.Errorf("engine: erase again the data keys of erased memory keys that an older KEYS holds: %w", err))
	}
}

// eraseStore is the DB as package internal/erasure's Store: its KEYS
// (keys.go), sealer, chain and log.
type eraseStore struct{ db *DB }

func (s eraseStore) LockKeys() (*seal.Table, *seal.Keys) { return s.db.keys.Lock() }
func (s eraseStore) UnlockKeys()                         { s.db.keys.Unlock() }
func (s eraseStore) ReplaceKeys(next *seal.Table) error  { return s.db.keys.Replace(next) }
func (s eraseStore) AddKey(scope string) error           { return s.db.keys.Add(scope) }

func (s eraseStore) Sealer() *record.Sealer { return s.db.sealer }

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
