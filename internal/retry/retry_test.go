package retry

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		p  Policy
		ok bool
	}{
		{Policy{MaxAttempts: 3}, true},
		{Policy{Deadline: time.Minute}, true},
		{Policy{}, false},
		{Policy{MaxAttempts: 3, Initial: -1}, false},
		{Policy{MaxAttempts: 3, Max: -1}, false},
		{Policy{MaxAttempts: 3, Deadline: -1}, false},
		{Policy{MaxAttempts: 3, Multiplier: 0.5}, false},
		{Policy{MaxAttempts: 3, Multiplier: math.NaN()}, false},
		{Policy{MaxAttempts: 3, Multiplier: math.Inf(1)}, false},
		{Policy{MaxAttempts: 3, Multiplier: 1}, true},
		{Policy{MaxAttempts: 3, Multiplier: MaxMultiplier}, true},
	} {
		err := tc.p.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadPolicy)) {
			t.Errorf("%+v: Validate = %v, want ok=%v", tc.p, err, tc.ok)
		}
	}
}

func TestBackoff(t *testing.T) {
	p := Policy{MaxAttempts: 10, Initial: 100 * time.Millisecond, Multiplier: 3, Max: 2 * time.Second}
	want := []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, 900 * time.Millisecond, 2 * time.Second, 2 * time.Second}
	for n, w := range want {
		if got := p.Backoff(uint32(n)); got != w {
			t.Errorf("Backoff(%d) = %v, want %v", n, got, w)
		}
	}
	// No cap: saturates at the largest duration, never overflows.
	q := Policy{MaxAttempts: 0, Deadline: time.Hour, Initial: time.Hour, Multiplier: MaxMultiplier}
	for _, n := range []uint32{1, 2, 10, 1000, math.MaxUint32} {
		if got := q.Backoff(n); got <= 0 {
			t.Errorf("Backoff(%d) = %v, want > 0", n, got)
		}
	}
	if got := (Policy{MaxAttempts: 3}).Backoff(5); got != 0 {
		t.Errorf("no initial: Backoff = %v, want 0", got)
	}
}

func TestNextAndAfterFailure(t *testing.T) {
	p := Policy{MaxAttempts: 3, Initial: time.Second, Multiplier: 2, Deadline: 10 * time.Second}
	// Before the first attempt: at once.
	if d := p.Next(State{}, t0); d.GiveUp != None || d.Wait != 0 || d.Attempt != 1 {
		t.Fatalf("first: %+v", d)
	}
	s := State{Attempts: 1, First: t0, Last: t0}
	next, r := p.AfterFailure(s, t0.Add(500*time.Millisecond))
	if r != None || !next.Equal(t0.Add(1500*time.Millisecond)) {
		t.Fatalf("after attempt 1: %v %v", next, r)
	}
	s.Last, s.NotBefore = t0.Add(500*time.Millisecond), next
	if d := p.Next(s, t0.Add(time.Second)); d.Wait != 500*time.Millisecond || d.Attempt != 2 {
		t.Fatalf("wait: %+v", d)
	}
	// A clock moved back an hour: the wait is not longer than one backoff,
	// and not reset to zero.
	if d := p.Next(s, t0.Add(-time.Hour)); d.Wait != time.Second || d.Attempt != 2 {
		t.Fatalf("clock back: %+v", d)
	}
	// Past the deadline.
	if d := p.Next(s, t0.Add(11*time.Second)); d.GiveUp != Deadline {
		t.Fatalf("deadline: %+v", d)
	}
	// The next start would be after the deadline: given up at once.
	s2 := State{Attempts: 2, First: t0, Last: t0.Add(9 * time.Second)}
	if _, r := p.AfterFailure(s2, t0.Add(9*time.Second)); r != Deadline {
		t.Fatalf("next after deadline: %v", r)
	}
	// Out of attempts.
	if _, r := p.AfterFailure(State{Attempts: 3, First: t0}, t0); r != Exhausted {
		t.Fatalf("exhausted: %v", r)
	}
	if d := p.Next(State{Attempts: 3, First: t0}, t0); d.GiveUp != Exhausted {
		t.Fatalf("exhausted: %+v", d)
	}
}

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.now = c.now.Add(d)
	return ctx.Err()
}

// TestScheduleNeverExceeds drives the schedule with a clock that jumps
// back and forth and checks attempts never exceed the bound and the
// deadline is respected as the records see it.
func TestScheduleNeverExceeds(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rnd := uint64(seed)
	step := func() int64 { rnd ^= rnd << 13; rnd ^= rnd >> 7; rnd ^= rnd << 17; return int64(rnd % 4000) }
	for round := 0; round < 200; round++ {
		p := Policy{MaxAttempts: uint32(1 + step()%6), Initial: time.Duration(step()) * time.Millisecond, Deadline: time.Duration(step()*3) * time.Millisecond}
		c := &fakeClock{now: t0}
		var s State
		for {
			c.now = c.now.Add(time.Duration(step()-2000) * time.Millisecond) // back or forth
			d := p.Next(s, c.now)
			if d.GiveUp != None {
				break
			}
			if d.Wait > p.Backoff(s.Attempts) {
				t.Fatalf("seed %d: wait %v beyond one backoff %v", seed, d.Wait, p.Backoff(s.Attempts))
			}
			_ = c.Sleep(context.Background(), d.Wait)
			start := floor(s, c.now)
			if s.Attempts == 0 {
				s.First = start
			} else if p.Deadline > 0 && !start.Before(s.First.Add(p.Deadline)) {
				t.Fatalf("seed %d: attempt %d starts at %v, after the deadline %v", seed, d.Attempt, start, s.First.Add(p.Deadline))
			}
			s.Attempts, s.Last = d.Attempt, start
			if s.Attempts > p.MaxAttempts {
				t.Fatalf("seed %d: %d attempts, max %d", seed, s.Attempts, p.MaxAttempts)
			}
			next, r := p.AfterFailure(s, c.now)
			if r != None {
				break
			}
			s.Last, s.NotBefore = floor(s, c.now), next
		}
	}
}

func TestWallSleepCancels(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (Wall{}).Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep = %v", err)
	}
}
