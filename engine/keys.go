package engine

// The keys of an encrypted store (Options.Keyring; docs/DESIGN.md,
// "Encryption at rest"): KEYS (package internal/keystore) read and opened
// at Open before any record is read, a data key added (and KEYS made
// durable) before a run's creation record, Rekey, and the check that KEYS
// holds the key of every run the store holds.

import (
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/internal/keystore"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/offline"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

// ErrKeyring is returned by Open when the store and Options.Keyring do not
// match: an encrypted store opened without a keyring, or a plaintext one
// with a keyring. A keyring that lacks a key the store needs, or whose key
// does not open it, is an error matching seal.ErrUnknownKey or
// seal.ErrWrongKey instead.
var ErrKeyring = offline.ErrKeyring

// openKeys reads KEYS of an existing encrypted store and unwraps its data
// keys with the keyring: a missing or wrong user key fails here, before
// any record is read.
func (db *DB) openKeys() error {
	ks, err := keystore.Open(db.fs, db.path(layout.KeysName), db.path(layout.StoreName), db.storeID, db.opts.Keyring, db.opts.NoSync)
	if err != nil {
		return err
	}
	db.setKeys(ks)
	return nil
}

// createKeys writes KEYS of a new encrypted store, with its store key,
// before STORE (writeStoreFile): a store whose STORE says it is encrypted
// has its key table.
func (db *DB) createKeys() error {
	ks, err := keystore.Create(db.fs, db.path(layout.KeysName), db.storeID, db.opts.Keyring, db.opts.NoSync)
	if err != nil {
		return err
	}
	db.setKeys(ks)
	return nil
}

func (db *DB) setKeys(ks *keystore.Store) {
	db.keys = ks
	db.sealer = &record.Sealer{Store: db.storeID, Keys: ks.Keys(), KeysFile: ks.Name()}
}

// runKey returns the data key of run id, adding one (and making KEYS
// durable) if it has none: called before the run's creation record is
// appended, so that nothing of the run is sealed with a key KEYS lacks.
// A run whose creation failed after its key was added keeps the key for
// its next attempt.
func (db *DB) runKey(id string) (*seal.Key, error) {
	if err := db.keys.Add(id); err != nil {
		return nil, fmt.Errorf("engine: run %q: data key: %w", id, err)
	}
	k, _ := db.keys.Keys().Scope(id)
	return k, nil
}

// Rekey re-wraps every data key of an encrypted store that the keyring's
// current key did not wrap, with the current key, and makes KEYS durable:
// after it the keyring's older keys can be retired. The sealed data is
// not touched. It returns how many keys it re-wrapped; on a plaintext
// store it fails with ErrKeyring.
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

// openRowResult opens the sealed end result of run (ended at seq) that
// CHECKPOINT's row holds. A result that does not open (the run was
// erased, or CHECKPOINT was changed: the comparison of the rows with the
// log reports that) is served as none.
func (db *DB) openRowResult(run string, seq uint64, stored []byte) []byte {
	plain, err := db.sealer.Open(nil, stored, record.KindEnd, run, seq)
	if err != nil {
		if !errors.Is(err, seal.ErrErased) {
			db.logger.Warn("engine: CHECKPOINT: the end result of a run does not open", "run", run, "err", err)
		}
		return nil
	}
	return plain
}

// checkRunKeys refuses a KEYS that lacks the data key of a run the store
// holds (a CHECKPOINT row or a run replayed from the log): a KEYS older
// than the log, or another copy's. Without it the run's sealed records
// would read as damage; Open says what is wrong instead. An erased run's
// key counts: its entry stays.
func (db *DB) checkRunKeys() error {
	has := map[string]bool{}
	for _, e := range db.keys.Entries() {
		has[e.Scope] = true
	}
	missing := func(id string) error {
		return fmt.Errorf("%w: %s has no data key of run %q, which the store holds: it is older than the log, or not this store's (restore the KEYS saved with the log)",
			ErrCorrupt, db.path(layout.KeysName), id)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	for i := range db.mu.lazy {
		if id := db.mu.lazy[i].ID; !has[id] {
			return missing(id)
		}
	}
	for id := range db.mu.runs {
		if !has[id] {
			return missing(id)
		}
	}
	return nil
}
