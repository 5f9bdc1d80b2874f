package engine

// The keys of an encrypted store (Options.Keyring; docs/DESIGN.md,
// "Encryption at rest"): KEYS, the table of data keys wrapped by the
// user's keyring, read and opened at Open before any record is read, a
// data key added (and KEYS made durable) before a run's creation record,
// and Rekey.

import (
	"errors"
	"fmt"
	"slices"
	"sync"

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

// storeKeys are the keys of an encrypted store; a DB of a plaintext store
// has none (db.keys nil).
type storeKeys struct {
	ring seal.Keyring
	keys *seal.Keys // the unwrapped data keys; safe for concurrent use

	// mu orders the changes of table and the writes of KEYS: a key is
	// used only after the KEYS that holds it is durable.
	mu    sync.Mutex
	table *seal.Table

	// adding holds the scopes whose keys callers wait for (addKey): the
	// caller that gets mu next adds them all with one write of KEYS.
	adding struct {
		sync.Mutex
		scopes []string
	}
}

// openKeys reads KEYS of an existing encrypted store and unwraps its data
// keys with the keyring: a missing or wrong user key fails here, before
// any record is read.
func (db *DB) openKeys() error {
	name := db.path(layout.KeysName)
	b, err := layout.ReadFile(db.fs, name)
	if layout.NotExist(err) {
		return record.Corruptf(name, "missing, but %s says the store is encrypted: without it nothing the store sealed can be opened", db.path(layout.StoreName))
	}
	if err != nil {
		return fmt.Errorf("engine: read %s: %w", name, err)
	}
	if len(b) > layout.MaxKeysFile {
		return record.Corruptf(name, "%d bytes, above %d", len(b), layout.MaxKeysFile)
	}
	t, err := layout.ParseKeys(name, db.storeID, b)
	if err != nil {
		return err
	}
	ks, err := t.Open(db.opts.Keyring)
	if err != nil {
		return fmt.Errorf("engine: %s: %w", name, err)
	}
	if _, ok := ks.Scope(""); !ok {
		return record.Corruptf(name, "holds no data key of the store")
	}
	db.keys = &storeKeys{ring: db.opts.Keyring, keys: ks, table: t}
	db.sealer = &record.Sealer{Store: db.storeID, Keys: ks, KeysFile: name}
	return nil
}

// createKeys writes KEYS of a new encrypted store, with its store key,
// before STORE (writeStoreFile): a store whose STORE says it is encrypted
// has its key table.
func (db *DB) createKeys() error {
	t := new(seal.Table)
	k, err := t.Add(db.opts.Keyring, "")
	if err != nil {
		return fmt.Errorf("engine: %s: the store's data key: %w", db.path(layout.KeysName), err)
	}
	sk := &storeKeys{ring: db.opts.Keyring, keys: seal.NewKeys(), table: t}
	sk.keys.Put("", k)
	if err := db.writeKeys(t); err != nil {
		return err
	}
	db.keys = sk
	db.sealer = &record.Sealer{Store: db.storeID, Keys: sk.keys, KeysFile: db.path(layout.KeysName)}
	return nil
}

// writeKeys replaces KEYS by t, durably (file and directory fsync).
func (db *DB) writeKeys(t *seal.Table) error {
	b := layout.MarshalKeys(db.storeID, t)
	if err := layout.WriteFileAtomic(db.fs, db.path(layout.KeysName), b, db.opts.NoSync); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	return nil
}

// runKey returns the data key of run id, adding one (and making KEYS
// durable) if it has none: called before the run's creation record is
// appended, so that nothing of the run is sealed with a key KEYS lacks.
// A run whose creation failed after its key was added keeps the key for
// its next attempt.
func (db *DB) runKey(id string) (*seal.Key, error) {
	if err := db.addKey(id); err != nil {
		return nil, fmt.Errorf("engine: run %q: data key: %w", id, err)
	}
	k, _ := db.keys.keys.Scope(id)
	return k, nil
}

// addKey makes sure scope has a live data key, adding one (and making
// KEYS durable) if it has none. The additions that wait while KEYS is
// being written share the next write, as the log's appends share an
// fsync: the caller that gets the table's mutex next adds every scope
// waiting, and the others find theirs added.
func (db *DB) addKey(scope string) error {
	sk := db.keys
	if _, ok := sk.keys.Scope(scope); ok {
		return nil
	}
	sk.adding.Lock()
	if !slices.Contains(sk.adding.scopes, scope) {
		sk.adding.scopes = append(sk.adding.scopes, scope)
	}
	sk.adding.Unlock()

	sk.mu.Lock()
	defer sk.mu.Unlock()
	if _, ok := sk.keys.Scope(scope); ok {
		return nil // added by the write this caller waited for
	}
	sk.adding.Lock()
	scopes := sk.adding.scopes
	sk.adding.scopes = nil
	sk.adding.Unlock()
	if !slices.Contains(scopes, scope) {
		// Taken by a write that failed: this caller tries again.
		scopes = append(scopes, scope)
	}
	next := sk.table.Clone()
	added := make([]*seal.Key, 0, len(scopes))
	for i := 0; i < len(scopes); i++ {
		if _, ok := sk.keys.Scope(scopes[i]); ok {
			scopes = slices.Delete(scopes, i, i+1) // added meanwhile by another path
			i--
			continue
		}
		k, err := next.Add(sk.ring, scopes[i])
		if err != nil {
			return err
		}
		added = append(added, k)
	}
	if err := db.writeKeys(next); err != nil {
		return err
	}
	sk.table = next
	for i, k := range added {
		sk.keys.Put(scopes[i], k)
	}
	return nil
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
	sk := db.keys
	if sk == nil {
		return 0, fmt.Errorf("%w: the store is not encrypted", ErrKeyring)
	}
	sk.mu.Lock()
	defer sk.mu.Unlock()
	next := sk.table.Clone()
	n, err := next.Rewrap(sk.ring)
	if err != nil {
		return 0, fmt.Errorf("engine: rekey: %w", err)
	}
	if n == 0 {
		return 0, nil
	}
	if err := db.writeKeys(next); err != nil {
		return 0, fmt.Errorf("engine: rekey: %w", err)
	}
	sk.table = next
	return n, nil
}

// KeyEntries lists the entries of the store's key table (wrapped keys,
// never in the clear), nil for a plaintext store.
func (db *DB) KeyEntries() []seal.Entry {
	sk := db.keys
	if sk == nil {
		return nil
	}
	sk.mu.Lock()
	defer sk.mu.Unlock()
	return sk.table.Entries()
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
	for _, e := range db.keys.table.Entries() {
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
