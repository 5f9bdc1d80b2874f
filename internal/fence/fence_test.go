package fence

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestExecLate: an exec's context carries the token; what it returns
// after its lease's channel closed, or after the bound, is late, and its
// context says why.
func TestExecLate(t *testing.T) {
	ctx := context.Background()
	f := &Fence{Token: 7}
	_, _, late := f.Exec(ctx, nil, "k", func(ctx context.Context, key string) ([]byte, error) {
		if tok, ok := Token(ctx); !ok || tok != 7 || key != "k" {
			t.Errorf("exec got token %d %v, key %q", tok, ok, key)
		}
		return nil, nil
	})
	if late != nil || f.Fenced() {
		t.Fatalf("a token-only fence: late %v, fenced %v", late, f.Fenced())
	}

	lost := make(chan struct{})
	f = &Fence{Lost: func() <-chan struct{} { return lost }}
	_, _, late = f.Exec(ctx, f.LostNow(), "k", func(ctx context.Context, _ string) ([]byte, error) {
		close(lost)
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), ErrLeaseLost) || !errors.Is(ctx.Err(), ErrLeaseLost) {
			t.Errorf("cause %v, err %v: want ErrLeaseLost", context.Cause(ctx), ctx.Err())
		}
		return []byte("done"), nil
	})
	if !errors.Is(late, ErrLeaseLost) || f.Holds(lost) {
		t.Fatalf("lease lost during exec: late %v, holds %v", late, f.Holds(lost))
	}

	f = &Fence{CallBound: time.Millisecond}
	_, _, late = f.Exec(ctx, nil, "k", func(ctx context.Context, _ string) ([]byte, error) {
		if d, ok := ctx.Deadline(); !ok || d.IsZero() {
			t.Error("no deadline at the call's bound")
		}
		<-ctx.Done()
		return nil, nil
	})
	if !errors.Is(late, ErrCallBound) {
		t.Fatalf("past the bound: late %v, want ErrCallBound", late)
	}

	held := false
	f = &Fence{Held: func() bool { return held }}
	if f.Holds(nil) {
		t.Fatal("Holds ignores Held")
	}
}

// TestWait: Wait returns at the time, when the lease is lost, or with
// ctx's cause; a zero or past time does not wait.
func TestWait(t *testing.T) {
	ctx := context.Background()
	if err := Wait(ctx, time.Time{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := Wait(ctx, time.Now().Add(time.Millisecond), nil); err != nil {
		t.Fatal(err)
	}
	lost := make(chan struct{})
	close(lost)
	if err := Wait(ctx, time.Now().Add(time.Hour), lost); err != nil {
		t.Fatalf("a lost lease: %v", err)
	}
	cause := errors.New("stop")
	cctx, cancel := context.WithCancelCause(ctx)
	cancel(cause)
	if err := Wait(cctx, time.Now().Add(time.Hour), nil); !errors.Is(err, cause) {
		t.Fatalf("ctx ended: %v, want its cause", err)
	}
}

type holder struct{ f Fence }

func (h holder) Fence() Fence { return h.f }

// TestOpen: a Holder's Fence as it is; without one, the log's end at Open
// as the token, which grows from one Open to the next.
func TestOpen(t *testing.T) {
	if f := Open(holder{Fence{Token: 9, CallBound: time.Second}}, 5, 100); f.Token != 9 || f.CallBound != time.Second {
		t.Errorf("Holder: %+v", f)
	}
	if f := Open(nil, 2, 7); f.Token != 2<<32|7 || f.Fenced() {
		t.Errorf("local: %+v fenced %v", f, f.Fenced())
	}
	if a, b := Open(struct{}{}, 1, 1<<31), Open(nil, 2, 0); a.Token >= b.Token {
		t.Errorf("local tokens %d then %d do not grow", a.Token, b.Token)
	}
}
