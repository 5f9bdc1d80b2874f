package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// ReadIntent makes memJournal an IntentReader.
func (j *memJournal) ReadIntent(loc Loc) (*Intent, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if loc.Segment != 1 || loc.Offset < 0 || loc.Offset >= int64(len(j.mu.recs)) {
		return nil, fmt.Errorf("memJournal: no record at %+v", loc)
	}
	return DecodeIntent(j.mu.recs[loc.Offset])
}

// testClock is a Clock whose Sleep advances it (and records the wait).
type testClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newTestClock() *testClock { return &testClock{now: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)} }

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}
func (c *testClock) advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }
func (c *testClock) waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// attemptsIn returns, in log order, the attempt numbers of the intents
// of fp and the certificates of fp, decoded.
func attemptsIn(t *testing.T, j *memJournal, fp Fingerprint) (intents []uint32, certs []*Certificate) {
	t.Helper()
	for i, b := range j.records() {
		if b[1] == intentMagic1 {
			in, err := DecodeIntent(b)
			if err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			if in.Fingerprint == fp {
				intents = append(intents, in.Attempt)
			}
			continue
		}
		c, err := DecodeCertificate(b)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if c.Fingerprint == fp {
			certs = append(certs, c)
		}
	}
	return intents, certs
}

func retryIntent(t *testing.T, p *RetryPolicy, idempotent bool) *Intent {
	t.Helper()
	in, err := NewIntent(Action{Tool: "http.post", Args: []byte(`{"to":"x"}`), Key: "idem-1", Idempotent: idempotent, Retry: p}, "run-r", 7, 0)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

var errFlaky = errors.New("503 service unavailable")

func TestRetrySucceedsAfterFailures(t *testing.T) {
	j, clk := newMemJournal(), newTestClock()
	l := New()
	l.SetClock(clk)
	in := retryIntent(t, &RetryPolicy{MaxAttempts: 5, Initial: 100 * time.Millisecond, Multiplier: 3}, false)
	var keys []string
	res, err := l.Do(context.Background(), j, in, func(ctx context.Context, key string) ([]byte, error) {
		keys = append(keys, key)
		if len(keys) < 3 {
			return nil, errFlaky
		}
		return []byte(`"ok"`), nil
	})
	if err != nil || string(res) != `"ok"` {
		t.Fatalf("Do = %s, %v", res, err)
	}
	if len(keys) != 3 || keys[0] != "idem-1" || keys[1] != keys[0] || keys[2] != keys[0] {
		t.Fatalf("exec keys %q: want the same key three times", keys)
	}
	if w := clk.waits(); len(w) != 2 || w[0] != 100*time.Millisecond || w[1] != 300*time.Millisecond {
		t.Fatalf("waits %v, want [100ms 300ms]", w)
	}
	ints, certs := attemptsIn(t, j, in.Fingerprint)
	if fmt.Sprint(ints) != "[1 2 3]" || len(certs) != 3 || certs[0].Attempt.Number != 1 || certs[1].Attempt.Number != 2 ||
		certs[2].Status != StatusDone || certs[2].Attempt != nil {
		t.Fatalf("intents %v, certificates %+v", ints, certs)
	}
	// A later Do, and one after a restart, returns the result.
	l2 := j.recover(t, false)
	if res, err := l2.Do(context.Background(), j, in, func(context.Context, string) ([]byte, error) { t.Fatal("exec again"); return nil, nil }); err != nil || string(res) != `"ok"` {
		t.Fatalf("after restart: %s, %v", res, err)
	}
}

func TestRetryExhaustedOnce(t *testing.T) {
	j, clk := newMemJournal(), newTestClock()
	l := New()
	l.SetClock(clk)
	in := retryIntent(t, &RetryPolicy{MaxAttempts: 3, Initial: time.Second}, true)
	calls := 0
	fail := func(context.Context, string) ([]byte, error) {
		calls++
		return nil, fmt.Errorf("attempt %d: %w", calls, errFlaky)
	}
	_, err := l.Do(context.Background(), j, in, fail)
	var g *GaveUpError
	if !errors.As(err, &g) || !errors.Is(err, ErrGaveUp) || !errors.Is(err, ErrAttemptsExhausted) || !errors.Is(err, errFlaky) {
		t.Fatalf("Do = %v, want a *GaveUpError for exhausted attempts wrapping the exec's error", err)
	}
	for _, want := range []string{`run "run-r"`, "seq 7", `"http.post"`, "3 attempt(s)", "attempt 3: 503", "attempts exhausted"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if calls != 3 || g.Attempts != 3 {
		t.Fatalf("%d calls, %d attempts", calls, g.Attempts)
	}
	// A later Do, in this process and after restarts (from the log, from a
	// table), returns the same failure without exec and writes nothing.
	n := j.len()
	tbl := l.AppendTable(nil)
	fromTable := New()
	if err := fromTable.LoadTable(tbl); err != nil {
		t.Fatal(err)
	}
	for name, l2 := range map[string]*Ledger{"same": l, "replayed": j.recover(t, false), "table": fromTable} {
		l2.SetClock(clk)
		_, err := l2.Do(context.Background(), j, in, fail)
		if !errors.Is(err, ErrAttemptsExhausted) || !strings.Contains(err.Error(), "attempt 3: 503") {
			t.Fatalf("%s: later Do = %v", name, err)
		}
	}
	if calls != 3 || j.len() != n {
		t.Fatalf("later Dos called exec (%d calls) or wrote (%d records, want %d)", calls, j.len(), n)
	}
	_, certs := attemptsIn(t, j, in.Fingerprint)
	final := 0
	for _, c := range certs {
		if c.Attempt.GaveUp != NotGivenUp {
			final++
		}
	}
	if final != 1 {
		t.Fatalf("%d give-up certificates, want 1", final)
	}
}

func TestRetryPermanentAndRetryable(t *testing.T) {
	j, clk := newMemJournal(), newTestClock()
	l := New()
	l.SetClock(clk)
	in := retryIntent(t, &RetryPolicy{MaxAttempts: 5}, false)
	calls := 0
	_, err := l.Do(context.Background(), j, in, func(context.Context, string) ([]byte, error) {
		calls++
		return nil, Permanent(errors.New("400 bad request"))
	})
	if !errors.Is(err, ErrPermanent) || !errors.Is(err, ErrGaveUp) || calls != 1 {
		t.Fatalf("permanent: %v after %d calls", err, calls)
	}
	// A policy's Retryable decides.
	errTimeout := errors.New("timeout")
	in2, _ := NewIntent(Action{Tool: "t", Key: "k2", Retry: &RetryPolicy{MaxAttempts: 5, Retryable: func(err error) bool { return errors.Is(err, errTimeout) }}}, "r", 1, 0)
	calls = 0
	_, err = l.Do(context.Background(), j, in2, func(context.Context, string) ([]byte, error) {
		calls++
		if calls < 3 {
			return nil, errTimeout
		}
		return nil, errors.New("404")
	})
	if !errors.Is(err, ErrPermanent) || calls != 3 {
		t.Fatalf("Retryable: %v after %d calls", err, calls)
	}
}

func TestRetryDeadline(t *testing.T) {
	j, clk := newMemJournal(), newTestClock()
	l := New()
	l.SetClock(clk)
	in := retryIntent(t, &RetryPolicy{MaxAttempts: 100, Initial: time.Second, Multiplier: 2, Deadline: 10 * time.Second}, false)
	calls := 0
	_, err := l.Do(context.Background(), j, in, func(ctx context.Context, _ string) ([]byte, error) {
		calls++
		if _, ok := ctx.Deadline(); !ok {
			t.Error("exec's context has no deadline")
		}
		return nil, errFlaky
	})
	// Attempts at 0, 1, 3, 7 s; the next would start at 15 s > 10 s.
	if !errors.Is(err, ErrRetryDeadline) || calls != 4 {
		t.Fatalf("Do = %v after %d calls", err, calls)
	}
	// The deadline passes while the store is closed: the next Do gives up
	// once, without exec.
	j2, clk2 := newMemJournal(), newTestClock()
	l2 := New()
	l2.SetClock(clk2)
	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	_, err = l2.Do(ctx, j2, in, func(context.Context, string) ([]byte, error) { calls++; cancel(); return nil, errFlaky })
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("cancelled during the wait: %v", err)
	}
	clk2.advance(time.Hour)
	l3 := j2.recover(t, false)
	l3.SetClock(clk2)
	_, err = l3.Do(context.Background(), j2, in, func(context.Context, string) ([]byte, error) { calls++; return nil, nil })
	if !errors.Is(err, ErrRetryDeadline) || calls != 1 {
		t.Fatalf("deadline passed while closed: %v, %d calls", err, calls)
	}
	ints, certs := attemptsIn(t, j2, in.Fingerprint)
	if len(ints) != 1 || len(certs) != 2 || certs[1].Attempt.GaveUp != GaveUpDeadline || certs[1].Attempt.Number != 1 {
		t.Fatalf("intents %v certificates %d", ints, len(certs))
	}
}

// TestRetryClockBack: a wall clock moved back after a failure neither
// resets the count nor the backoff, nor makes the wait longer than one
// backoff.
func TestRetryClockBack(t *testing.T) {
	j, clk := newMemJournal(), newTestClock()
	l := New()
	l.SetClock(clk)
	in := retryIntent(t, &RetryPolicy{MaxAttempts: 3, Initial: 2 * time.Second}, false)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := l.Do(ctx, j, in, func(context.Context, string) ([]byte, error) { cancel(); return nil, errFlaky })
	if !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	clk.advance(-24 * time.Hour)
	l2 := j.recover(t, false)
	l2.SetClock(clk)
	calls := 0
	_, err = l2.Do(context.Background(), j, in, func(context.Context, string) ([]byte, error) {
		calls++
		return nil, errFlaky
	})
	if !errors.Is(err, ErrAttemptsExhausted) || calls != 2 {
		t.Fatalf("Do = %v after %d calls, want exhausted after 2 more", err, calls)
	}
	if w := clk.waits(); len(w) != 2 || w[0] != 2*time.Second || w[1] != 4*time.Second {
		t.Fatalf("waits %v, want [2s 4s]: neither reset nor stretched by the clock", w)
	}
	ints, certs := attemptsIn(t, j, in.Fingerprint)
	if fmt.Sprint(ints) != "[1 2 3]" {
		t.Fatalf("attempts %v", ints)
	}
	for i := 1; i < len(certs); i++ {
		if certs[i].Attempt.At < certs[i-1].Attempt.At {
			t.Fatalf("failure times go back: %+v then %+v", certs[i-1].Attempt, certs[i].Attempt)
		}
	}
}

// TestRetryInDoubt: an attempt left in doubt counts. An idempotent action
// goes on with the next attempt, the same key; a non-idempotent one is
// reported in doubt, and ResolveFailed counts its attempt.
func TestRetryInDoubt(t *testing.T) {
	for _, idem := range []bool{true, false} {
		t.Run(fmt.Sprint("idempotent=", idem), func(t *testing.T) {
			j, clk := newMemJournal(), newTestClock()
			l := New()
			l.SetClock(clk)
			in := retryIntent(t, &RetryPolicy{MaxAttempts: 2, Initial: time.Second}, idem)
			j.crashAfter(1) // the intent lands, the certificate does not
			if _, err := l.Do(context.Background(), j, in, func(context.Context, string) ([]byte, error) { return nil, errFlaky }); err == nil {
				t.Fatal("no error")
			}
			j.revive()
			fromTable := New()
			if err := fromTable.LoadTable(j.recover(t, false).AppendTable(nil)); err != nil {
				t.Fatal(err)
			}
			for _, l2 := range []*Ledger{j.recover(t, false), fromTable} {
				l2.SetClock(clk)
				calls := 0
				exec := func(context.Context, string) ([]byte, error) { calls++; return []byte(`1`), nil }
				if !idem {
					if _, err := l2.Do(context.Background(), j, in, exec); !errors.Is(err, ErrInDoubt) || calls != 0 {
						t.Fatalf("non-idempotent in doubt: %v", err)
					}
					continue
				}
				// Re-open the same log each time: a copy of the journal.
				jc := newMemJournal()
				jc.mu.recs = j.records()
				if res, err := l2.Do(context.Background(), jc, in, exec); err != nil || string(res) != "1" || calls != 1 {
					t.Fatalf("idempotent in doubt: %s %v %d", res, err, calls)
				}
				if ints, _ := attemptsIn(t, jc, in.Fingerprint); fmt.Sprint(ints) != "[1 2]" {
					t.Fatalf("attempts %v: the in-doubt attempt was not counted", ints)
				}
			}
			if idem {
				return
			}
			l2 := j.recover(t, false)
			l2.SetClock(clk)
			if err := l2.ResolveFailed(context.Background(), j, in, "it did not happen"); err != nil {
				t.Fatal(err)
			}
			calls := 0
			_, err := l2.Do(context.Background(), j, in, func(context.Context, string) ([]byte, error) { calls++; return nil, errFlaky })
			if !errors.Is(err, ErrAttemptsExhausted) || calls != 1 {
				t.Fatalf("after ResolveFailed: %v, %d calls (want attempt 2 only)", err, calls)
			}
			if err := l2.ResolveFailed(context.Background(), j, in, "again"); !errors.Is(err, ErrGaveUp) {
				t.Fatalf("ResolveFailed of an action given up: %v", err)
			}
		})
	}
}

// TestRetryPowerLoss cuts the journal after every number of writes of an
// attempt sequence, again and again until the action ends, rebuilding
// the ledger from the log (or from a table) each time: the attempts in
// the log count 1, 2, 3... never reset, never beyond the max, the key
// never changes, and the action ends given up once or done once.
func TestRetryPowerLoss(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	const max = 4
	for round := range 300 {
		j, clk := newMemJournal(), newTestClock()
		in := retryIntent(t, &RetryPolicy{MaxAttempts: max, Initial: time.Second, Deadline: time.Hour}, true)
		succeedAt := 1 + rng.IntN(max+2) // > max: never succeeds
		calls := 0
		var final error
		for restart := 0; ; restart++ {
			if restart > 4*max+4 {
				t.Fatalf("seed %d round %d: no end after %d restarts", seed, round, restart)
			}
			var l *Ledger
			if rng.IntN(2) == 0 {
				l = j.recover(t, false)
			} else {
				l = New()
				if err := l.LoadTable(j.recover(t, false).AppendTable(nil)); err != nil {
					t.Fatal(err)
				}
			}
			l.SetClock(clk)
			clk.advance(time.Duration(rng.IntN(3000)-1500) * time.Millisecond)
			cut := rng.IntN(2*max + 2)
			j.crashAfter(cut)
			res, err := l.Do(context.Background(), j, in, func(_ context.Context, key string) ([]byte, error) {
				if key != "idem-1" {
					t.Fatalf("key %q", key)
				}
				calls++
				if calls >= succeedAt {
					return []byte(`"ok"`), nil
				}
				return nil, errFlaky
			})
			j.revive()
			if err == nil || errors.Is(err, ErrGaveUp) {
				if err == nil && string(res) != `"ok"` {
					t.Fatalf("result %s", res)
				}
				final = err
				// Ended: is it the same after another restart?
				l2 := j.recover(t, false)
				l2.SetClock(clk)
				_, err2 := l2.Do(context.Background(), j, in, func(context.Context, string) ([]byte, error) {
					t.Fatalf("seed %d round %d: exec after the end", seed, round)
					return nil, nil
				})
				if (err == nil) != (err2 == nil) {
					t.Fatalf("seed %d round %d: ended with %v, then %v", seed, round, err, err2)
				}
				break
			}
		}
		ints, certs := attemptsIn(t, j, in.Fingerprint)
		for i, n := range ints {
			if n != uint32(i+1) {
				t.Fatalf("seed %d round %d: attempts %v reset or skipped", seed, round, ints)
			}
		}
		if len(ints) > max || calls > max {
			t.Fatalf("seed %d round %d: %d attempts, %d calls, max %d", seed, round, len(ints), calls, max)
		}
		ends := 0
		for _, c := range certs {
			if c.Status == StatusDone || (c.Attempt != nil && c.Attempt.GaveUp != NotGivenUp) {
				ends++
			}
		}
		if ends != 1 {
			t.Fatalf("seed %d round %d: %d final certificates (ended with %v)", seed, round, ends, final)
		}
	}
}

// TestRetryResolvedBeforeAnyAttempt: ResolveFailed of an action with a
// policy that was never attempted (an explicit key, no record) counts
// nothing; the next Do makes attempt 1. Resolve after a give-up certifies
// the action (it happened after all).
func TestRetryResolvedBeforeAnyAttempt(t *testing.T) {
	j, clk := newMemJournal(), newTestClock()
	l := New()
	l.SetClock(clk)
	in := retryIntent(t, &RetryPolicy{MaxAttempts: 1}, false)
	if err := l.ResolveFailed(context.Background(), j, in, "not sent"); err != nil {
		t.Fatal(err)
	}
	for _, l2 := range []*Ledger{l, j.recover(t, false)} {
		l2.SetClock(clk)
		jc := newMemJournal()
		jc.mu.recs = j.records()
		calls := 0
		_, err := l2.Do(context.Background(), jc, in, func(ctx context.Context, _ string) ([]byte, error) {
			calls++
			if n, ok := AttemptFromContext(ctx); !ok || n != 1 {
				t.Errorf("exec's context says attempt %d, %v; want 1", n, ok)
			}
			return nil, errFlaky
		})
		if !errors.Is(err, ErrAttemptsExhausted) || calls != 1 {
			t.Fatalf("Do = %v after %d calls", err, calls)
		}
		if err := l2.Resolve(context.Background(), jc, in, []byte(`"found"`)); err != nil {
			t.Fatalf("Resolve after the give-up: %v", err)
		}
		if res, err := l2.Do(context.Background(), jc, in, nil2); err != nil || string(res) != `"found"` {
			t.Fatalf("after Resolve: %s, %v", res, err)
		}
	}
}

func nil2(context.Context, string) ([]byte, error) { return nil, errors.New("exec called") }
