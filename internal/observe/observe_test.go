package observe

import (
	"errors"
	"fmt"
	"testing"

	"github.com/continuumdb/continuum/ledger"
)

func TestOutcomes(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		ran  bool
		err  error
		want Outcome
	}{
		{true, nil, Executed},
		{false, nil, Cached},
		{false, fmt.Errorf("wrapped: %w", ledger.ErrInDoubt), InDoubt},
		{true, fmt.Errorf("wrapped: %w", ledger.ErrGaveUp), GaveUp},
		{true, boom, Failed},
	} {
		if got := OfDo(tc.ran, tc.err); got != tc.want {
			t.Errorf("OfDo(%v, %v) = %v, want %v", tc.ran, tc.err, got, tc.want)
		}
	}
	if OfResolve(Resolved, nil) != Resolved || OfResolve(ResolvedFailed, boom) != Failed {
		t.Error("OfResolve")
	}
	want := map[Outcome]string{0: "ActionOutcome(0)", Executed: "executed", Cached: "cached", InDoubt: "in_doubt", Failed: "failed",
		Resolved: "resolved", ResolvedFailed: "resolved_failed", GaveUp: "gave_up", 8: "ActionOutcome(8)"}
	for o, s := range want {
		if o.String() != s {
			t.Errorf("Outcome(%d).String() = %q, want %q", o, o.String(), s)
		}
	}
}
