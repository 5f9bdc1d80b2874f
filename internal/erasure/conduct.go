package erasure

// A run's erasure conducted, steps 1 to 5 in their order (docs/DESIGN.md,
// "Erasing a run"), over the engine's table of runs (retention.Runs, the
// table a deletion takes runs out of), and a memory key's (EraseKey).

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/internal/runview"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/offline"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Runs is what a run's erasure needs of the engine beyond a Resumer's
// (engine/gc.go's gcCore). Its methods are called on the goroutine that
// serves Jobs.
type Runs interface {
	Resumer
	// Runs is the store's table of runs (retention.Writable is checked
	// after Loaded), its Track, Take, Restore and Gone with the Resumer's lock
	// held. Take hands out the run, ended, as a deletion takes it, so
	// that no fork of it appears before its erase record; Gone with
	// record.KindErase finishes its withdrawal.
	retention.Runs
}

// Erase is engine.DB.Erase: it checks the request and queues the erasure
// (Do) on the goroutine that serves Jobs, where it runs to its end
// whatever ctx does (EraseRun). It returns the run's deletion and erasure
// as the registry holds them.
func (e *Eraser) Erase(ctx context.Context, rs Runs, run, reason string, stop <-chan struct{}) (*retention.Gone, error) {
	if e.cfg.Store.Sealer() == nil {
		return nil, fmt.Errorf("%w: erase run %q: the store is not encrypted, so no key can be shredded; delete the run and collect with Options.CompactDead to reclaim its records", offline.ErrKeyring, run)
	}
	reason, err := e.Reason("erase", reason)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	if qerr := e.Do(ctx, stop, e.cfg.ErrClosed, func() { err = e.EraseRun(context.WithoutCancel(ctx), rs, run, reason) }); qerr != nil {
		return nil, qerr
	}
	if err != nil {
		return nil, err
	}
	if d := rs.Deletion(run); d != nil && d.Erasure != nil {
		return d, nil
	}
	return nil, fmt.Errorf("engine: erase run %q: the erasure is not in the registry of deleted runs", run)
}

// EraseRun erases run: steps 1 and 2 (Begin: KEYS marks its keys, the
// erase record durable) once the run is out of the table, then the
// steps 3 to 5 (Runs.Finish, which calls Finish). A run erased already is finished
// only if KEYS holds its key again (a KEYS older than the erasure). An
// error before the erase record is durable leaves the run as it was; one
// after it is finished by the next Open (Pending).
func (e *Eraser) EraseRun(ctx context.Context, rs Runs, run, reason string) error {
	if err := Loaded(ctx, rs); err != nil {
		return err
	}
	t := retention.Runs(rs)
	if err := retention.Writable(t); err != nil {
		return err
	}
	rs.Lock()
	defer rs.Unlock()
	release := t.Track()
	tracked := true
	defer func() {
		if tracked {
			release()
		}
	}()
	tg, err := e.target(t, run)
	switch {
	case err != nil:
		return err
	case tg.done:
		if e.Live(run) {
			if err := rs.Finish(ctx, run); err != nil {
				return fmt.Errorf("engine: erase run %q: finish its erasure: %w", run, err)
			}
		}
		return nil
	}
	// 1. The mark. 2. The erase record.
	er, err, uerr := e.Begin(ctx, run, tg.seq, tg.final, reason)
	if uerr != nil {
		e.cfg.Unclean.Store(true)
		e.cfg.Logger.Warn("engine: erase: remove the mark of an erasure that failed", "run", run, "err", uerr)
	}
	if err != nil {
		if tg.live != nil {
			t.Restore(tg.live)
		}
		return fmt.Errorf("engine: erase run %q: %w", run, err)
	}
	x := &retention.Erasure{Seq: er.Seq, Head: er.Head, At: er.At, Reason: er.Reason}
	d := tg.prior
	if d == nil {
		d = &retention.Gone{Seq: x.Seq, Final: tg.final, Head: x.Head, At: x.At, Reason: x.Reason, Parent: tg.parent}
	}
	t.Gone(record.KindErase, []string{run}, []*retention.Gone{d.WithErasure(x)}, tg.live)
	release()
	tracked = false
	// 3 to 5.
	if err := rs.Finish(ctx, run); err != nil {
		return fmt.Errorf("engine: erase run %q: the erase record is durable, but %w (the next Open finishes the erasure)", run, err)
	}
	return nil
}

// target is what an erasure found of its run in the table: the erasure's
// link (seq) after the run's last one (final), or done (erased already);
// the live run taken out of the table (and its parent), or the run's
// deletion (prior).
type target struct {
	seq    uint64
	final  chain.Hash
	done   bool
	live   []runview.Run // the live run Take withdrew, if any
	parent string
	prior  *retention.Gone
}

// target finds run in t under its lock: a live run that may be erased
// (ended, no fork that is not erased) is withdrawn at once; a deleted one
// gives its deletion's link. An error refuses the erasure (the run
// active, forked, being deleted, unknown; the store closed).
func (e *Eraser) target(t retention.Runs, run string) (target, error) {
	var tg target
	errs := e.cfg.Refusals
	taken, err := t.Take(func(cands []retention.Candidate, reg *retention.Registry) ([]string, error) {
		var self *retention.Candidate
		var forks []string
		for i := range cands {
			if cands[i].ID == run {
				self = &cands[i]
			} else if cands[i].Parent == run {
				forks = append(forks, cands[i].ID)
			}
		}
		var take []string
		if self != nil {
			if err := retention.Deletable(*self, "erase", errs); err != nil {
				return nil, err
			}
			tg.parent, take = self.Parent, []string{run}
		} else if d, gone := reg.Get(run); gone && d != nil {
			if d.Erasure != nil {
				tg.done = true
				return nil, nil
			}
			tg.prior, tg.seq, tg.final = d, d.Seq+1, d.Head
		} else if gone {
			return nil, fmt.Errorf("%w: erase run %q: it is being deleted", errs.Deleted, run)
		} else {
			return nil, fmt.Errorf("engine: erase run %q: the store has no such run", run)
		}
		if forks = append(forks, reg.ForksOf(run)...); len(forks) > 0 {
			return nil, fmt.Errorf("%w: erase run %q: run %q was forked from it and holds its state at the fork point; erase it first",
				errs.HasForks, run, slices.Min(forks))
		}
		return take, nil
	})
	if err != nil || tg.done {
		return tg, err
	}
	if len(taken) == 1 {
		// Ended: its chain's head is its end's for good.
		seq, head, _ := taken[0].ChainHead()
		tg.live, tg.seq, tg.final = taken, seq+1, head
	}
	return tg, nil
}

// Finisher is what steps 3 and 4 of a run's erasure need of the engine:
// retention.Core's methods of those names and a read of the log's ledger
// records (retention.GC.LedgerRecords; engine/gc.go's gcCore forwards it).
type Finisher interface {
	Forget(fps []ledger.Fingerprint) int
	Checkpoint() (wal.Pos, error)
	DropDerived(ctx context.Context, runs map[string]bool) error
	Closed() error
	// LedgerRecords opens a cursor over the whole log that yields its
	// intents and certificates still sealed (only their headers decoded),
	// and open, which decodes one of them whole. The caller closes c.
	LedgerRecords() (c *record.Cursor, open func(sealed, into *record.Record) error, err error)
}

// Finish does steps 3 to 5 of run's erasure, whose erase record is
// durable: the ledger forgets the run's default-key actions and an engine
// checkpoint writes the store's sealed files without them (and without
// the run); its frame files and snapshots go; KEYS drops its keys.
func (e *Eraser) Finish(ctx context.Context, f Finisher, run string) error {
	c, open, err := f.LedgerRecords()
	if err != nil {
		return fmt.Errorf("read the run's actions: %w", err)
	}
	fps, err := e.Actions(run, c, open, func() error {
		if err := f.Closed(); err != nil || ctx.Err() != nil {
			return errors.Join(ctx.Err(), err)
		}
		return nil
	})
	c.Close()
	if err != nil {
		return fmt.Errorf("read the run's actions: %w", err)
	}
	// 3. The ledger, and the sealed files without the run.
	f.Forget(fps)
	if _, err := f.Checkpoint(); err != nil {
		return err
	}
	// 4. Its derived files: sealed with the run's key, unreadable once it
	// goes, removed so that they take no space and no tool trips on them.
	if err := f.DropDerived(ctx, map[string]bool{run: true}); err != nil {
		return err
	}
	// 5. The keys.
	return e.DropRun(run)
}

// KeyRuns is what a memory key's erasure needs of the engine's table of
// runs.
type KeyRuns interface {
	// Find returns run, or deleted if the store deleted it (nil and false:
	// no such run), under the table's lock; an error if the store is
	// closed.
	Find(run string) (r runview.Run, deleted bool, err error)
	// LogFailed returns the log's first failure, if any (retention.Health's).
	LogFailed() error
	// Track holds the engine checkpoint's replay position at or below the
	// erase-key record until release.
	Track() (release func())
}

// EraseKey is engine.DB.EraseKey: steps 1 to 3 of the erasure of memory
// key key of run (keyerase.go), tracked by the engine from before the
// keys are retired until KEYS is written.
func (e *Eraser) EraseKey(ctx context.Context, rs KeyRuns, run, key, reason string) (ErasedKey, error) {
	if e.cfg.Store.Sealer() == nil {
		return ErasedKey{}, fmt.Errorf("%w: erase memory key %q of run %q: the store is not encrypted, so no key can be shredded", offline.ErrKeyring, key, run)
	}
	reason, err := e.Reason("erase key", reason)
	if err == nil {
		err = e.CheckKey(key)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return ErasedKey{}, err
	}
	if err := rs.LogFailed(); err != nil {
		return ErasedKey{}, fmt.Errorf("engine: erase key: the log failed earlier; reopen the store: %w", err)
	}
	r, deleted, err := rs.Find(run)
	switch {
	case err != nil:
		return ErasedKey{}, err
	case deleted:
		return ErasedKey{}, fmt.Errorf("%w: erase memory key %q of run %q: erase the run whole (Erase)", e.cfg.Refusals.Deleted, key, run)
	case r == nil:
		return ErasedKey{}, fmt.Errorf("engine: erase memory key %q of run %q: the store has no such run", key, run)
	}
	release := rs.Track()
	defer release()
	nos, err := e.Retire(run, key)
	if err != nil {
		return ErasedKey{}, err
	}
	seq, head, _ := r.ChainHead()
	return e.RecordKey(ctx, run, key, reason, seq, head, nos)
}
