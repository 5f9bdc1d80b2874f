package erasure

// Erasable memory keys: in an encrypted store, each value written to a
// memory key listed in Config.ErasableKeys is sealed with a data key of
// its own scope, seal.MemoryScope(run, key), before it enters the atom's
// delta (a set_sealed op), and the frame carries it sealed
// (frame.Frame.Sealed) into frame files, snapshots, forks and rollbacks.
// Open opens such values on the way out; a value whose data key was
// erased reads as the key absent.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/offline"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

// Erasable reports whether the values of memory key key are sealed with a
// key of their own (Config.ErasableKeys; in an encrypted store).
func (e *Eraser) Erasable(key string) bool {
	for _, p := range e.cfg.ErasableKeys {
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

// Seal returns d with the values it sets for erasable memory keys of run
// sealed with their memory scopes' data keys (d itself when it sets none,
// or the store has no erasable keys), those of a replace_frame op's frame
// included; a scope's first value adds its data key, KEYS durable first.
// own says the engine built d (a rollback's replace_frame, whose frame
// holds the run's sealed values); a caller's delta may hold no sealed
// value (Config.ErrInvalidDelta). Called on every commit, before anything
// checks or writes the delta.
func (e *Eraser) Seal(run string, d *frame.Delta, own bool) (*frame.Delta, error) {
	if !own && d.HasSealed() {
		// Sealed values are the engine's: it seals them with keys KEYS
		// holds, and opens them on the way out.
		return nil, fmt.Errorf("%w: run %q: the delta holds a set_sealed op; set the value (Delta.Set) and list its key in Options.ErasableKeys", e.cfg.ErrInvalidDelta, run)
	}
	sealer := e.cfg.Store.Sealer()
	erasable := len(e.cfg.ErasableKeys) > 0 && sealer != nil
	if !erasable && own {
		return d, nil
	}
	seal := func(key string, value []byte) ([]byte, bool, error) {
		if !e.Erasable(key) {
			return nil, false, nil
		}
		if err := e.memoryKey(run, key); err != nil {
			return nil, false, err
		}
		sealed, err := sealer.SealValue(nil, value, run, key)
		if err != nil {
			return nil, false, fmt.Errorf("engine: run %q: seal the value of memory key %q: %w", run, key, err)
		}
		return sealed, true, nil
	}
	f, err := d.ReplacedFrame()
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: run %q: %v", e.cfg.ErrInvalidDelta, run, err)
	case f != nil && !own && len(f.Sealed) > 0:
		return nil, fmt.Errorf("%w: run %q: the frame of the delta's replace_frame op holds sealed values; set the values (Frame.Memory) and list their keys in Options.ErasableKeys", e.cfg.ErrInvalidDelta, run)
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
func (e *Eraser) memoryKey(run, key string) error {
	if len(key) > record.MaxMemoryKeyLen {
		return fmt.Errorf("%w: run %q: erasable memory key of %d bytes, the limit is %d (engine.MaxMemoryKeyLen)", e.cfg.ErrInvalidDelta, run, len(key), record.MaxMemoryKeyLen)
	}
	if err := e.cfg.Store.Keys().Add(seal.MemoryScope(run, key)); err != nil {
		return fmt.Errorf("engine: run %q: data key of memory key %q: %w", run, key, err)
	}
	return nil
}

// Open returns f with its sealed memory values opened (f itself when it
// has none); a value whose data key was erased is left out
// (offline.OpenFrame, which the read-only tools use too). A value that
// does not open otherwise is damage: KEYS's when its data key is missing
// (a *record.CorruptionError), the frame's (record.ErrCorrupt) if not.
func (e *Eraser) Open(f *frame.Frame) (*frame.Frame, error) {
	sealer := e.cfg.Store.Sealer()
	open, _, err := offline.OpenFrame(sealer, f, func(key string, err error) error {
		if errors.Is(err, seal.ErrNoKey) && sealer != nil {
			return &record.CorruptionError{File: sealer.KeysFile, Err: err,
				Reason: fmt.Sprintf("the sealed value of memory key %q names a data key the table lacks: it is older than the log, damaged, or not this store's (%v)", key, err)}
		}
		return fmt.Errorf("%w: the sealed value of memory key %q: %w", record.ErrCorrupt, key, err)
	})
	return open, err
}

// CheckSealed reports, as KEYS's damage, a sealed memory value of f, run's
// frame as it comes into memory, whose data key KEYS does not hold, live
// or erased: a KEYS that lost the key (cut short, or older than the log).
// The engine checks at Open that KEYS holds every run's key, but not the
// memory keys', which no file lists; without this the run would take new
// values and a new data key for the key, past a value it can no longer
// open. A plaintext store's frame with sealed values passes (State
// reports it).
func (e *Eraser) CheckSealed(run string, f *frame.Frame) error {
	sealer := e.cfg.Store.Sealer()
	if sealer == nil {
		return nil
	}
	for key, v := range f.Sealed {
		no, err := seal.KeyNo(v)
		if err == nil {
			_, err = sealer.Keys.Key(no)
		}
		if err != nil && !errors.Is(err, seal.ErrErased) {
			return &record.CorruptionError{File: sealer.KeysFile, Run: run, Err: err,
				Reason: fmt.Sprintf("the sealed value of memory key %q names a data key the table lacks: it is older than the log, damaged, or not this store's (%v)", key, err)}
		}
	}
	return nil
}
