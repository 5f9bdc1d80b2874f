package keystore

import (
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

// Store is KEYS of one encrypted store, and its data keys unwrapped.
type Store struct {
	fs      vfs.FS
	name    string // KEYS's path
	storeID [16]byte
	noSync  bool
	ring    seal.Keyring
	keys    *seal.Keys // the unwrapped data keys; safe for concurrent use

	// mu orders the changes of table and the writes of KEYS: a key is
	// used only after the KEYS that holds it is durable.
	mu    sync.Mutex
	table *seal.Table

	// adding holds the scopes whose keys callers wait for (Add): the
	// caller that gets mu next adds them all with one write of KEYS.
	adding struct {
		sync.Mutex
		scopes []string
	}
}

// Open reads KEYS (name) of an existing encrypted store and unwraps its
// data keys with ring: a missing or wrong user key fails here. storeName
// names STORE, which says the store is encrypted, in the error of a
// missing KEYS.
func Open(fs vfs.FS, name, storeName string, storeID [16]byte, ring seal.Keyring, noSync bool) (*Store, error) {
	b, err := layout.ReadFile(fs, name)
	if layout.NotExist(err) {
		return nil, record.Corruptf(name, "missing, but %s says the store is encrypted: without it nothing the store sealed can be opened", storeName)
	}
	if err != nil {
		return nil, fmt.Errorf("engine: read %s: %w", name, err)
	}
	if len(b) > layout.MaxKeysFile {
		return nil, record.Corruptf(name, "%d bytes, above %d", len(b), layout.MaxKeysFile)
	}
	t, err := layout.ParseKeys(name, storeID, b)
	if err != nil {
		return nil, err
	}
	ks, err := t.Open(ring)
	if err != nil {
		return nil, fmt.Errorf("engine: %s: %w", name, err)
	}
	if _, ok := ks.Scope(""); !ok {
		return nil, record.Corruptf(name, "holds no data key of the store")
	}
	return &Store{fs: fs, name: name, storeID: storeID, noSync: noSync, ring: ring, keys: ks, table: t}, nil
}

// Create writes KEYS (name) of a new encrypted store, durably, with its
// store key (scope ""); the engine does so before STORE, so that a store
// whose STORE says it is encrypted has its key table.
func Create(fs vfs.FS, name string, storeID [16]byte, ring seal.Keyring, noSync bool) (*Store, error) {
	t := new(seal.Table)
	k, err := t.Add(ring, "")
	if err != nil {
		return nil, fmt.Errorf("engine: %s: the store's data key: %w", name, err)
	}
	s := &Store{fs: fs, name: name, storeID: storeID, noSync: noSync, ring: ring, keys: seal.NewKeys(), table: t}
	s.keys.Put("", k)
	if err := s.write(t); err != nil {
		return nil, err
	}
	return s, nil
}

// Name is KEYS's path.
func (s *Store) Name() string { return s.name }

// Keys are the unwrapped data keys (a record.Sealer's); safe for
// concurrent use.
func (s *Store) Keys() *seal.Keys { return s.keys }

// Sealer is the store's payload sealer over these keys: bound to the
// store's id, a key the table lacks reported as KEYS's damage.
func (s *Store) Sealer() *record.Sealer {
	return &record.Sealer{Store: s.storeID, Keys: s.keys, KeysFile: s.name}
}

// write replaces KEYS by t, durably (file and directory fsync).
func (s *Store) write(t *seal.Table) error {
	if err := layout.WriteFileAtomic(s.fs, s.name, layout.MarshalKeys(s.storeID, t), s.noSync); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	return nil
}

// Add makes sure scope has a live data key, adding one (and making KEYS
// durable) if it has none. The additions that wait while KEYS is being
// written share the next write: the caller that gets the table's mutex
// next adds every scope waiting, and the others find theirs added.
func (s *Store) Add(scope string) error {
	if _, ok := s.keys.Scope(scope); ok {
		return nil
	}
	s.adding.Lock()
	if !slices.Contains(s.adding.scopes, scope) {
		s.adding.scopes = append(s.adding.scopes, scope)
	}
	s.adding.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys.Scope(scope); ok {
		return nil // added by the write this caller waited for
	}
	s.adding.Lock()
	scopes := s.adding.scopes
	s.adding.scopes = nil
	s.adding.Unlock()
	if !slices.Contains(scopes, scope) {
		// Taken by a write that failed: this caller tries again.
		scopes = append(scopes, scope)
	}
	next := s.table.Clone()
	added := make([]*seal.Key, 0, len(scopes))
	for i := 0; i < len(scopes); i++ {
		if _, ok := s.keys.Scope(scopes[i]); ok {
			scopes = slices.Delete(scopes, i, i+1) // added meanwhile by another path
			i--
			continue
		}
		k, err := next.Add(s.ring, scopes[i])
		if err != nil {
			return err
		}
		added = append(added, k)
	}
	if err := s.write(next); err != nil {
		return err
	}
	s.table = next
	for i, k := range added {
		s.keys.Put(scopes[i], k)
	}
	return nil
}

// Rekey re-wraps every data key that the keyring's current key did not
// wrap with the current key, and makes KEYS durable. It returns how many
// keys it re-wrapped.
func (s *Store) Rekey() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.table.Clone()
	n, err := next.Rewrap(s.ring)
	if err != nil || n == 0 {
		return 0, err
	}
	if err := s.write(next); err != nil {
		return 0, err
	}
	s.table = next
	return n, nil
}

// Entries lists the table's entries (wrapped keys, never in the clear).
func (s *Store) Entries() []seal.Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.table.Entries()
}

// Lock takes the mutex that orders every change of the table and returns
// the table and the keys; Replace changes the table, Unlock releases it.
func (s *Store) Lock() (*seal.Table, *seal.Keys) {
	s.mu.Lock()
	return s.table, s.keys
}

// Unlock releases the mutex Lock took.
func (s *Store) Unlock() { s.mu.Unlock() }

// Replace, with the mutex held (Lock), writes next as KEYS, durably, and
// then makes it the table; a failed write changes nothing.
func (s *Store) Replace(next *seal.Table) error {
	if err := s.write(next); err != nil {
		return err
	}
	s.table = next
	return nil
}

// CheckHeld refuses (an error matching corrupt) a KEYS that lacks the
// data key of one of ids, scopes the store holds: one older than the log,
// or another copy's, with which those scopes' records would read as damage.
func (s *Store) CheckHeld(ids iter.Seq[string], corrupt error) error {
	if id := s.Lacking(ids); id != "" {
		return fmt.Errorf("%w: %s has no data key of run %q, which the store holds: it is older than the log, or not this store's (restore the KEYS saved with the log)",
			corrupt, s.Name(), id)
	}
	return nil
}

// Lacking returns the first of ids that has no entry in the table (""
// if none): a scope whose data key KEYS lacks. An erased scope's entry
// stays, and counts. The table is read, and its mutex released, before
// ids is ranged over.
func (s *Store) Lacking(ids iter.Seq[string]) string {
	has := map[string]bool{}
	for _, e := range s.Entries() {
		has[e.Scope] = true
	}
	for id := range ids {
		if !has[id] {
			return id
		}
	}
	return ""
}
