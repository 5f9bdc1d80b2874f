package engine

// Erasing one memory key across a run (crypto-shredding; docs/DESIGN.md,
// "Erasing a memory key"). In an encrypted store, each value written to an
// erasable memory key (Options.ErasableKeys) is sealed with a data key of
// its own scope, seal.MemoryScope(run, key), before it enters the atom's
// delta (a set_sealed op), and the frame carries it sealed
// (frame.Frame.Sealed) into frame files, snapshots, forks and rollbacks.
// State, StateE and StateAt open such values on the way out; a value
// whose data key was erased reads as the key absent.
//
// EraseKey erases the values of one memory key of a run:
//
//  1. Under the key table's mutex, the scope's live data keys are chosen
//     and retired (seal.Keys.Retire): a value sealed from here on takes a
//     new data key, which this erasure does not touch.
//  2. The erase-key record (record.KindEraseKey), which names those keys,
//     is appended and synced. It is tracked (DB.track) until step 3 is
//     done, so that an engine checkpoint written meanwhile replays from
//     below it.
//  3. KEYS drops the keys (seal.Table.EraseNos) and is written atomically
//     (file and directory fsync). The erasure is acknowledged here.
//
// A crash before 2 leaves nothing (the erasure was never acknowledged). A
// crash between 2 and 3 leaves the record after the replay position: Open
// drops the keys it names (finishKeyErasures) before it returns.
//
// A value committed concurrently with EraseKey is erased or kept as if the
// commit were ordered before or after the erasure: a value sealed before
// step 1 is erased, one sealed after it is not. Forks carry their parent's
// sealed values, so erasing a parent's key erases the fork's copies of its
// values too (what the fork wrote itself is sealed with its own keys).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/offline"
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

// erasable reports whether the values of memory key key are sealed with
// a key of their own.
func (db *DB) erasable(key string) bool {
	for _, p := range db.opts.ErasableKeys {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(key, prefix) {
				return true
			}
		} else if key == p {
			return true
		}
	}
	return false
}

// sealMemory returns d with the values it sets for erasable memory keys
// of run sealed with their memory scopes' data keys (d itself when it sets
// none, or the store has no erasable keys), those of a replace_frame op's
// frame included. own says the engine built d (a rollback's replace_frame,
// whose frame holds the run's sealed values); a caller's delta may hold
// no sealed value.
func (db *DB) sealMemory(run string, d *frame.Delta, own bool) (*frame.Delta, error) {
	if !own && d.HasSealed() {
		// Sealed values are the engine's: it seals them with keys KEYS
		// holds, and opens them on the way out.
		return nil, fmt.Errorf("%w: run %q: the delta holds a set_sealed op; set the value (Delta.Set) and list its key in Options.ErasableKeys", ErrInvalidDelta, run)
	}
	erasable := len(db.opts.ErasableKeys) > 0 && db.sealer != nil
	if !erasable && own {
		return d, nil
	}
	seal := func(key string, value []byte) ([]byte, bool, error) {
		if !db.erasable(key) {
			return nil, false, nil
		}
		if err := db.memoryKey(run, key); err != nil {
			return nil, false, err
		}
		sealed, err := db.sealer.SealValue(nil, value, run, key)
		if err != nil {
			return nil, false, fmt.Errorf("engine: run %q: seal the value of memory key %q: %w", run, key, err)
		}
		return sealed, true, nil
	}
	f, err := d.ReplacedFrame()
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: run %q: %v", ErrInvalidDelta, run, err)
	case f != nil && !own && len(f.Sealed) > 0:
		return nil, fmt.Errorf("%w: run %q: the frame of the delta's replace_frame op holds sealed values; set the values (Frame.Memory) and list their keys in Options.ErasableKeys", ErrInvalidDelta, run)
	case f != nil && erasable:
		sealed := false
		for k, v := range f.Memory {
			s, ok, err := seal(k, v)
			if err != nil {
				return nil, err
			}
			if ok {
				if f.Sealed == nil {
					f.Sealed = map[string][]byte{}
				}
				f.Sealed[k] = s
				delete(f.Memory, k)
				sealed = true
			}
		}
		if sealed {
			return new(frame.Delta).ReplaceFrame(f), nil // op 14 stands alone in its delta
		}
		return d, nil
	case !erasable:
		return d, nil
	}
	return d.SealSets(seal)
}

// memoryKey makes sure memory key key of run has a live data key, adding
// one (and making KEYS durable) if not: before the first value it seals.
func (db *DB) memoryKey(run, key string) error {
	if len(key) > MaxMemoryKeyLen {
		return fmt.Errorf("%w: run %q: erasable memory key of %d bytes, the limit is %d (engine.MaxMemoryKeyLen)", ErrInvalidDelta, run, len(key), MaxMemoryKeyLen)
	}
	if err := db.addKey(seal.MemoryScope(run, key)); err != nil {
		return fmt.Errorf("engine: run %q: data key of memory key %q: %w", run, key, err)
	}
	return nil
}

// unseal returns f with its sealed memory values opened (f itself when it
// has none); a value whose data key was erased is left out
// (offline.OpenFrame, which the read-only tools use too).
func (db *DB) unseal(f *frame.Frame) (*frame.Frame, error) {
	open, _, err := offline.OpenFrame(db.sealer, f, func(key string, err error) error {
		if errors.Is(err, seal.ErrNoKey) {
			return &CorruptionError{File: db.path(layout.KeysName), Err: err,
				Reason: fmt.Sprintf("the sealed value of memory key %q names a data key the table lacks: it is older than the log, damaged, or not this store's (%v)", key, err)}
		}
		return fmt.Errorf("%w: the sealed value of memory key %q: %w", ErrCorrupt, key, err)
	})
	return open, err
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
	switch {
	case len(reason) > MaxDeleteReason:
		return ErasedKey{}, fmt.Errorf("%w: erase key: reason of %d bytes, the limit is %d (engine.MaxDeleteReason)", ErrInvalidOptions, len(reason), MaxDeleteReason)
	case key == "" || len(key) > MaxMemoryKeyLen:
		return ErasedKey{}, fmt.Errorf("%w: erase key: a memory key of %d bytes (1 to %d)", ErrInvalidOptions, len(key), MaxMemoryKeyLen)
	}
	if reason == "" {
		reason = "erased by request"
	}
	if err := ctx.Err(); err != nil {
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
	_, deleted := db.mu.deleted[id]
	db.mu.Unlock()
	switch {
	case deleted:
		return ErasedKey{}, fmt.Errorf("%w: erase memory key %q of run %q: erase the run whole (Erase)", ErrRunDeleted, key, id)
	case r == nil:
		return ErasedKey{}, fmt.Errorf("engine: erase memory key %q of run %q: the store has no such run", key, id)
	}

	// 1. The keys, retired. The erasure is tracked from before the
	// record's position is taken until KEYS is written.
	tok := db.track()
	defer db.untrack(tok)
	scope := seal.MemoryScope(id, key)
	sk := db.keys
	sk.mu.Lock()
	var nos []uint64
	everSealed := false
	for _, e := range sk.table.Entries() {
		if e.Scope == scope {
			everSealed = true
			if !e.Erased {
				nos = append(nos, e.No)
			}
		}
	}
	if len(nos) > 0 {
		sk.keys.Retire(scope)
	}
	sk.mu.Unlock()
	switch {
	case !everSealed:
		return ErasedKey{}, fmt.Errorf("%w: run %q memory key %q: no value of it was sealed with a key of its own (list it in Options.ErasableKeys before it is written; erase the run whole otherwise)", ErrNotErasable, id, key)
	case len(nos) == 0:
		return ErasedKey{}, fmt.Errorf("%w: run %q memory key %q: its values are erased already, and none was written since", ErrNothingToErase, id, key)
	}

	// 2. The record.
	r.mu.Lock()
	seq, head, _ := r.chainHeadLocked()
	r.mu.Unlock()
	now := time.Unix(0, time.Now().UnixNano()) // as a restart reads it back
	link := db.hasher.Link(id, seq, head, record.AppendEraseKeyPayload(nil, now.UnixNano(), key, nos, reason))
	note, err := db.eraseKeyNote(id, seq, link)
	if err == nil {
		_, err = db.append(ctx, record.AppendEraseKey(nil, id, seq, head, link, now.UnixNano(), key, nos, reason, note))
	}
	if err != nil {
		// Not durable: nothing is erased. The retired keys still open what
		// they sealed; new values take a new key.
		return ErasedKey{}, fmt.Errorf("engine: erase memory key %q of run %q: %w", key, id, err)
	}

	// 3. The keys, dropped.
	if err := db.dropKeys(nos); err != nil {
		return ErasedKey{}, fmt.Errorf("engine: erase memory key %q of run %q: the erase-key record is durable, but %w (the next Open finishes the erasure)", key, id, err)
	}
	return ErasedKey{Run: id, Key: key, Seq: seq, Head: link, KeyNos: nos, At: now, Reason: reason}, nil
}

// ErrNothingToErase is returned by EraseKey for a memory key whose values
// are all erased already.
var ErrNothingToErase = errors.New("engine: nothing to erase")

// eraseKeyNote is the chain checkpoint of an erase-key record's link,
// signed when the store has a signing key.
func (db *DB) eraseKeyNote(run string, seq uint64, link chain.Hash) ([]byte, error) {
	c := chain.Checkpoint{StoreID: db.StoreID(), RunID: run, Seq: seq, Head: link}
	if db.signer == nil {
		return chain.MarshalCheckpoint(c), nil
	}
	b, err := db.signer.SignCheckpoint(c)
	if err != nil {
		return nil, fmt.Errorf("engine: sign the erasure of a memory key of run %q: %w", run, err)
	}
	return b, nil
}

// dropKeys erases the data keys numbered nos from KEYS, durably, and then
// from the keys in memory. Keys erased already are skipped.
func (db *DB) dropKeys(nos []uint64) error {
	sk := db.keys
	sk.mu.Lock()
	defer sk.mu.Unlock()
	next := sk.table.Clone()
	erased := next.EraseNos(nos)
	if len(erased) == 0 {
		return nil
	}
	if err := db.writeKeys(next); err != nil {
		return err
	}
	sk.table = next
	sk.keys.DropNos(erased)
	return nil
}

// keyErasure is what replay keeps of an erase-key record: the data keys it
// names, which KEYS must no longer hold.
type keyErasure struct {
	run, key string
	nos      []uint64
}

// healKeyErasures drops the data keys named by erase-key records of the
// log (es) that KEYS holds live: a KEYS older than the erasures (restored
// from a copy), from which the erased values could be opened again.
// Called once the log's records are all known (checkRegistry).
func (db *DB) healKeyErasures(es []keyErasure) {
	keys, err := db.eraseNamed(es)
	if len(keys) > 0 {
		db.logger.Warn("engine: KEYS still held data keys of erased memory keys (it is older than their erasure); erased them again", "keys", keys, "err", err)
	}
	if err != nil {
		db.setBackgroundErr(fmt.Errorf("engine: erase again the data keys of erased memory keys that an older KEYS holds: %w", err))
	}
}

// finishKeyErasures drops, at Open, the data keys named by the erase-key
// records the replay read that KEYS still holds: an erasure a crash
// interrupted between its record and KEYS.
func (db *DB) finishKeyErasures() error {
	es := db.keyErasures
	db.keyErasures = nil
	if _, err := db.eraseNamed(es); err != nil {
		return fmt.Errorf("engine: finish the erasure of memory keys the log records: %w", err)
	}
	return nil
}

// eraseNamed drops the data keys that the erase-key records es name and
// KEYS holds live (liveNamed), and returns the memory keys they sealed.
func (db *DB) eraseNamed(es []keyErasure) ([]string, error) {
	if db.keys == nil || len(es) == 0 {
		return nil, nil
	}
	nos, keys := db.liveNamed(es)
	if len(nos) == 0 {
		return nil, nil
	}
	return keys, db.dropKeys(nos)
}

// liveNamed returns the data keys that the erase-key records es name and
// KEYS holds live, sorted, with the memory keys they seal ("run/key"). A
// number whose entry is not of the record's memory key is left alone: no
// record erases another key's values (verify reports such a record).
func (db *DB) liveNamed(es []keyErasure) (nos []uint64, keys []string) {
	scopes := map[uint64]string{}
	db.keys.mu.Lock()
	for _, e := range db.keys.table.Entries() {
		if !e.Erased {
			scopes[e.No] = e.Scope
		}
	}
	db.keys.mu.Unlock()
	for _, e := range es {
		for _, no := range e.nos {
			if s, ok := scopes[no]; ok && s == seal.MemoryScope(e.run, e.key) && !slices.Contains(nos, no) {
				nos = append(nos, no)
				keys = append(keys, e.run+"/"+e.key)
			}
		}
	}
	slices.Sort(nos)
	return nos, keys
}

// checkSealedKeys reports, as KEYS's damage, a sealed memory value of f,
// run's frame as it comes into memory, whose data key KEYS does not hold,
// live or erased: a KEYS that lost the key (cut short, or older than the
// log). Open checks that KEYS holds every run's key (checkRunKeys), but
// not the memory keys', which no file lists; without this the run would
// take new values and a new data key for the key, past a value it can no
// longer open.
func (db *DB) checkSealedKeys(run string, f *frame.Frame) error {
	if db.keys == nil {
		return nil // a plaintext store's frame with sealed values: State reports it
	}
	for key, v := range f.Sealed {
		no, err := seal.KeyNo(v)
		if err == nil {
			_, err = db.keys.keys.Key(no)
		}
		if err != nil && !errors.Is(err, seal.ErrErased) {
			return &CorruptionError{File: db.path(layout.KeysName), Run: run, Err: err,
				Reason: fmt.Sprintf("the sealed value of memory key %q names a data key the table lacks: it is older than the log, damaged, or not this store's (%v)", key, err)}
		}
	}
	return nil
}
