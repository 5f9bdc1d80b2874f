package retention

import "sort"

// Orphan returns err, the damage of a record of run whose creation record
// is not in the log, unless garbage collection trimmed the log (trimmed):
// then it is noted and checked once the replay ends (CheckOrphans), since
// the run may be one the log deletes further on. Open's goroutine only.
func (g *GC) Orphan(trimmed bool, run string, err error) error {
	if !trimmed {
		return err
	}
	if g.orphans == nil {
		g.orphans = map[string]error{}
	}
	if _, seen := g.orphans[run]; !seen {
		g.orphans[run] = err
	}
	return nil
}

// ResetOrphans forgets the orphans noted so far (a replay starts).
func (g *GC) ResetOrphans() { g.orphans = nil }

// CheckOrphans returns the damage of the first orphan record (by run id)
// of a run the log does not delete (deleted), and forgets them all.
func (g *GC) CheckOrphans(deleted func(run string) bool) error {
	err := FirstOrphan(g.orphans, deleted)
	g.orphans = nil
	return err
}

// FirstOrphan returns, of orphans (run id -> the damage of its first
// orphan record), the damage of the first run by id that deleted says
// the log does not delete, or nil.
func FirstOrphan(orphans map[string]error, deleted func(run string) bool) error {
	ids := make([]string, 0, len(orphans))
	for id := range orphans {
		if !deleted(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	sort.Strings(ids)
	return orphans[ids[0]]
}
