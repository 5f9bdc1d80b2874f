package registry

import (
	"bytes"
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/internal/runtable"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Host is what Scan needs of the engine (see the package's doc).
type Host interface {
	Deleted(r *record.Record, parent string) (why string)
	KeyErased(r *record.Record)
	IsDeleted(run string) bool
	Closed() error
	Other(r *record.Record) error
}

// End is a run's end as the log holds it.
type End struct {
	Status uint8
	Ended  int64 // Unix nanoseconds
	Result []byte
	Head   chain.Hash // the end record's link
	// Stored is the result as the end record stores it, sealed, in an
	// encrypted store (nil otherwise): what CHECKPOINT's row holds there.
	Stored []byte
}

// RowResult is the result CHECKPOINT's row of the run holds: the end
// record's stored result (sealed in an encrypted store).
func (e *End) RowResult() []byte {
	if e.Stored != nil {
		return e.Stored
	}
	return e.Result
}

func endOf(r *record.Record) *End {
	return &End{Status: r.Status, Ended: r.Ended, Result: append([]byte(nil), r.Result...), Head: r.Head, Stored: bytes.Clone(r.Stored)}
}

// Run is a run as the log before the replay position holds it.
type Run struct {
	Nonce   chain.Nonce
	Created int64
	Last    uint64
	Head    chain.Hash
	Pos     []wal.Pos // Pos[i] is the position of atom Base+i+1
	End     *End      // the run's end, if the log ends it
	// A fork's parent, fork point and the parent's head there ("": none).
	Parent     string
	Base       uint64
	ParentHead chain.Hash
	Head0      chain.Hash // h(Base): its genesis or fork genesis
	// After holds the heads of the run's atoms Last+1.. at or after the
	// replay position, and EndAfter its end there: an engine checkpoint
	// takes its replay position below the writes in flight and then the
	// runs, so CHECKPOINT may list a run with atoms (or an end) just past
	// the position.
	After    []chain.Hash
	EndAfter *End
}

// State is the state the log gives the run: no frame file, its atoms'
// positions from the log (the State's copy), its snapshots and atom index
// from its fork point; Head is h(0) for a run without atoms.
func (lr *Run) State() runtable.State {
	return runtable.State{Empty: lr.Last == 0 && lr.Parent == "", Last: lr.Last, Head: lr.Head,
		IndexedSeq: lr.Base, Positions: append([]wal.Pos(nil), lr.Pos...), SnapSeq: lr.Base}
}

// listedRight reports whether CHECKPOINT's row c says of the run what the
// log says: its seq between the log's before the replay position and
// what follows it, with the log's head there, and the same end (status,
// time, result and link).
func (lr *Run) listedRight(c *layout.CheckpointRun) bool {
	switch {
	case c.LastSeq < lr.Last || c.LastSeq > lr.Last+uint64(len(lr.After)):
		return false
	case c.LastSeq == lr.Last && lr.Head != c.Head:
		return false
	case c.LastSeq > lr.Last && lr.After[c.LastSeq-lr.Last-1] != c.Head:
		return false
	}
	end := lr.End
	if end == nil && c.Status != 0 && c.LastSeq == lr.Last+uint64(len(lr.After)) {
		end = lr.EndAfter
	}
	if (end != nil) != (c.Status != 0) {
		return false
	}
	// The row's status, time and result are served by RunInfo without the
	// log being read: they must be the end record's, not only its head.
	return end == nil || end.Status == c.Status && end.Head == c.EndHead &&
		end.Ended == c.Ended && bytes.Equal(end.RowResult(), c.Result)
}

// Disagrees returns how CHECKPOINT's row c of the run disagrees with the
// log's lr (nil: the log does not hold the run), or "" if it does not.
func Disagrees(c *layout.CheckpointRun, lr *Run) string {
	switch {
	case lr == nil:
		return fmt.Sprintf("run %q is not in the log", c.ID)
	case lr.Nonce != c.Nonce:
		return fmt.Sprintf("run %q has another nonce in the log", c.ID)
	case lr.Created != c.Created:
		return fmt.Sprintf("run %q has another creation time in the log", c.ID)
	case lr.Parent != c.Parent || lr.Parent != "" && (lr.Base != c.ForkedAt || lr.Head0 != c.BaseHead):
		return fmt.Sprintf("run %q: the log and CHECKPOINT disagree on what it was forked from", c.ID)
	case !lr.listedRight(c):
		return fmt.Sprintf("run %q is at seq %d in the log (%d more after the replay position), CHECKPOINT says %d, or they disagree on its head or end",
			c.ID, lr.Last, len(lr.After), c.LastSeq)
	}
	return ""
}

// Skip is the cursor's Skip for Scan: the run, fork, atom, end, delete,
// erase and erase-key records are read.
func Skip(k record.Kind, _ []byte) bool { return !scanned(k) }

// scanned reports whether Scan reads records of kind k itself.
func scanned(k record.Kind) bool {
	return k == record.KindRun || k == record.KindAtom || k == record.KindEnd || k == record.KindFork || k.Deletes() || k == record.KindEraseKey
}

// Scan reads c (a cursor over the whole log, its Skip set to Skip) for the
// runs the log holds before to. hasher gives runs their genesis; file
// names a segment for errors; trimmed says that garbage collection
// trimmed the log.
func Scan(c *record.Cursor, to wal.Pos, hasher *chain.Hasher, file func(seg uint64) string, trimmed bool, h Host) (map[string]*Run, error) {
	runs := map[string]*Run{}
	// orphans holds, in a log that garbage collection trimmed, the first
	// record of each run whose creation record was reclaimed: fine for a
	// run the log deletes further on, damage otherwise.
	orphans := map[string]error{}
	for n := 0; c.Next(); n++ {
		if n%4096 == 0 {
			if err := h.Closed(); err != nil {
				return nil, err // Close does not wait for a whole read
			}
		}
		r := c.Record()
		if !scanned(r.Kind) {
			// A record the cursor's Skip let through for another
			// capability's check, in the same pass.
			if err := h.Other(r); err != nil {
				return nil, err
			}
			continue
		}
		if r.Kind == record.KindEraseKey {
			h.KeyErased(r)
			continue
		}
		where := func(run string, seq uint64, reason string) error {
			return &record.CorruptionError{File: file(r.Pos.Segment), Offset: r.Pos.Offset, Run: run, Seq: seq, Reason: reason}
		}
		deleted := func(parent string) error {
			delete(runs, r.Run)
			if why := h.Deleted(r, parent); why != "" {
				return where(r.Run, r.Seq, why)
			}
			return nil
		}
		// A run's creation record may follow the replay position while
		// CHECKPOINT lists it (a run is published before its record is
		// written): creations are taken wherever they are.
		if !r.Pos.Less(to) && r.Kind != record.KindRun && r.Kind != record.KindFork {
			lr := runs[r.Run]
			switch {
			case r.Kind.Deletes():
				// Replayed at Open (a checkpoint taken while it was being
				// written no longer lists the run): the run is gone.
				parent := ""
				if lr != nil {
					parent = lr.Parent
				}
				if err := deleted(parent); err != nil {
					return nil, err
				}
			case lr == nil || r.Seq != lr.Last+uint64(len(lr.After))+1 || lr.End != nil || lr.EndAfter != nil:
			case r.Kind == record.KindAtom:
				lr.After = append(lr.After, r.Head)
			case r.Kind == record.KindEnd:
				lr.EndAfter = endOf(r)
			}
			continue
		}
		orphan := func(err error) error {
			if !trimmed {
				return err
			}
			if _, seen := orphans[r.Run]; !seen {
				orphans[r.Run] = err
			}
			return nil
		}
		switch r.Kind {
		case record.KindRun:
			if _, dup := runs[r.Run]; !dup {
				// h(0), which a run without atoms has as its head (and
				// CHECKPOINT lists it with).
				g := hasher.Genesis(r.Run, r.Nonce)
				runs[r.Run] = &Run{Nonce: r.Nonce, Created: r.Created, Head: g, Head0: g}
			}
		case record.KindFork:
			if _, dup := runs[r.Run]; !dup {
				if runs[r.Parent] == nil {
					if err := orphan(where(r.Run, r.Seq, fmt.Sprintf("forked from run %q, whose creation record is not before it", r.Parent))); err != nil {
						return nil, err
					}
					continue
				}
				g := hasher.ForkGenesis(r.Run, r.Nonce, r.Parent, r.Seq, r.ParentHead)
				runs[r.Run] = &Run{Nonce: r.Nonce, Created: r.Created, Last: r.Seq, Base: r.Seq, Parent: r.Parent, ParentHead: r.ParentHead,
					Head: g, Head0: g}
			}
		case record.KindAtom:
			lr := runs[r.Run]
			switch {
			case lr == nil:
				if err := orphan(where(r.Run, r.Seq, "atom of a run whose creation record is not in the log")); err != nil {
					return nil, err
				}
				continue
			case r.Seq <= lr.Last:
				continue
			case r.Seq != lr.Last+1:
				return nil, where(r.Run, lr.Last+1, fmt.Sprintf("seq %d follows seq %d: the atoms between them are missing", r.Seq, lr.Last))
			}
			if lr.End != nil {
				return nil, where(r.Run, r.Seq, "atom after the run ended")
			}
			lr.Last, lr.Head = r.Seq, r.Head
			lr.Pos = append(lr.Pos, r.Pos)
		case record.KindEnd:
			lr := runs[r.Run]
			switch {
			case lr == nil:
				if err := orphan(where(r.Run, r.Seq, "end of a run whose creation record is not in the log")); err != nil {
					return nil, err
				}
				continue
			case lr.End != nil:
				return nil, where(r.Run, r.Seq, "the run ends a second time")
			case r.Seq != lr.Last+1:
				return nil, where(r.Run, r.Seq, fmt.Sprintf("the end at seq %d does not follow the run's last atom %d", r.Seq, lr.Last))
			}
			lr.End = endOf(r)
		case record.KindDelete, record.KindErase:
			parent := ""
			if lr := runs[r.Run]; lr != nil {
				if lr.End == nil || r.Seq != lr.Last+2 || r.Final != lr.End.Head {
					return nil, where(r.Run, r.Seq, "the deletion does not follow the run's end")
				}
				parent = lr.Parent
			}
			if err := deleted(parent); err != nil {
				return nil, err
			}
		}
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	// The first orphan, by run id, of a run the log does not delete.
	if err := retention.FirstOrphan(orphans, h.IsDeleted); err != nil {
		return nil, err
	}
	return runs, nil
}
