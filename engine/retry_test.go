package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/crashmem"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
)

// flakyTool fails its first failures calls (per process-independent
// count), then succeeds; calls after the power cut (dead) do nothing.
type flakyTool struct {
	mu       sync.Mutex
	calls    int
	failures int
	keys     map[string]bool
	dead     *downstream // its dead flag, set by a power cut; nil: never
}

func (f *flakyTool) exec(ctx context.Context, key string) ([]byte, error) {
	if f.dead != nil {
		f.dead.mu.Lock()
		defer f.dead.mu.Unlock()
		if f.dead.dead {
			return nil, errors.New("process is gone")
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.keys == nil {
		f.keys = map[string]bool{}
	}
	f.keys[key] = true
	if f.calls <= f.failures {
		return nil, errors.New("503 unavailable")
	}
	return []byte(`"posted"`), nil
}

var retryAction = ledger.Action{Tool: "http.post", Args: []byte(`{"url":"/x"}`), Idempotent: true,
	Retry: &ledger.RetryPolicy{MaxAttempts: 4, Initial: time.Millisecond, Multiplier: 2}}

type outcomeObserver struct {
	mu       sync.Mutex
	outcomes []ActionOutcome
	retry    []*ledger.RetryPolicy
}

func (o *outcomeObserver) Opened(OpenInfo)                                   {}
func (o *outcomeObserver) GroupCommitted(wal.GroupCommit)                    {}
func (o *outcomeObserver) SnapshotWritten(SnapshotEvent)                     {}
func (o *outcomeObserver) Committed(CommitEvent)                             {}
func (o *outcomeObserver) Failed(string)                                     {}
func (o *outcomeObserver) AtomBegun(context.Context, AtomEvent) AtomObserver { return o }

func (o *outcomeObserver) ActionStarted(ctx context.Context, ev ActionEvent) (context.Context, ActionObserver) {
	o.mu.Lock()
	o.retry = append(o.retry, ev.Retry)
	o.mu.Unlock()
	return ctx, o
}

func (o *outcomeObserver) ActionEnded(outcome ActionOutcome, err error) {
	o.mu.Lock()
	o.outcomes = append(o.outcomes, outcome)
	o.mu.Unlock()
}

// TestRetryAtomDo: Atom.Do honours a retry policy (same key each
// attempt), and an action given up is reported once, durably: a re-begun
// atom after a restart gets the same *ledger.GaveUpError without exec, the
// observer sees gave_up, and deep verify accepts the records.
func TestRetryAtomDo(t *testing.T) {
	mem := vfs.NewMem()
	obs := &outcomeObserver{}
	opts := testOptions(mem)
	opts.Observer = obs
	db := openTest(t, mem, opts)
	run, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ok := &flakyTool{failures: 2}
	if res, err := a.Do(ctx, retryAction, ok.exec); err != nil || string(res) != `"posted"` || ok.calls != 3 || len(ok.keys) != 1 {
		t.Fatalf("Do = %s, %v after %d calls with keys %v", res, err, ok.calls, ok.keys)
	}
	never := &flakyTool{failures: 100}
	act := retryAction
	act.Args = []byte(`{"url":"/down"}`)
	_, err = a.Do(ctx, act, never.exec)
	var g *ledger.GaveUpError
	var ae *ActionError
	if !errors.As(err, &g) || !errors.As(err, &ae) || !errors.Is(err, ledger.ErrAttemptsExhausted) || never.calls != 4 {
		t.Fatalf("Do = %v after %d calls", err, never.calls)
	}
	for _, want := range []string{`run "r" seq 1`, `"http.post"`, "4 attempt(s)", "503 unavailable"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if got := obs.outcomes; len(got) != 2 || got[0] != ActionExecuted || got[1] != ActionGaveUp || obs.retry[0] == nil || obs.retry[0].MaxAttempts != 4 {
		t.Fatalf("observer saw %v (policy %+v)", got, obs.retry)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// The atom was not committed: a restart re-begins it; both actions
	// keep their outcomes, exec is not called.
	db2, err := Open("store", testOptions(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	run, _ = db2.Run(ctx, "r")
	a, err = run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := a.Do(ctx, retryAction, ok.exec); err != nil || string(res) != `"posted"` || ok.calls != 3 {
		t.Fatalf("after restart: %s, %v, %d calls", res, err, ok.calls)
	}
	if _, err := a.Do(ctx, act, never.exec); !errors.Is(err, ledger.ErrGaveUp) || never.calls != 4 {
		t.Fatalf("after restart: %v, %d calls", err, never.calls)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("k", []byte("v"))); err != nil {
		t.Fatal(err)
	}
}

// TestRetryPowerCut cuts the power at every filesystem operation (a
// stride of them under -short) of an atom whose action fails twice before
// it succeeds, then restarts until the atom commits: the attempts counted
// by the log are the calls the tool saw (none lost, none reset, an
// attempt in doubt counted), or one more when the cut kept an intent
// whose exec never ran, never beyond the policy's 4, the key never
// changes, and deep verify (the retry invariants R1-R4) holds.
func TestRetryPowerCut(t *testing.T) {
	base := vfs.NewCrashableMem()
	everyPowerCut(t, 3, 1, "the retried atom", func(t *testing.T, mode Durability, pct int, target uint64) uint64 {
		return retryTrial(t, base, mode, pct, target, 2)
	})
}

// TestRetryGiveUpPowerCut is TestRetryPowerCut with a tool that always
// fails: whatever the cut, the action is given up once (deep verify's R4:
// one give-up, no attempt after it), after at most 4 executions, and the
// atom that records the failure commits.
func TestRetryGiveUpPowerCut(t *testing.T) {
	base := vfs.NewCrashableMem()
	everyPowerCut(t, 3, 2, "the given-up atom", func(t *testing.T, mode Durability, pct int, target uint64) uint64 {
		return retryTrial(t, base, mode, pct, target, 100)
	})
}

func retryTrial(t *testing.T, base *vfs.MemFS, mode Durability, pct int, target uint64, failures int) uint64 {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%v unsynced=%d%%, crash at op %d: "+format, append([]any{mode, pct, target}, args...)...)
	}
	mem := base.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	cut := &powerCut{mem: crashmem.New(mem), down: &downstream{},
		cfg: vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(uint64(pct), target))}, target: target}
	tool := &flakyTool{failures: failures, dead: cut.down}
	opts := testOptions(mem)
	opts.Durability = mode
	opts.FS = errorfs.Wrap(cut.mem, cut)
	step := func(db *DB) error {
		run, err := db.Run(ctx, "r")
		if err != nil {
			return err
		}
		if run.LastSeq() == 1 {
			return nil
		}
		a, err := run.Begin(ctx)
		if err != nil {
			return err
		}
		posted := "yes"
		if _, err := a.Do(ctx, retryAction, tool.exec); errors.Is(err, ledger.ErrGaveUp) && failures > 4 {
			posted = "given up"
		} else if err != nil {
			return err
		}
		return a.Commit(ctx, new(frame.Delta).Set("posted", []byte(posted)))
	}
	committed := false
	if db, err := Open("store", opts); err == nil {
		committed = step(db) == nil && !cut.cutBefore()
		db.Close()
	} else if !cut.cutBefore() {
		fail("open: %v", err)
	}
	fs := cut.survivor(mem)
	if fs != vfs.FS(mem) {
		committed = false
		cut.down.mu.Lock()
		cut.down.dead = false // the tool outlives the process
		cut.down.mu.Unlock()
	}
	for restart := 0; !committed; restart++ {
		if restart == 3 {
			fail("not committed after %d restarts", restart)
		}
		o := testOptions(fs)
		o.Durability = mode
		db, err := Open("store", o)
		if err != nil {
			fail("reopen: %v", err)
		}
		if err := step(db); err != nil {
			db.Close()
			fail("restart %d: %v (tool calls %d)", restart, err, tool.calls)
		}
		committed = true
		db.Close()
	}
	o := testOptions(fs)
	o.Durability = mode
	db, err := Open("store", o)
	if err != nil {
		fail("reopen: %v", err)
	}
	in, err := ledger.NewIntent(retryAction, "r", 1, 0)
	if err != nil {
		fail("%v", err)
	}
	if err := db.waitLedger(ctx); err != nil {
		db.Close()
		fail("%v", err)
	}
	e, ok := db.ledger.Lookup(in.Fingerprint)
	want := ledger.StatusDone
	if failures > 4 {
		want = ledger.StatusFailed
	}
	if !ok || e.Status != want {
		db.Close()
		fail("the action is %+v, want %v", e, want)
	}
	last, err := db.readIntent(e.IntentLoc)
	if err != nil {
		db.Close()
		fail("reading the last attempt: %v", err)
	}
	if failures > 4 {
		c, err := db.readCertificate(e.CertLoc)
		if err != nil || c.Attempt == nil || c.Attempt.GaveUp != ledger.GaveUpAttempts || c.Attempt.Number != 4 {
			db.Close()
			fail("the last certificate %+v (%v), want the give-up after 4 attempts", c, err)
		}
	}
	db.Close()
	// An attempt whose intent the cut kept (unsynced data kept) but whose
	// exec never ran counts as well: at most one more than the calls.
	if n := int(last.Attempt); n < tool.calls || n > tool.calls+1 || n > 4 || tool.calls < min(3, failures+1) || len(tool.keys) != 1 {
		fail("the log counts %d attempts, the tool saw %d calls with keys %v (max 4)", last.Attempt, tool.calls, tool.keys)
	}
	checkStore(t, fs, o)
	return cut.n.Load()
}

// TestRetryVerifyInvariants: deep verify reports attempts of an action
// that go back (R1), a failure of another attempt than the latest (R2), a
// moved first attempt (R3) and an attempt after the action was given up
// (R4), each at its record.
func TestRetryVerifyInvariants(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		recs       func(in *ledger.Intent) []any
	}{
		{"count back", "the count went back", func(in *ledger.Intent) []any {
			return []any{attempt(in, 2, 10, 20), attempt(in, 1, 10, 30)}
		}},
		{"failure of another attempt", "whose latest attempt is 2", func(in *ledger.Intent) []any {
			return []any{attempt(in, 2, 10, 20), failure(in, 1, 10, 25, ledger.NotGivenUp)}
		}},
		{"first moved", "moves its first attempt's start", func(in *ledger.Intent) []any {
			return []any{attempt(in, 1, 10, 10), attempt(in, 2, 5, 20)}
		}},
		{"after give-up", "after it was given up", func(in *ledger.Intent) []any {
			return []any{attempt(in, 1, 10, 10), failure(in, 1, 10, 15, ledger.GaveUpPermanent), attempt(in, 2, 10, 20)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			db, err := Open("store", testOptions(mem))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Run(ctx, "r"); err != nil {
				t.Fatal(err)
			}
			in, err := ledger.NewIntent(retryAction, "r", 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			j := db.journal()
			for _, r := range tc.recs(in) {
				switch r := r.(type) {
				case *ledger.Intent:
					_, err = j.WriteIntent(ctx, r)
				case *ledger.Certificate:
					_, err = j.WriteCertificate(ctx, r)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			db.Close()
			rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: true})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range rep.Failures {
				found = found || strings.Contains(f.String(), tc.want)
			}
			if rep.OK || !found {
				t.Fatalf("verify: ok=%v failures %v, want one that says %q", rep.OK, rep.Failures, tc.want)
			}
		})
	}
}

func attempt(in *ledger.Intent, n uint32, first, started int64) *ledger.Intent {
	c := *in
	c.Attempt, c.First, c.Started = n, first, started
	return &c
}

func failure(in *ledger.Intent, n uint32, first, at int64, g ledger.GiveUp) *ledger.Certificate {
	a := &ledger.Attempt{Number: n, First: first, At: at, GaveUp: g}
	if g == ledger.NotGivenUp {
		a.Next = at
	}
	return &ledger.Certificate{Fingerprint: in.Fingerprint, RunID: in.RunID, Seq: in.Seq, Status: ledger.StatusFailed, Err: "e", Attempt: a}
}

// TestRetryInspectExport: inspect lists an attempt in doubt after a failed
// one (the certificate before it is an earlier attempt's), with its
// attempt count, and export writes a committed action's policy and
// attempts.
func TestRetryInspectExport(t *testing.T) {
	mem := vfs.NewMem()
	db := openTest(t, mem, testOptions(mem))
	run, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ok := &flakyTool{failures: 1}
	if _, err := a.Do(ctx, retryAction, ok.exec); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("k", []byte("v"))); err != nil {
		t.Fatal(err)
	}
	a, err = run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doubt := retryAction
	doubt.Args = []byte(`{"url":"/doubt"}`)
	calls := 0
	_, err = a.Do(ctx, doubt, func(context.Context, string) ([]byte, error) {
		if calls++; calls == 1 {
			return nil, errors.New("503")
		}
		return nil, ledger.ErrUncertified // attempt 2: its outcome unknown
	})
	if !errors.Is(err, ledger.ErrInDoubt) {
		t.Fatalf("Do = %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	in, err := Inspect(ctx, "store", &InspectOptions{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	sum, _ := in.Run("r")
	if len(sum.InDoubt) != 1 || sum.InDoubt[0].Retry == nil || sum.InDoubt[0].Retry.Attempts != 2 || sum.InDoubt[0].StatusName() != "in-doubt" {
		t.Fatalf("in doubt: %+v", sum.InDoubt)
	}
	var out strings.Builder
	if _, err := in.Export(ctx, &out, "r", 1, 1); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"retry":{"max_attempts":4,"initial_ms":1,"multiplier":2,"max_ms":0,"deadline_ms":0,"attempts":2,"first_attempt":"`, `"status":"done"`} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("export %s\nwants %s", out.String(), want)
		}
	}
}
