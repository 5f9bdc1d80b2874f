// Package lineage is what a fork shares with the runs it descends from:
// the walk up a lineage, checked (a run's parent held, no cycle, at most
// MaxDepth forks to the root), and the keys a fork's actions take so that
// a lineage never repeats an effect (I10). A default key is derived from
// the run, the seq and the call's index, so a fork that repeats an action
// of its parent at the same position would call it again under a new
// key. Key gives such an action the key its parent used there, when the
// parent's action at that position has the same tool, sanitized args,
// compensation and undone action: the fingerprint is then the parent's,
// and the ledger returns the parent's certificate (or reports the
// parent's action in doubt) without calling exec. An action that differs
// keeps the fork's own key, which no run of the lineage used: a
// downstream that deduplicates by key never sees one key with two
// different requests. Explicit keys are the caller's, as everywhere.
// BranchKey does the same for a branch's action, by branch name and call
// index, up the whole lineage.
//
// Creating a fork (its record, record.KindFork, its chain's fork genesis,
// its state built from the parent's) is the engine's: engine/fork.go
// conducts it, and its runs are this package's Runs.
//
// # The interface
//
// What the engine implements, over its Run (engine/runview.go's capView,
// the one adapter of a run; the methods take no lock of the caller's):
//
//	type Run interface {
//		// The run's id, fork point, head and state (ID and Base are
//		// what the lineage reads).
//		runview.Run
//		// Link returns the run's fork link: the parent's id and the fork
//		// point (parent "" and at 0 for a run that is no fork), and the
//		// parent as the store holds it, nil if it holds none of that id.
//		// Set when the run is built (and by the reconciliation of
//		// CHECKPOINT with the log); it takes no lock.
//		Link() (parent string, at uint64, held Run)
//		// Actions returns the actions (fingerprints) of the run's atom
//		// seq, committed or in flight, with call index index; it may
//		// return more of that atom's, which Intents filters out. None at
//		// or before the run's fork point. The ledger is loaded when it
//		// returns.
//		Actions(ctx context.Context, seq uint64, index uint32) ([]ledger.Fingerprint, error)
//		// Where names the log and CHECKPOINT, for the errors of a damaged
//		// lineage; called only to report one.
//		Where() (log, checkpoint string)
//	}
//
// and the store's ledger as a Ledger (engine/rollback.go's ledgerView):
//
//	type Ledger interface {
//		Lookup(fp ledger.Fingerprint) (ledger.Entry, bool) // the ledger's entry
//		Intent(loc ledger.Loc) (*ledger.Intent, error)     // the intent record at loc
//	}
//
// What the engine calls:
//
//	ParentState(ctx, r, seq) (*frame.Frame, error)             // a fork's state at or before its fork point: its parent's
//	Intent(ctx, r, seq, branch, in, l) (*ledger.Intent, error) // a default-key Do's key: Key, or BranchKey for a branch
//
// over
//
//	Parent(r) (Run, error)                              // r's parent, its lineage checked
//	Key(ctx, r, seq, in, l) (*ledger.Intent, error)     // a default-key Do of r's atom seq
//	BranchKey(r, branch, in, l) (*ledger.Intent, error) // a branch's default-key Do
//
// Key reads the parent's intents at the position with Intents(ctx, p, l,
// seq, index): Actions, then each action's intent in l, kept if it is of
// that seq and index.
//
// # Guarantees
//
//   - Parent never loops: a lineage that names a run the store does not
//     hold, that comes back to the run, or that is longer than MaxDepth
//     is a *record.CorruptionError (the log's, or CHECKPOINT's, whose rows
//     are read before the log confirms them), never a stack overflow.
//   - Key and BranchKey return in itself or a copy of it with another
//     key (ledger.Intent.WithKey); they write nothing.
//
// # Caveats
//
// The ancestor's key is taken only for the same action at the same
// position: an agent that reorders its calls in a fork gets new keys for
// them, and calls them again.
package lineage
