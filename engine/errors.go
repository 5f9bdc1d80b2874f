package engine

import (
	"errors"

	"github.com/continuumdb/continuum/internal/durable"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/offline"
	"github.com/continuumdb/continuum/record"
)

// Sentinel errors. Callers test for them with errors.Is; the errors the engine
// returns wrap them with the run, seq or file they concern.
var (
	// ErrClosed is returned by every method of a DB, Run or Atom after
	// DB.Close.
	ErrClosed = errors.New("engine: store closed")
	// ErrLocked is returned by Open when another process (or another DB in
	// this process, whatever path it was opened by) holds the store's lock.
	ErrLocked = layout.ErrLocked
	// ErrReadOnly is returned by Open when the store cannot be written: its
	// LOCK file is not writable by this user, or its filesystem is mounted
	// read-only. The read-only tools (Inspect, Scan, Verify) still work.
	ErrReadOnly = layout.ErrReadOnly
	// ErrTooLarge is returned by Commit, Do and Resolve when a record or a
	// run's frame would exceed MaxSize. Nothing is written, the log stays
	// usable, and the atom stays running (Commit) unless the error says
	// otherwise (Do: see its documentation).
	ErrTooLarge = errors.New("engine: record or frame too large")
	// ErrInvalidRunID is returned for an empty, oversized or non-UTF-8 run id.
	ErrInvalidRunID = record.ErrInvalidRunID
	// ErrAtomInProgress is returned by Begin while another atom of the same
	// run is running: one atom at a time per run.
	ErrAtomInProgress = errors.New("engine: an atom is already running in this run")
	// ErrConflict is returned, in a *ConflictError, by the Commit of a
	// branch (Run.Branch) that lost to an atom committed after its base:
	// that atom wrote a state key the branch writes or declared it reads.
	// Nothing was written, and the branch is over.
	ErrConflict = errors.New("engine: branch conflicts with an atom committed after its base")
	// ErrBranchMessage is returned by Send, Receive, ReceiveFrom and
	// TryReceive of a branch (Run.Branch): messages between runs are sent
	// and consumed by atoms of Begin, whose seq is known when they run.
	ErrBranchMessage = errors.New("engine: a branch neither sends nor receives messages")
	// ErrAtomDone is returned by Do, Resolve, Commit and Fail on an atom
	// that was already committed or failed.
	ErrAtomDone = errors.New("engine: atom already committed or failed")
	// ErrNilDelta is returned by Commit(nil).
	ErrNilDelta = errors.New("engine: nil delta")
	// ErrInvalidDelta is returned by Commit when the delta does not apply to
	// the run's frame (an unknown subgoal, a bad status). Nothing is written.
	ErrInvalidDelta = errors.New("engine: delta does not apply to the frame")
	// ErrSeqOutOfRange is returned by StateAt for a seq beyond LastSeq.
	ErrSeqOutOfRange = offline.ErrSeqOutOfRange
	// ErrCorrupt marks damaged engine files (checkpoint, frame files,
	// dictionaries, log records); the error says which file and why.
	ErrCorrupt = record.ErrCorrupt
	// ErrRollbackPending is returned by Begin and End while a rollback of
	// the run is begun and not finished (Run.PendingRollback), and by
	// Rollback to another target meanwhile.
	ErrRollbackPending = errors.New("engine: a rollback of the run is not finished")
	// ErrNotUndone is returned by Rollback when certified actions it
	// reaches have no compensation and RollbackOptions.AllowNotUndone is
	// not set; nothing was written.
	ErrNotUndone = errors.New("engine: actions without a compensation")
	// ErrInvalidOptions is returned by Open for options that fail validation.
	ErrInvalidOptions = errors.New("engine: invalid options")
	// ErrNotAStore is returned by read-only tools pointed at a directory
	// that holds no store.
	ErrNotAStore = offline.ErrNotAStore
	// ErrNotInDoubt is returned by Resolve and ResolveFailed of an action
	// that is not in doubt (with a default key: no default-key call of the
	// atom with the same tool and args is), and by ResolveInDoubt and
	// ResolveInDoubtFailed of an InDoubtError of another atom or whose
	// action is no longer in doubt.
	ErrNotInDoubt = errors.New("engine: action is not in doubt")
	// ErrAmbiguousResolve is returned by Resolve and ResolveFailed with a
	// default key when two or more default-key calls of the atom with the
	// same tool and args are in doubt: ResolveInDoubt names one exactly.
	ErrAmbiguousResolve = errors.New("engine: more than one in-doubt action matches")
	// ErrFenced is matched by the error of a write that the store's
	// Replicator refused because another process took over the store (it
	// holds the lease, and the replica rejects this writer's records): the
	// write was not acknowledged, nor is any after it. The process must
	// close the DB; the new writer has the store.
	ErrFenced = errors.New("engine: fenced: another writer took over the store")
)

// CorruptionError says where a store is damaged: file, offset, run, seq
// and the cause. It is record.CorruptionError, and matches ErrCorrupt.
type CorruptionError = record.CorruptionError

// advise adds to an I/O error what to do about it (durable.Advise).
func advise(err error) error { return durable.Advise(err) }
