// Package runview is the one view of a run that the engine's capabilities
// take instead of the engine's own types: what a capability may read of
// one run (its id, its fork link, its chain's head, its state at a seq),
// with no lock of the caller's to hold and nothing to write. A capability
// that needs more of a run (history's frame file and positions, a
// rollback's atom) names it in its own interface, which embeds this one.
//
// # The interface
//
// What the engine implements over its Run (an adapter type,
// engine/runview.go; *engine.Run itself keeps its public methods only):
//
//	type Run interface {
//		// ID is the run's id.
//		ID() string
//		// Base is the seq the run starts from: a fork's fork point (its
//		// own atoms are Base()+1..), 0 for a run that is no fork.
//		// Immutable.
//		Base() uint64
//		// ChainHead returns the seq and head of the run's last chain
//		// link: its end's once ended (ended true), else its last atom's.
//		ChainHead() (seq uint64, head chain.Hash, ended bool)
//		// StateAt returns the run's state at seq (Base <= seq <= its last
//		// seq; a fork's below Base is its parent's), with erasable memory
//		// values still sealed: the engine's own view, not Run.StateAt's.
//		// The frame is the caller's.
//		StateAt(ctx context.Context, seq uint64) (*frame.Frame, error)
//	}
//
// # Guarantees
//
// Every method takes and releases the run's lock itself: a capability
// calls them with none of the engine's locks held, and may call them from
// any goroutine.
//
// # Caveats
//
// The view is of the run as it is now: two calls may see two states (an
// atom committed in between). A capability that needs a consistent view
// of several fields asks for one method that returns them together.
package runview
