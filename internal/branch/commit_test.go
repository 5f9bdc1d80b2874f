package branch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
)

var (
	errDone       = errors.New("atom done")
	errTooLarge   = errors.New("too large")
	errInvalid    = errors.New("invalid delta")
	errInProgress = errors.New("in progress")
	errEnded      = errors.New("ended")
)

// crun is a run as Conduct's Atoms see it: its lock, its Set, and a log
// whose records are settled when the test says (logRec.settle).
type crun struct {
	mu       sync.Mutex
	set      *Set[*logRec]
	lastSeq  uint64
	applied  []string      // branch names, in the order applied
	writing  chan struct{} // a record written under the run's write mark, until closed
	appended chan *logRec  // every record appended, for the test
	exact    int64         // FrameBoundLocked's
	bounded  []uint64      // the seqs FrameBoundLocked was asked for
	released map[uint64]int
	broken   error // the run's state untrusted
	unbuilt  error // CheckLocked's
	ended    bool  // the run ended
}

func newRun() *crun {
	return &crun{appended: make(chan *logRec, 16), released: map[uint64]int{}}
}

func (r *crun) begin(t *testing.T, name string, writes ...string) *catom {
	t.Helper()
	a := &catom{r: r}
	b, err := Begin[*logRec](context.Background(), a, name, nil, 8, errs)
	if err != nil {
		t.Fatalf("branch %q: %v", name, err)
	}
	a.b = b
	for _, k := range writes {
		a.writes = append(a.writes, mem(k))
	}
	return a
}

// logRec is a record in the fake log.
type logRec struct {
	name    string
	seq     uint64
	settled chan struct{}
	err     error
}

func (l *logRec) settle(err error) { l.err = err; close(l.settled) }

// catom is one branch's commit over crun.
type catom struct {
	r         *crun
	b         *Branch
	writes    []record.StateKey
	actions   atomic.Int32 // the actions the atom holds
	encoded   int32        // the actions its body lists
	encodes   int
	done      bool     // r.mu
	doAtReady bool     // a Do records an action between Encode and the check under the lock, once
	appendErr error    // AppendLocked's
	invalid   bool     // CanApplyLocked refuses the delta
	ended     []string // EndLocked's reasons
}

// errs are Conduct's and Fail's errors over catom.
var errs = Errors{AtomInProgress: errInProgress, RunEnded: errEnded, AtomDone: errDone, InvalidDelta: errInvalid, Conflict: func(b *Branch, c *Conflict) error {
	return fmt.Errorf("conflict at seq %d on %s", c.Seq, c.Key)
}}

func (a *catom) commit(ctx context.Context, deltaBound, limit int64) (*Commit[*logRec], error) {
	return Conduct[*logRec](ctx, a, a.b, record.SortStateKeys(a.writes), deltaBound, limit, errs)
}

func (a *catom) Durable(c *Commit[*logRec]) bool {
	select {
	case <-c.Payload.settled:
		if c.Payload.err == nil {
			c.Durable = true
		}
		return c.Durable
	default:
		return false
	}
}

func (a *catom) Apply(c *Commit[*logRec]) error {
	if c.Seq != a.r.lastSeq+1 || !c.Durable {
		return fmt.Errorf("seq %d applied after %d (durable %v)", c.Seq, a.r.lastSeq, c.Durable)
	}
	a.r.lastSeq = c.Seq
	a.r.applied = append(a.r.applied, c.Payload.name)
	return nil
}

func (a *catom) Release(c *Commit[*logRec]) { a.r.released[c.Seq]++ }
func (a *catom) Committed(*Commit[*logRec]) {}

func (a *catom) Encode(have int) (int, error) {
	n := int(a.actions.Load())
	if n != have {
		a.encodes++
	}
	return n, nil
}

func (a *catom) Lock() (*Set[*logRec], Now) {
	a.r.mu.Lock()
	now := Now{State: State{Run: "r", Ended: a.r.ended}, Broken: a.r.broken, LastSeq: a.r.lastSeq, Done: a.done}
	if w := a.r.writing; w != nil {
		select {
		case <-w:
			a.r.writing = nil
		default:
			now.Writing = w
		}
	}
	if a.doAtReady && now.Writing == nil {
		a.doAtReady = false
		a.actions.Add(1)
	}
	now.Actions = int(a.actions.Load())
	return a.r.set, now
}

func (a *catom) Unlock(s *Set[*logRec]) {
	a.r.set = s
	a.r.mu.Unlock()
}

func (a *catom) CheckLocked() error { return a.r.unbuilt }

func (a *catom) TailLocked() Tail { return Tail{Seq: a.r.lastSeq, Head: chain.Hash{byte(a.r.lastSeq)}} }

func (a *catom) CanApplyLocked() error {
	if a.invalid {
		return errors.New("no such subgoal")
	}
	return nil
}

func (a *catom) FrameBoundLocked(seq uint64) (int64, error) {
	a.r.bounded = append(a.r.bounded, seq)
	if a.r.exact < 0 {
		return 0, errTooLarge
	}
	return a.r.exact, nil
}

func (a *catom) AppendLocked(seq uint64, prev chain.Hash, bound int64) (*logRec, chain.Hash, error) {
	if a.appendErr != nil {
		return nil, chain.Hash{}, a.appendErr
	}
	if prev != (chain.Hash{byte(seq - 1)}) && seq > 1 {
		return nil, chain.Hash{}, fmt.Errorf("seq %d linked to %x", seq, prev[:1])
	}
	l := &logRec{name: a.b.Name, seq: seq, settled: make(chan struct{})}
	a.done = true
	a.r.appended <- l
	return l, chain.Hash{byte(seq)}, nil
}

func (a *catom) EndLocked(reason string, fail bool) {
	a.done = true
	a.ended = append(a.ended, fmt.Sprintf("%s fail=%v", reason, fail))
}

func (a *catom) Wait(c *Commit[*logRec]) error {
	<-c.Payload.settled
	return c.Payload.err
}

func (a *catom) FailLocked(c *Commit[*logRec], err error) error {
	return fmt.Errorf("commit of seq %d: %w", c.Seq, err)
}

// next returns the next record appended, failing if out returns first.
func (r *crun) next(t *testing.T, out <-chan outcome) *logRec {
	t.Helper()
	select {
	case l := <-r.appended:
		return l
	case o := <-out:
		t.Fatalf("returned before its record was appended: %v", o.err)
		return nil
	}
}

type outcome struct {
	c   *Commit[*logRec]
	err error
}

func (a *catom) start(ctx context.Context, deltaBound, limit int64) <-chan outcome {
	out := make(chan outcome, 1)
	go func() {
		c, err := a.commit(ctx, deltaBound, limit)
		out <- outcome{c, err}
	}()
	return out
}

// TestConductOrder: records made durable newest first are applied in seq
// order, each commit returning once applied, every commit released once.
func TestConductOrder(t *testing.T) {
	ctx := context.Background()
	r := newRun()
	var outs []<-chan outcome
	var recs []*logRec
	for _, n := range []string{"a", "b", "c"} {
		a := r.begin(t, n, n)
		outs = append(outs, a.start(ctx, 10, 1000))
		recs = append(recs, r.next(t, outs[len(outs)-1])) // enqueued before the next begins
	}
	recs[2].settle(nil)
	recs[1].settle(nil)
	select {
	case o := <-outs[1]:
		t.Fatalf("b returned before a was durable: %v", o.err)
	default:
	}
	recs[0].settle(nil)
	for i, out := range outs {
		if o := <-out; o.err != nil || o.c.Seq != uint64(i+1) {
			t.Fatalf("commit %d: seq %v, %v", i, o.c, o.err)
		}
	}
	if !slices.Equal(r.applied, []string{"a", "b", "c"}) || r.lastSeq != 3 {
		t.Fatalf("applied %v, last seq %d", r.applied, r.lastSeq)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		if r.released[seq] != 1 {
			t.Fatalf("seq %d released %d times", seq, r.released[seq])
		}
	}
	if r.set != nil {
		t.Fatal("the run kept its Set with no branch in flight")
	}
}

// TestConductConflict: a branch that lost to a commit after its base
// gets its conflict, appends nothing and is over.
func TestConductConflict(t *testing.T) {
	ctx := context.Background()
	r := newRun()
	a, b := r.begin(t, "a", "k"), r.begin(t, "b", "k")
	out := a.start(ctx, 10, 1000)
	r.next(t, out).settle(nil)
	if o := <-out; o.err != nil {
		t.Fatal(o.err)
	}
	c, err := b.commit(ctx, 10, 1000)
	if c != nil || err == nil || err.Error() != "conflict at seq 1 on memory:k" {
		t.Fatalf("the loser: %v, %v", c, err)
	}
	if len(r.appended) != 0 || r.set != nil {
		t.Fatal("the loser appended a record, or its branch stayed live")
	}
	if _, err := b.commit(ctx, 10, 1000); !errors.Is(err, errDone) {
		t.Fatalf("a commit after the conflict: %v", err)
	}
}

// TestConductFailure: a record the log failed fails its commit and the
// ones queued after it, with FailLocked's error, and the Set takes no
// more branches; a record refused at once appends nothing.
func TestConductFailure(t *testing.T) {
	ctx := context.Background()
	r := newRun()
	bad := r.begin(t, "bad")
	bad.appendErr = errTooLarge
	if c, err := bad.commit(ctx, 10, 1000); c != nil || !errors.Is(err, errTooLarge) {
		t.Fatalf("refused at once: %v, %v", c, err)
	}
	r.set.End(bad.b, 0)
	a, b := r.begin(t, "a", "x"), r.begin(t, "b", "y")
	oa := a.start(ctx, 10, 1000)
	ra := r.next(t, oa)
	ob := b.start(ctx, 10, 1000)
	rb := r.next(t, ob)
	disk := errors.New("disk on fire")
	rb.settle(nil)
	ra.settle(disk)
	for _, o := range []outcome{<-oa, <-ob} {
		if !errors.Is(o.err, disk) || o.err.Error() != "commit of seq 1: disk on fire" {
			t.Fatalf("a commit chained to the failed record: %v", o.err)
		}
	}
	if r.lastSeq != 0 || r.released[1] != 1 || r.released[2] != 1 {
		t.Fatalf("last seq %d, released %v", r.lastSeq, r.released)
	}
	if err := r.set.Failed(); !errors.Is(err, disk) {
		t.Fatalf("the Set after the failure: %v", err)
	}
}

// TestConductWaits: a branch waits for a record written under the run's
// write mark (and gives up with ctx, appending nothing), encodes again
// when a Do recorded an action meanwhile, and, when the frame's bound
// passes the limit, waits for the commits queued before it and then asks
// for the frame's exact size.
func TestConductWaits(t *testing.T) {
	ctx := context.Background()
	r := newRun()
	a := r.begin(t, "a", "x")
	r.writing = make(chan struct{})
	cctx, cancel := context.WithCancel(ctx)
	out := a.start(cctx, 10, 1000)
	cancel()
	if o := <-out; !errors.Is(o.err, context.Canceled) || o.c != nil || len(r.appended) != 0 {
		t.Fatalf("cancelled under the write mark: %v", o.err)
	}
	a.doAtReady, a.encodes = true, 0 // each Commit encodes its body anew
	out = a.start(ctx, 10, 1000)
	close(r.writing)
	r.next(t, out).settle(nil)
	if o := <-out; o.err != nil || a.encodes != 2 {
		t.Fatalf("after the write mark: %v, encoded %d times", o.err, a.encodes)
	}

	// Bound: the frame's bound is the Set's tail (0) plus each delta's.
	r.exact = 600
	b, c := r.begin(t, "b", "y"), r.begin(t, "c", "z")
	ob := b.start(ctx, 600, 1000)
	rb := r.next(t, ob)
	oc := c.start(ctx, 600, 1000) // 1,200 > 1,000 with b queued: waits for b
	select {
	case l := <-r.appended:
		t.Fatalf("c appended (seq %d) before b was applied", l.seq)
	case o := <-oc:
		t.Fatalf("c returned: %v", o.err)
	default:
	}
	rb.settle(nil)
	if o := <-ob; o.err != nil {
		t.Fatal(o.err)
	}
	r.next(t, oc).settle(nil)
	if o := <-oc; o.err != nil || o.c.Seq != 3 || !slices.Equal(r.bounded, []uint64{3}) {
		t.Fatalf("c: %v, exact sizes asked for %v", o.err, r.bounded)
	}
	r.exact = -1
	d := r.begin(t, "d", "w")
	if _, err := d.commit(ctx, 2000, 1000); !errors.Is(err, errTooLarge) || len(r.appended) != 0 {
		t.Fatalf("a frame past the limit: %v", err)
	}
}

// TestConductRefusals: a broken run, a delta the frame refuses and a
// conflict append nothing; the first two leave the branch live, the
// conflict ends it (EndLocked, not a Fail).
func TestConductRefusals(t *testing.T) {
	ctx := context.Background()
	r := newRun()
	a := r.begin(t, "a", "x")
	r.broken = errors.New("state untrusted")
	if c, err := a.commit(ctx, 10, 1000); c != nil || err != r.broken {
		t.Fatalf("a broken run: %v, %v", c, err)
	}
	r.broken = nil
	a.invalid = true
	if _, err := a.commit(ctx, 10, 1000); !errors.Is(err, errInvalid) || err.Error() != `invalid delta: run "r" branch "a": no such subgoal` {
		t.Fatalf("an invalid delta: %v", err)
	}
	if len(r.appended) != 0 || !r.set.Live(a.b) || a.done {
		t.Fatal("a refused commit appended, or ended its branch")
	}
	b := r.begin(t, "b", "x")
	a.invalid = false
	out := a.start(ctx, 10, 1000)
	r.next(t, out).settle(nil)
	if o := <-out; o.err != nil {
		t.Fatal(o.err)
	}
	if _, err := b.commit(ctx, 10, 1000); err == nil || !slices.Equal(b.ended, []string{"conflict at seq 1 on memory:x fail=false"}) {
		t.Fatalf("the loser: %v, ended %v", err, b.ended)
	}
}

// TestFail: Fail ends a live branch (its name free again) and refuses one
// that is not live.
func TestFail(t *testing.T) {
	r := newRun()
	a := r.begin(t, "a")
	if err := Fail[*logRec](a, a.b, "gave up", errs); err != nil || !a.done || !slices.Equal(a.ended, []string{"gave up fail=true"}) {
		t.Fatalf("Fail: %v, ended %v", err, a.ended)
	}
	if r.set != nil {
		t.Fatal("the run kept its Set with no branch in flight")
	}
	if err := Fail[*logRec](a, a.b, "again", errs); !errors.Is(err, errDone) || err.Error() != `atom done: run "r" branch "a"` {
		t.Fatalf("Fail of a branch over: %v", err)
	}
	r.begin(t, "a") // the name is free
}

// TestBegin: Begin waits for a record written under the run's write mark
// (or gives up with ctx), refuses with the run's and the Set's errors,
// makes the run's Set from its tail, and refuses a name in flight.
func TestBegin(t *testing.T) {
	ctx := context.Background()
	r := newRun()
	r.lastSeq = 3
	r.writing = make(chan struct{})
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Begin[*logRec](cctx, &catom{r: r}, "a", nil, 8, errs); !errors.Is(err, context.Canceled) || r.set != nil {
		t.Fatalf("cancelled under the write mark: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Begin[*logRec](ctx, &catom{r: r}, "a", nil, 8, errs)
		done <- err
	}()
	close(r.writing)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r.set == nil || r.set.Tail().Seq != 3 {
		t.Fatal("no Set from the run's tail")
	}
	if _, err := Begin[*logRec](ctx, &catom{r: r}, "a", nil, 8, errs); !errors.Is(err, errInProgress) || err.Error() != `in progress: run "r" branch "a" is in flight` {
		t.Fatalf("a name in flight: %v", err)
	}
	r.unbuilt = errors.New("no frame")
	if _, err := Begin[*logRec](ctx, &catom{r: r}, "b", nil, 8, errs); err != r.unbuilt {
		t.Fatalf("a run whose frame cannot be built: %v", err)
	}
	r.ended = true
	if _, err := Begin[*logRec](ctx, &catom{r: r}, "b", nil, 8, errs); !errors.Is(err, errEnded) {
		t.Fatalf("an ended run: %v", err)
	}
}
