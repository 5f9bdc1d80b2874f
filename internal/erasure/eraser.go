package erasure

import (
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/record"
)

// Config is what an Eraser is made of.
type Config struct {
	// Store is the store the Eraser erases in.
	Store Store
	// ErasableKeys are the memory keys whose values are sealed with a data
	// key of their own (engine.Options.ErasableKeys): a name, or a prefix
	// ending in "*".
	ErasableKeys []string
	// The core's sentinels that the Eraser's errors wrap, so that
	// errors.Is matches them as package engine documents: a delta that
	// does not apply (engine.ErrInvalidDelta), an argument out of bounds
	// (engine.ErrInvalidOptions), a memory key never sealed with its own
	// key (engine.ErrNotErasable), one erased already
	// (engine.ErrNothingToErase), the store closing (engine.ErrClosed).
	ErrInvalidDelta, ErrInvalidOptions, ErrNotErasable, ErrNothingToErase, ErrClosed error
	// Refusals are the sentinels a run's erasure refuses with (the run
	// active, forked, deleted), a deletion's.
	Refusals retention.Errors
	// Logger is the store's; Fail hands the store a background error
	// (the engine's sticky one), for the erasures resumed and healed
	// (ResumePending, HealStale).
	Logger *slog.Logger
	Fail   func(error)
	// Unclean is the store's mark that its next Open is not clean: an
	// erasure sets it, and logs a warning, when the mark of the erasure
	// that failed could not be removed (the next Open removes it).
	Unclean *atomic.Bool
}

// Eraser is a store's erasure capability: one per DB, made at Open before
// the log is replayed. Its methods are safe for concurrent use, except
// Replayed and FinishKeys, which only Open's goroutine calls.
type Eraser struct {
	cfg Config

	// jobs is the queue of erasures for the engine's background
	// goroutine (Jobs, Do); unbuffered.
	jobs chan func()

	// replayed holds, during Open, the erase-key records the replay read
	// (FinishKeys takes them); only Open's goroutine uses it.
	replayed []KeyErasure
}

// New returns the Eraser of cfg.Store.
func New(cfg Config) *Eraser { return &Eraser{cfg: cfg, jobs: make(chan func())} }

// Reason checks an erasure's reason (at most record.MaxDeleteReason
// bytes) and returns it, or "erased by request" for "". op names the
// operation in the error ("erase", "erase key").
func (e *Eraser) Reason(op, reason string) (string, error) {
	if len(reason) > record.MaxDeleteReason {
		return "", fmt.Errorf("%w: %s: reason of %d bytes, the limit is %d (engine.MaxDeleteReason)", e.cfg.ErrInvalidOptions, op, len(reason), record.MaxDeleteReason)
	}
	if reason == "" {
		reason = "erased by request"
	}
	return reason, nil
}
