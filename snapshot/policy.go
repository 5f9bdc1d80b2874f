package snapshot

import "time"

// Defaults of Policy's zero fields.
const (
	DefaultEvery    = 50
	DefaultInterval = 10 * time.Minute
)

// Policy says when a run is due for a snapshot: after Every atoms, or after
// Interval has passed with at least one atom, whichever comes first.
//
// A zero field takes its default (Every 50, Interval 10 minutes). A negative
// Every disables the count trigger; a negative Interval disables the time
// trigger. With both disabled, no snapshot is ever due.
type Policy struct {
	// Every is the number of committed atoms since the last snapshot that
	// makes a snapshot due. 0 means DefaultEvery; negative disables.
	Every int
	// Interval is the time since the last snapshot after which any new atom
	// makes a snapshot due. 0 means DefaultInterval; negative disables.
	Interval time.Duration
}

// Effective returns the policy with its defaults applied: the count and the
// interval that trigger a snapshot, each 0 when that trigger is disabled.
func (p Policy) Effective() (every int, interval time.Duration) {
	switch {
	case p.Every == 0:
		every = DefaultEvery
	case p.Every > 0:
		every = p.Every
	}
	switch {
	case p.Interval == 0:
		interval = DefaultInterval
	case p.Interval > 0:
		interval = p.Interval
	}
	return every, interval
}

// Due reports whether a run that has committed atomsSince atoms since its
// last snapshot, taken sinceLast ago (or since the run was opened, if it has
// none), should be snapshotted now. With no new atom, nothing is due: a
// snapshot would repeat the last one.
func (p Policy) Due(atomsSince int, sinceLast time.Duration) bool {
	if atomsSince <= 0 {
		return false
	}
	every, interval := p.Effective()
	if every > 0 && atomsSince >= every {
		return true
	}
	return interval > 0 && sinceLast >= interval
}
