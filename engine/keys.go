package engine

// The keys of an encrypted store (internal/keystore; docs/DESIGN.md,
// "Encryption at rest").

import (
	"fmt"

	"github.com/continuumdb/continuum/internal/keystore"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/offline"
	"github.com/continuumdb/continuum/seal"
)

// ErrKeyring is returned by Open when the store and Options.Keyring do not
// match (one without the other); a key missing or wrong is
// seal.ErrUnknownKey or seal.ErrWrongKey instead.
var ErrKeyring = offline.ErrKeyring

// openKeys reads KEYS of an existing encrypted store with the keyring,
// before any record is read.
func (db *DB) openKeys() error {
	return db.setKeys(keystore.Open(db.fs, db.path(layout.KeysName), db.path(layout.StoreName), db.storeID, db.opts.Keyring, db.opts.NoSync))
}

// createKeys writes KEYS of a new encrypted store, before STORE.
func (db *DB) createKeys() error {
	return db.setKeys(keystore.Create(db.fs, db.path(layout.KeysName), db.storeID, db.opts.Keyring, db.opts.NoSync))
}

func (db *DB) setKeys(ks *keystore.Store, err error) error {
	if err == nil {
		db.keys, db.sealer = ks, ks.Sealer()
	}
	return err
}

// addRunKey adds run id's data key, durably, if it is new.
func (db *DB) addRunKey(id string) error {
	if err := db.keys.Add(id); err != nil {
		return fmt.Errorf("engine: run %q: data key: %w", id, err)
	}
	return nil
}

// Rekey re-wraps with the keyring's current key every data key another
// wrapped, durably, and returns how many; the keyring's older keys can
// then be retired. A plaintext store: ErrKeyring.
func (db *DB) Rekey() (int, error) {
	if err := db.checkOpen(); err != nil {
		return 0, err
	}
	if db.keys == nil {
		return 0, fmt.Errorf("%w: the store is not encrypted", ErrKeyring)
	}
	n, err := db.keys.Rekey()
	if err != nil {
		return 0, fmt.Errorf("engine: rekey: %w", err)
	}
	return n, nil
}

// KeyEntries lists the entries of the store's key table (wrapped keys,
// never in the clear), nil for a plaintext store.
func (db *DB) KeyEntries() []seal.Entry {
	if db.keys == nil {
		return nil
	}
	return db.keys.Entries()
}

// openRowResult opens CHECKPOINT's sealed end result of run (ended at
// seq): Eraser.OpenResult (none once the run's key is erased).
func (db *DB) openRowResult(run string, seq uint64, stored []byte) []byte {
	return db.eraser.OpenResult(run, seq, stored)
}

// checkRunKeys refuses a KEYS that lacks the data key of a run the store
// holds (keystore.Store.CheckHeld).
func (db *DB) checkRunKeys() error {
	return db.keys.CheckHeld(func(yield func(string) bool) { // KEYS read first, then db.mu taken
		db.mu.Lock()
		defer db.mu.Unlock()
		db.mu.runs.IDs(&db.mu.lazy)(yield)
	}, ErrCorrupt)
}
