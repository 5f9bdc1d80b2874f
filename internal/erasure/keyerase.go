package erasure

// Erasing one memory key across a run (docs/DESIGN.md, "Erasing a memory
// key"):
//
//  1. Under KEYS's mutex, the scope's live data keys are chosen and
//     retired (Retire): a value sealed from here on takes a new data key,
//     which this erasure does not touch.
//  2. The erase-key record (record.KindEraseKey), which names those keys,
//     is appended and synced (RecordKey). The engine tracks the erasure
//     from before step 1 until step 3 is done, so that an engine
//     checkpoint written meanwhile replays from below the record.
//  3. KEYS drops the keys (seal.Table.EraseNos) and is written atomically
//     (file and directory fsync). The erasure is acknowledged here.
//
// A crash before 2 leaves nothing (the erasure was never acknowledged). A
// crash between 2 and 3 leaves the record after the replay position: Open
// drops the keys it names (Replayed, then FinishKeys) before it returns.
//
// A value committed concurrently is erased or kept as if the commit were
// ordered before or after the erasure: a value sealed before step 1 is
// erased, one sealed after it is not. Forks carry their parent's sealed
// values, so erasing a parent's key erases the fork's copies of its values
// too (what the fork wrote itself is sealed with its own keys).

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

// ErasedKey is the erasure of one memory key of a run, as its erase-key
// record says (engine.ErasedKey has the same fields).
type ErasedKey struct {
	Run    string
	Key    string
	Seq    uint64     // the run's last seq when the key was erased
	Head   chain.Hash // the erasure's link (beside the run's chain, from its head at Seq)
	KeyNos []uint64   // the data keys it erased
	At     time.Time
	Reason string
}

// KeyErasure is what the replay keeps of an erase-key record: the data
// keys it names, which KEYS must no longer hold.
type KeyErasure struct {
	Run, Key string
	Nos      []uint64
}

// KeyErasureOf is what rec, an erase-key record, names.
func KeyErasureOf(rec *record.Record) KeyErasure {
	return KeyErasure{Run: rec.Run, Key: rec.Key, Nos: slices.Clone(rec.KeyNos)}
}

// CheckKey checks a memory key named to EraseKey: 1 to
// record.MaxMemoryKeyLen bytes.
func (e *Eraser) CheckKey(key string) error {
	if key == "" || len(key) > record.MaxMemoryKeyLen {
		return fmt.Errorf("%w: erase key: a memory key of %d bytes (1 to %d)", e.cfg.ErrInvalidOptions, len(key), record.MaxMemoryKeyLen)
	}
	return nil
}

// RecordKey does steps 2 and 3 of the erasure of memory key key of run,
// whose data keys nos Retire chose: the erase-key record, linked beside
// the run's chain from its head (seq, head), durable; then KEYS without
// the keys. An error after the record is durable says so: the next Open
// finishes the erasure.
func (e *Eraser) RecordKey(ctx context.Context, run, key, reason string, seq uint64, head chain.Hash, nos []uint64) (ErasedKey, error) {
	s := e.cfg.Store
	now := time.Unix(0, time.Now().UnixNano()) // as a restart reads it back
	sign := s.Signing()
	link := sign.Hasher.Link(run, seq, head, record.AppendEraseKeyPayload(nil, now.UnixNano(), key, nos, reason))
	note, err := sign.Note(run, seq, link, false)
	if err != nil {
		err = fmt.Errorf("engine: sign the erasure of a memory key of run %q: %w", run, err)
	} else {
		err = s.Append(ctx, [][]byte{record.AppendEraseKey(nil, run, seq, head, link, now.UnixNano(), key, nos, reason, note)})
	}
	if err != nil {
		// Not durable: nothing is erased. The retired keys still open what
		// they sealed; new values take a new key.
		return ErasedKey{}, fmt.Errorf("engine: erase memory key %q of run %q: %w", key, run, err)
	}
	if err := e.DropNos(nos); err != nil {
		return ErasedKey{}, fmt.Errorf("engine: erase memory key %q of run %q: the erase-key record is durable, but %w (the next Open finishes the erasure)", key, run, err)
	}
	return ErasedKey{Run: run, Key: key, Seq: seq, Head: link, KeyNos: nos, At: now, Reason: reason}, nil
}

// Replayed notes an erase-key record the replay read at Open: its keys
// must be gone from KEYS, and FinishKeys drops those a crash left there.
// Only Open's goroutine calls it.
func (e *Eraser) Replayed(rec *record.Record) {
	e.replayed = append(e.replayed, KeyErasureOf(rec))
}

// FinishKeys drops, at Open, the data keys named by the erase-key records
// the replay read that KEYS still holds: an erasure a crash interrupted
// between its record and KEYS. Only Open's goroutine calls it, once.
func (e *Eraser) FinishKeys() error {
	es := e.replayed
	e.replayed = nil
	if _, err := e.Heal(es); err != nil {
		return fmt.Errorf("engine: finish the erasure of memory keys the log records: %w", err)
	}
	return nil
}

// Heal drops the data keys that the erase-key records es name and KEYS
// holds live (LiveNamed), and returns the memory keys they sealed
// ("run/key"): those of erasures a crash interrupted, or of a KEYS older
// than the erasures (restored from a copy), from which the erased values
// could be opened again.
func (e *Eraser) Heal(es []KeyErasure) ([]string, error) {
	if e.cfg.Store.Sealer() == nil || len(es) == 0 {
		return nil, nil
	}
	nos, keys := e.LiveNamed(es)
	if len(nos) == 0 {
		return nil, nil
	}
	return keys, e.DropNos(nos)
}

// HealKeys is Heal once the log's records are all known, its keys logged
// to logger and its error handed to fail.
func (e *Eraser) HealKeys(es []KeyErasure, logger *slog.Logger, fail func(error)) {
	keys, err := e.Heal(es)
	if len(keys) > 0 {
		logger.Warn("engine: KEYS still held data keys of erased memory keys (it is older than their erasure); erased them again", "keys", keys, "err", err)
	}
	if err != nil {
		fail(fmt.Errorf("engine: erase again the data keys of erased memory keys that an older KEYS holds: %w", err))
	}
}

// LiveNamed returns the data keys that the erase-key records es name and
// KEYS holds live, sorted, with the memory keys they seal ("run/key"). A
// number whose entry is not of the record's memory key is left alone: no
// record erases another key's values (verify reports such a record).
func (e *Eraser) LiveNamed(es []KeyErasure) (nos []uint64, keys []string) {
	scopes := map[uint64]string{}
	for _, en := range e.entries() {
		if !en.Erased {
			scopes[en.No] = en.Scope
		}
	}
	for _, ke := range es {
		for _, no := range ke.Nos {
			if s, ok := scopes[no]; ok && s == seal.MemoryScope(ke.Run, ke.Key) && !slices.Contains(nos, no) {
				nos = append(nos, no)
				keys = append(keys, ke.Run+"/"+ke.Key)
			}
		}
	}
	slices.Sort(nos)
	return nos, keys
}
