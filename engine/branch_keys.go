package engine

// The names of a branch's conflicts: the parts of a frame an atom reads or
// writes (StateKey), and the error of a Commit that lost (ConflictError).

import (
	"github.com/continuumdb/continuum/internal/branch"
	"github.com/continuumdb/continuum/record"
)

// StateKey names a part of a run's frame an atom reads or writes, the
// unit of a branch's conflicts.
type StateKey = record.StateKey

// ObjectiveKey names the frame's objective.
func ObjectiveKey() StateKey { return StateKey{Kind: record.KeyObjective} }

// SubgoalKey names the subgoal with this id.
func SubgoalKey(id string) StateKey { return StateKey{Kind: record.KeySubgoal, Name: id} }

// MemoryKey names this working-memory key.
func MemoryKey(key string) StateKey { return StateKey{Kind: record.KeyMemory, Name: key} }

// ScratchpadKey names the scratchpad.
func ScratchpadKey() StateKey { return StateKey{Kind: record.KeyScratchpad} }

// MessagesKey names the conversation: every message.
func MessagesKey() StateKey { return StateKey{Kind: record.KeyMessages} }

// PendingKey names the pending action with this call id.
func PendingKey(callID string) StateKey { return StateKey{Kind: record.KeyPending, Name: callID} }

// FrameKey names the whole frame: a branch that declares it reads it
// conflicts with any atom committed after its base.
func FrameKey() StateKey { return StateKey{Kind: record.KeyFrame} }

// MaxBranchWindow bounds the atoms after a branch's base whose write sets
// a run keeps: a base further behind conflicts (ConflictError.Lost).
const MaxBranchWindow = record.MaxBranchLag

// branchWindow is MaxBranchWindow; tests make it small.
var branchWindow = MaxBranchWindow

// ConflictError is the error of a branch's Commit that lost to an atom
// committed after its base (ErrConflict): nothing written, the branch over.
type ConflictError struct {
	Run    string
	Branch string
	Base   uint64
	// Seq is the atom that wrote Key; with Lost, the oldest atom whose
	// write set the run holds, Base being before it (MaxBranchWindow).
	Seq  uint64
	Key  StateKey
	Lost bool
}

func (e *ConflictError) Error() string {
	return branch.Conflict{Seq: e.Seq, Key: e.Key, Lost: e.Lost}.Describe(e.Run, e.Branch, e.Base)
}

// Is makes a ConflictError match ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }
