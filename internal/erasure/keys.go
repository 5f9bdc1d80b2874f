package erasure

// The erasure's changes of KEYS, all through change: it takes the Store's
// mutex, changes a clone of the table, writes it durably
// (Keys.Replace), and only then drops keys from memory: a failed
// write changes nothing. A plaintext
// store has no KEYS: a change fails with offline.ErrKeyring (the engine
// refuses an erasure there before), a read finds no key.

import (
	"fmt"
	"slices"

	"github.com/continuumdb/continuum/offline"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

// Mark writes KEYS with the data keys of run (its own and its memory
// keys') marked erasing (on) or live again: step 1 of a run's erasure, and
// its undoing. Marking a run that has no live key is KEYS's damage;
// unmarking one that has no mark writes nothing.
func (e *Eraser) Mark(run string, on bool) error {
	return e.change(func(next *seal.Table) (bool, func(*seal.Keys), error) {
		n := 0
		for _, scope := range next.RunScopes(run) { // the run's key and its memory keys'
			n += next.MarkErasing(scope, on)
		}
		if n == 0 && on {
			return false, nil, fmt.Errorf("%w: KEYS has no live data key of run %q", record.ErrCorrupt, run)
		}
		return n > 0, nil, nil
	})
}

// DropRun drops the data keys of run (its own and its memory keys') from
// KEYS, durably, and then from memory: the last step of a run's erasure.
func (e *Eraser) DropRun(run string) error {
	return e.change(func(next *seal.Table) (bool, func(*seal.Keys), error) {
		scopes := next.RunScopes(run)
		nos := make([][]uint64, len(scopes))
		for i, scope := range scopes {
			nos[i] = next.Erase(scope)
		}
		return true, func(keys *seal.Keys) {
			for i, scope := range scopes {
				keys.Drop(scope, nos[i])
			}
		}, nil
	})
}

// DropNos drops the data keys numbered nos from KEYS, durably, and then
// from memory. Keys erased already are skipped; if all are, nothing is
// written.
func (e *Eraser) DropNos(nos []uint64) error {
	return e.change(func(next *seal.Table) (bool, func(*seal.Keys), error) {
		erased := next.EraseNos(nos)
		return len(erased) > 0, func(keys *seal.Keys) { keys.DropNos(erased) }, nil
	})
}

// change is every change of KEYS: with the Store's mutex held, edit
// changes a clone of the table and says whether there is anything to
// write; the clone is written durably (Keys.Replace), and only then
// is drop (if any) applied to the keys in memory. An error of edit or of
// the write changes nothing.
func (e *Eraser) change(edit func(next *seal.Table) (write bool, drop func(*seal.Keys), err error)) error {
	s := e.cfg.Store
	t, keys, err := e.lock()
	if err != nil {
		return err
	}
	defer s.Keys().Unlock()
	next := t.Clone()
	write, drop, err := edit(next)
	if err != nil || !write {
		return err
	}
	if err := s.Keys().Replace(next); err != nil {
		return err
	}
	if drop != nil {
		drop(keys)
	}
	return nil
}

// Live reports whether KEYS holds a data key of run (its own or a memory
// key's) that is not erased. False for a plaintext store.
func (e *Eraser) Live(run string) bool {
	return slices.ContainsFunc(e.entries(), func(en seal.Entry) bool { return seal.RunOf(en.Scope) == run && !en.Erased })
}

// Stale returns the runs of erased (runs whose erase record the log
// holds) of which KEYS still holds a data key live, sorted: a KEYS older
// than their erasure (restored from a copy), whose erasure the engine
// finishes again. None for a plaintext store.
func (e *Eraser) Stale(erased []string) []string {
	if e.cfg.Store.Sealer() == nil || len(erased) == 0 {
		return nil
	}
	live := map[string]bool{}
	for _, en := range e.entries() {
		if !en.Erased {
			live[seal.RunOf(en.Scope)] = true
		}
	}
	var stale []string
	for _, run := range erased {
		if live[run] {
			stale = append(stale, run)
		}
	}
	slices.Sort(stale)
	return stale
}

// Pending returns the runs whose erasure a crash interrupted (KEYS marks
// their keys erasing; a memory key's scope is marked with its run's), in
// KEYS's order; none for a plaintext store.
func (e *Eraser) Pending() []string {
	t, _, err := e.lock()
	if err != nil {
		return nil
	}
	defer e.cfg.Store.Keys().Unlock()
	var runs []string
	for _, scope := range t.Erasing() {
		if run := seal.RunOf(scope); !slices.Contains(runs, run) {
			runs = append(runs, run)
		}
	}
	return runs
}

// Retire chooses the live data keys of memory key key of run, the ones its
// erasure names, and retires them (seal.Keys.Retire): a value sealed from
// here on takes a new data key, which this erasure does not touch. Step 1
// of a memory key's erasure. It fails with Config.ErrNotErasable for a
// key no value of which was sealed with a key of its own, and with
// Config.ErrNothingToErase when its keys are all erased already.
func (e *Eraser) Retire(run, key string) ([]uint64, error) {
	s := e.cfg.Store
	scope := seal.MemoryScope(run, key)
	t, keys, err := e.lock()
	if err != nil {
		return nil, err
	}
	var nos []uint64
	everSealed := false
	for _, en := range t.Entries() {
		if en.Scope == scope {
			everSealed = true
			if !en.Erased {
				nos = append(nos, en.No)
			}
		}
	}
	if len(nos) > 0 {
		keys.Retire(scope)
	}
	s.Keys().Unlock()
	switch {
	case !everSealed:
		return nil, fmt.Errorf("%w: run %q memory key %q: no value of it was sealed with a key of its own (list it in Options.ErasableKeys before it is written; erase the run whole otherwise)", e.cfg.ErrNotErasable, run, key)
	case len(nos) == 0:
		return nil, fmt.Errorf("%w: run %q memory key %q: its values are erased already, and none was written since", e.cfg.ErrNothingToErase, run, key)
	}
	return nos, nil
}

// ownNos returns the numbers of run's own data keys that are not erased
// (not its memory keys': a record of the run is sealed with its own).
func (e *Eraser) ownNos(run string) map[uint64]bool {
	own := map[uint64]bool{}
	for _, en := range e.entries() {
		if en.Scope == run && !en.Erased {
			own[en.No] = true
		}
	}
	return own
}

// entries lists KEYS's entries (a copy); none for a plaintext store.
func (e *Eraser) entries() []seal.Entry {
	t, _, err := e.lock()
	if err != nil {
		return nil
	}
	defer e.cfg.Store.Keys().Unlock()
	return t.Entries()
}

// lock takes KEYS's mutex (Keys.Lock), or fails with
// offline.ErrKeyring for a plaintext store, which has no KEYS.
func (e *Eraser) lock() (*seal.Table, *seal.Keys, error) {
	if e.cfg.Store.Sealer() == nil {
		return nil, nil, fmt.Errorf("%w: the store is not encrypted, so it has no data key to erase", offline.ErrKeyring)
	}
	t, keys := e.cfg.Store.Keys().Lock()
	return t, keys, nil
}
