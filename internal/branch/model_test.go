package branch

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
)

// modelCore is a Core whose records become durable when the test says,
// and which checks the order it is asked to apply them in.
type modelCore struct {
	t        *testing.T
	durable  map[uint64]bool
	lastSeq  uint64 // the run's last applied seq
	released map[uint64]int
	applied  int
}

func (m *modelCore) Durable(c *Commit[int]) bool {
	if m.durable[c.Seq] {
		c.Durable = true
		return true
	}
	return false
}

func (m *modelCore) Apply(c *Commit[int]) error {
	if c.Seq != m.lastSeq+1 {
		m.t.Fatalf("applied seq %d after %d", c.Seq, m.lastSeq)
	}
	if !c.Durable {
		m.t.Fatalf("applied seq %d before it was durable", c.Seq)
	}
	m.lastSeq = c.Seq
	m.applied++
	return nil
}

func (m *modelCore) Release(c *Commit[int]) { m.released[c.Seq]++ }
func (m *modelCore) Committed(*Commit[int]) {}

// TestSetRandom drives a Set with random branches, commits, durability
// and log failures, against what the rules say: commits apply in seq
// order, only durable ones, each settles and is released exactly once,
// a conflict is reported exactly when an atom after the base wrote an
// overlapping key (while the window holds it).
func TestSetRandom(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	keys := []record.StateKey{mem("a"), mem("b"), mem("c"), {Kind: record.KeyScratchpad}}
	for round := range 200 {
		m := &modelCore{t: t, durable: map[uint64]bool{}, released: map[uint64]int{}}
		s := NewSet[int]("r", Tail{}, 4)
		history := map[uint64][]record.StateKey{} // seq -> writes of every record enqueued
		var live []*Branch
		var commits []*Commit[int]
		failed := false
		for step := range 300 {
			switch op := rng.IntN(6); {
			case op == 0 && len(live) < 5:
				b := s.Begin(fmt.Sprintf("b%d", step), m.lastSeq, nil)
				if b == nil {
					t.Fatalf("round %d: Begin refused a fresh name", round)
				}
				live = append(live, b)
			case op == 1 && len(live) > 0 && !failed:
				i := rng.IntN(len(live))
				b := live[i]
				live = append(live[:i], live[i+1:]...)
				w := []record.StateKey{keys[rng.IntN(len(keys))]}
				want := false
				lost := b.Base < s.winBase
				for seq := b.Base + 1; seq <= s.Tail().Seq; seq++ {
					if _, ok := record.Overlap(history[seq], w); ok {
						want = true
					}
				}
				c := s.Conflict(b, w)
				if (c != nil) != (want || lost) {
					t.Fatalf("round %d step %d: Conflict(base %d, %v) = %+v, want conflict %v (lost %v)", round, step, b.Base, w, c, want, lost)
				}
				if c != nil {
					s.End(b, m.lastSeq)
					continue
				}
				seq := s.Tail().Seq + 1
				history[seq] = w
				commits = append(commits, s.Enqueue(b, w, chain.Hash{byte(seq)}, 0, m.lastSeq, int(seq)))
			case op == 2 && len(live) > 0:
				i := rng.IntN(len(live))
				s.End(live[i], m.lastSeq)
				live = append(live[:i], live[i+1:]...)
			case op == 3:
				if seq := s.Tail().Seq; seq > 0 {
					m.durable[uint64(rng.IntN(int(seq)))+1] = true
				}
				s.Publish(m, m.lastSeq)
			case op == 4 && rng.IntN(20) == 0 && len(commits) > 0:
				s.Fail(commits[rng.IntN(len(commits))], errors.New("log failed"), m)
				failed = true
			}
		}
		for seq := uint64(1); seq <= s.Tail().Seq; seq++ {
			m.durable[seq] = true
		}
		if !failed {
			s.Publish(m, m.lastSeq)
		} else {
			s.Fail(nil, errors.New("log failed"), m)
		}
		for _, c := range commits {
			if !c.Settled() {
				t.Fatalf("round %d: commit %d never settled", round, c.Seq)
			}
			if n := m.released[c.Seq]; n != 1 {
				t.Fatalf("round %d: commit %d released %d times", round, c.Seq, n)
			}
			if (c.Err() == nil) != (c.Seq <= m.lastSeq) {
				t.Fatalf("round %d: commit %d err %v, last applied %d", round, c.Seq, c.Err(), m.lastSeq)
			}
		}
		if !failed && m.applied != len(commits) {
			t.Fatalf("round %d: applied %d of %d", round, m.applied, len(commits))
		}
	}
}
