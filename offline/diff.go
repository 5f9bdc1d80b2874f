package offline

// Diff: what two states of a lineage do differently, as the delta ops of
// the atoms that lead from their common state to each (continuumctl diff).

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/layout"
)

// ErrUnrelatedRuns is returned by Diff for two runs that are not of one
// lineage: neither is forked, directly or through other forks, from the
// other or from a run both come from, so they share no state to compare
// from.
var ErrUnrelatedRuns = errors.New("continuum: runs of different lineages")

// Point is a state of a lineage: run Run as of seq Seq (0: before its
// first atom, the empty frame).
type Point struct {
	Run string
	Seq uint64
}

// Span is atoms From through To, inclusive, of run Run (From <= To).
type Span struct {
	Run      string
	From, To uint64
}

// Diff is how two states of a lineage differ: the latest state both derive
// from (Base), and for each of the two the atoms that lead from Base to it.
// Applying A's atoms to the frame at Base gives the frame at A, and B's
// atoms give the frame at B.
//
// Within one run, Base is the earlier of the two seqs: for A <= B, A's
// side is empty and B's holds atoms A+1..B. Across a fork, the seqs of a
// fork continue its parent's (a fork of P at seq k has P's atoms 1..k, and
// its own from k+1), so Base is the fork point or earlier.
type Diff struct {
	// Base is the common state, named by the run that wrote its seq: a
	// seq a fork inherited is named by the run it came from (a fork of P
	// at 5 compared at seq 3 has Base in P). BaseHead is the chain head
	// there (zero at seq 0).
	Base     Point
	BaseHead chain.Hash
	// A and B are the two sides, in the order Diff was given them.
	A, B DiffSide
}

// DiffSide is the way from a Diff's Base to one of the two states.
type DiffSide struct {
	// Point is the state as Diff was asked for it.
	Point Point
	// Spans are the atoms from Base (exclusive) to Point (inclusive), run
	// by run down the lineage: a run's atoms up to where the next run was
	// forked from it, then that fork's own, and so on. Empty when Point is
	// Base.
	Spans []Span
	// Atoms are the atoms of Spans in order, decoded: their delta ops
	// (with their sealed memory values opened: AtomInfo.Opened) and their
	// actions with intents and certificates.
	Atoms []*AtomInfo
}

// Ops counts the delta ops of the side's atoms.
func (s *DiffSide) Ops() int {
	n := 0
	for _, a := range s.Atoms {
		n += a.Delta.Len()
	}
	return n
}

// Diff compares run runA as of seq seqA with run runB as of seq seqB: it
// finds their common state and reads the atoms from it to each, from the
// log (never from snapshots or frame files). runA and runB may be the same
// run, a fork and its parent, or any two runs of one lineage; a seq may be
// 0 (the empty frame) up to the run's last (for a fork with no atom of its
// own yet, its fork point).
//
// It fails with an error matching ErrSeqOutOfRange for a seq past a run's
// last, ErrUnrelatedRuns for runs of two lineages, and one matching
// ErrCorrupt (with the run concerned) when the fork records contradict
// each other: a fork whose parent is not in the store, a fork point past
// its parent's last atom, or a cycle of forks.
//
// Diff reads what the log says; it does not check the chain (that a
// fork's link to its parent holds, that the atoms are the chain's):
// Verify does, and names the run and seq where it does not.
//
// The Diff holds the atoms of both sides. Their actions' args and results
// hold at most 64 MiB in all, the rest cut (ActionInfo.ResultSize keeps
// the whole size), as for one Atom; everything read is charged to the
// Inspector's budget (InspectOptions.Budget), so a diff of very long
// histories can fail with an error matching frame.ErrBudget: diff shorter
// ranges, or read the atoms one by one (Atom, Export).
func (in *Inspector) Diff(ctx context.Context, runA string, seqA uint64, runB string, seqB uint64) (*Diff, error) {
	l := lineage{dir: in.st.db.dir, file: in.st.db.path(layout.WALDir), run: in.Run}
	plan, err := l.diff(Point{runA, seqA}, Point{runB, seqB})
	if err != nil {
		return nil, err
	}
	if plan.Base.Seq > 0 {
		pos, err := in.atomPos(plan.Base.Run, plan.Base.Seq)
		if err != nil {
			return nil, err
		}
		a, err := readAtomAt(in.st.db, in.st.log, pos, plan.Base.Run, plan.Base.Seq)
		if err != nil {
			return nil, err
		}
		plan.BaseHead = a.Head
	}
	clip := valueClip{left: atomBytes}
	for _, side := range []*DiffSide{&plan.A, &plan.B} {
		for _, sp := range side.Spans {
			for seq := sp.From; seq <= sp.To; seq++ {
				a, err := in.atom(ctx, sp.Run, seq, &clip)
				if err != nil {
					return nil, err
				}
				side.Atoms = append(side.Atoms, a)
			}
		}
	}
	return plan, nil
}

// lineage answers questions about the lineages of a store's runs from
// their summaries alone (RunSummary.Parent and ForkedAt).
type lineage struct {
	dir  string // the store, for errors
	file string // the log, for corruption errors
	run  func(id string) (RunSummary, bool)
}

// lastSeq is the last seq of s: its last atom's, or for a fork with no
// atom of its own yet, its fork point.
func lastSeq(s RunSummary) uint64 {
	if s.Parent != "" {
		return max(s.LastSeq, s.ForkedAt)
	}
	return s.LastSeq
}

// summary returns the summary of run id; from names the fork that names
// id as its parent ("" when id was asked for directly).
func (l lineage) summary(id, from string) (RunSummary, error) {
	s, ok := l.run(id)
	if ok {
		return s, nil
	}
	if from == "" {
		return RunSummary{}, fmt.Errorf("offline: diff: store %s has no run %q", l.dir, id)
	}
	return RunSummary{}, &CorruptionError{File: l.file, Run: from,
		Reason: fmt.Sprintf("forked from run %q, which the store does not have", id)}
}

// owner returns p named by the run that wrote its seq: p itself, or for a
// seq a fork inherited (at or before its fork point), the point of its
// parent, and so on up. It checks that p's seq is one of its run's.
func (l lineage) owner(p Point, from string) (Point, error) {
	s, err := l.summary(p.Run, from)
	if err != nil {
		return Point{}, err
	}
	if p.Seq > lastSeq(s) {
		if from != "" {
			return Point{}, &CorruptionError{File: l.file, Run: from, Seq: p.Seq,
				Reason: fmt.Sprintf("forked from run %q at seq %d, past that run's last seq %d", p.Run, p.Seq, lastSeq(s))}
		}
		return Point{}, fmt.Errorf("%w: offline: diff: run %q has seqs 0..%d, not %d", ErrSeqOutOfRange, p.Run, lastSeq(s), p.Seq)
	}
	seen := []string{p.Run}
	for s.Parent != "" && p.Seq <= s.ForkedAt {
		child := s
		if s, err = l.summary(child.Parent, child.ID); err != nil {
			return Point{}, err
		}
		if child.ForkedAt > lastSeq(s) {
			return Point{}, &CorruptionError{File: l.file, Run: child.ID, Seq: child.ForkedAt,
				Reason: fmt.Sprintf("forked from run %q at seq %d, past that run's last seq %d", s.ID, child.ForkedAt, lastSeq(s))}
		}
		if err := l.checkCycle(seen, s.ID); err != nil {
			return Point{}, err
		}
		seen = append(seen, s.ID)
		p.Run = s.ID
	}
	return p, nil
}

// checkCycle fails if id is already on the way seen, a walk from a fork to
// its parents: fork records that name each other as parents.
func (l lineage) checkCycle(seen []string, id string) error {
	for i, r := range seen {
		if r == id {
			return &CorruptionError{File: l.file, Run: id,
				Reason: fmt.Sprintf("its fork records form a cycle: %s", strings.Join(quoteAll(append(seen[i:], id)), " forked from "))}
		}
	}
	return nil
}

func quoteAll(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = fmt.Sprintf("%q", id)
	}
	return out
}

// ancestry returns the way from p up its lineage: p's owner, then the
// point its run was forked from (by its owner), and so on to the root of
// the lineage, each point in a run of its own.
func (l lineage) ancestry(p Point) ([]Point, error) {
	o, err := l.owner(p, "")
	if err != nil {
		return nil, err
	}
	way := []Point{o}
	seen := []string{o.Run}
	for {
		s, _ := l.run(o.Run) // owner found it
		if s.Parent == "" {
			return way, nil
		}
		if o, err = l.owner(Point{s.Parent, s.ForkedAt}, s.ID); err != nil {
			return nil, err
		}
		if err := l.checkCycle(seen, o.Run); err != nil {
			return nil, err
		}
		seen = append(seen, o.Run)
		way = append(way, o)
	}
}

// diff finds the common state of a and b and the spans of atoms from it to
// each: the Diff without its atoms and base head.
func (l lineage) diff(a, b Point) (*Diff, error) {
	wa, err := l.ancestry(a)
	if err != nil {
		return nil, err
	}
	wb, err := l.ancestry(b)
	if err != nil {
		return nil, err
	}
	at := make(map[string]int, len(wb))
	for j, p := range wb {
		at[p.Run] = j
	}
	for i, p := range wa {
		j, ok := at[p.Run]
		if !ok {
			continue
		}
		// The deepest run both ways pass through: the lineage is a tree,
		// so both ways agree on everything above it.
		base := Point{p.Run, min(p.Seq, wb[j].Seq)}
		return &Diff{Base: base,
			A: DiffSide{Point: a, Spans: l.spans(wa[:i+1], base)},
			B: DiffSide{Point: b, Spans: l.spans(wb[:j+1], base)}}, nil
	}
	return nil, fmt.Errorf("%w: offline: diff: run %q (lineage of %q) and run %q (lineage of %q) share no state",
		ErrUnrelatedRuns, a.Run, wa[len(wa)-1].Run, b.Run, wb[len(wb)-1].Run)
}

// spans returns the atoms from base down way (a part of an ancestry whose
// last point is in base's run) to its first point, oldest first.
func (l lineage) spans(way []Point, base Point) []Span {
	var out []Span
	if top := way[len(way)-1]; top.Seq > base.Seq {
		out = append(out, Span{top.Run, base.Seq + 1, top.Seq})
	}
	for k := len(way) - 2; k >= 0; k-- {
		s, _ := l.run(way[k].Run)                                       // ancestry found it
		out = append(out, Span{way[k].Run, s.ForkedAt + 1, way[k].Seq}) // an owned point: past its fork point
	}
	return out
}
