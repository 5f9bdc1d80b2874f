package erasure

// Resuming a run's erasure that a crash interrupted (at Open: the runs
// KEYS marks erasing) or that a KEYS older than the log undid (the runs
// the log erases whose key KEYS holds live): finished if the log holds
// its erase record, undone (the mark removed) if it does not.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/wal"
)

// Resumer is what resuming an erasure needs of the engine. Its methods are
// called on the goroutine that serves Jobs.
type Resumer interface {
	// Health: a resumption starts once the ledger is loaded and the
	// deletions the log holds are all known, the directories' fsyncs
	// started (Loaded).
	retention.Health
	// Lock and Unlock order the resumption with deletions and garbage
	// collection (the engine's GC lock).
	Lock()
	Unlock()
	// Deletion returns run's durable deletion in the registry of deleted
	// runs, with its erasure if the log holds its erase record; nil if
	// none.
	Deletion(run string) *retention.Gone
	// Erased lists the runs the registry of deleted runs holds erased.
	Erased() []string
	// Finish does steps 3 to 5 of run's erasure, whose erase record is
	// durable: the ledger, a checkpoint, the derived files, then DropRun
	// (the engine calls Eraser.Finish over its Finisher).
	Finish(ctx context.Context, run string) error
}

// Loaded returns once the ledger is loaded and the deletions the log
// holds are all known, or why not; it starts the directories' fsyncs.
func Loaded(ctx context.Context, h retention.Health) error {
	if err := h.WaitLedger(ctx); err != nil {
		return err
	}
	if err := h.CheckRegistry(); err != nil {
		return err
	}
	h.StartDirSyncs()
	return nil
}

// Resume finishes or undoes the interrupted erasure of run.
func (e *Eraser) Resume(ctx context.Context, h Resumer, run string, logger *slog.Logger) error {
	if err := Loaded(ctx, h); err != nil {
		return err
	}
	h.Lock()
	defer h.Unlock()
	if d := h.Deletion(run); d == nil || d.Erasure == nil {
		logger.Info("engine: an erasure interrupted before its erase record was durable did not happen; its run keeps its key", "run", run)
		return e.Unmark(run)
	}
	if !e.Live(run) {
		return nil // finished meanwhile (an Erase of it ran first)
	}
	logger.Info("engine: finishing an erasure a crash interrupted", "run", run)
	if err := h.Finish(ctx, run); err != nil {
		return fmt.Errorf("engine: finish the erasure of run %q: %w", run, err)
	}
	return nil
}

// ResumePending is Open's: it resumes, one at a time through the queue
// (Do, until stop), the erasures KEYS marks pending (Pending), and
// returns the first error; then, if heal (the replay read the whole log:
// every erasure is known), it starts HealStale. Nothing for a plaintext
// store.
func (e *Eraser) ResumePending(h Resumer, stop <-chan struct{}, heal bool) error {
	if e.cfg.Store.Sealer() == nil {
		return nil
	}
	if heal {
		defer e.HealStale(h, stop)
	}
	for _, run := range e.Pending() {
		var err error
		if qerr := e.Do(context.Background(), stop, e.cfg.ErrClosed, func() { err = e.Resume(context.Background(), h, run, e.cfg.Logger) }); qerr != nil {
			return qerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// HealStale resumes, in the background (through the queue, until stop),
// the erasures of the runs the log erases (Resumer.Erased) whose key KEYS
// holds live (Stale): a KEYS older than their erasure, restored from a
// copy. Call it once the log's deletions are all known. It does not
// wait. The first error is handed to Config.Fail, but one of a store
// closing (Config.ErrClosed, wal.ErrClosed).
func (e *Eraser) HealStale(h Resumer, stop <-chan struct{}) {
	if e.cfg.Store.Sealer() == nil {
		return
	}
	stale := e.Stale(h.Erased())
	if len(stale) == 0 {
		return
	}
	logger, closed := e.cfg.Logger, []error{e.cfg.ErrClosed, wal.ErrClosed}
	logger.Warn("engine: KEYS still holds the data keys of erased runs (it is older than their erasure); erasing them again", "runs", stale)
	go func() { // not waited for by Close, which may be waiting on the queue already; stop ends it
		for _, run := range stale {
			var err error
			if e.Do(context.Background(), stop, e.cfg.ErrClosed, func() { err = e.Resume(context.Background(), h, run, logger) }) != nil {
				return
			}
			if err != nil {
				if !slices.ContainsFunc(closed, func(c error) bool { return errors.Is(err, c) }) {
					e.cfg.Fail(err)
				}
				return
			}
		}
	}()
}
