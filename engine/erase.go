package engine

// Erasing a run (crypto-shredding; docs/DESIGN.md, "Erasing a run"):
// internal/erasure conducts it (Eraser.Erase, EraseRun, Finish) over
// gcCore (gc.go), and resumes at Open the erasures a crash interrupted
// (Eraser.ResumePending, HealStale); this file is the API.

import (
	"context"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/chain"
)

// ErrRunErased is returned by Run and Fork for the id of an erased run
// (it matches ErrRunDeleted too: an erased run is deleted).
var ErrRunErased = fmt.Errorf("%w and erased", ErrRunDeleted)

// Erasure is the erasure of a deleted run, as its erase record says.
type Erasure struct {
	Seq    uint64     // the erasure's link: the end's seq + 1, or the deletion's + 1
	Head   chain.Hash // the erasure's link
	At     time.Time
	Reason string
}

// Erase erases the ended (or deleted) run id of an encrypted store: it
// deletes the run if it is not deleted yet, and destroys its content by
// dropping its data key (docs/DESIGN.md, "Erasing a run", says what that
// reaches). It returns once the erasure is complete; Erase of an erased
// run returns its erasure. reason is recorded in the erase record (at
// most MaxDeleteReason bytes; "" records "erased by request").
//
// It fails with ErrKeyring on a plaintext store (delete the run and
// collect with Options.CompactDead instead), ErrRunNotEnded for an active
// run, and ErrRunHasForks while a fork of the run is not erased.
func (db *DB) Erase(ctx context.Context, id, reason string) (DeletedRun, error) {
	if err := db.checkOpen(); err != nil {
		return DeletedRun{}, err
	}
	d, err := db.eraser.Erase(ctx, gcCore{db}, id, reason, db.bg.stop)
	if err != nil {
		return DeletedRun{}, err
	}
	return deletedRun(id, d), nil
}
