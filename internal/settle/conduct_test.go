package settle

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/ledger"
)

// fakeAtom is an Atom of run "r" seq 3 over a ledger, recording the
// steps settling takes.
type fakeAtom struct {
	l         *ledger.Ledger
	last      uint32
	other     string // a key of another branch
	prepErr   error
	readyErr  error
	waitErr   error
	settleErr error
	steps     []string
	settled   *ledger.Intent
	done      []byte
}

func (f *fakeAtom) ID() string  { return "r" }
func (f *fakeAtom) Seq() uint64 { return 3 }
func (f *fakeAtom) Prepare(_ context.Context, act ledger.Action) (*ledger.Intent, error) {
	f.steps = append(f.steps, "prepare")
	if f.prepErr != nil {
		return nil, f.prepErr
	}
	return ledger.NewIntent(act, "r", 3, f.last)
}
func (f *fakeAtom) Last() uint32 { f.steps = append(f.steps, "last"); return f.last }
func (f *fakeAtom) Intent(_ context.Context, in *ledger.Intent, i uint32) (*ledger.Intent, error) {
	return in.WithDefaultKey(i), nil
}
func (f *fakeAtom) Other(key string) bool { return key == f.other }
func (f *fakeAtom) Ready(context.Context) error {
	f.steps = append(f.steps, "ready")
	return f.readyErr
}
func (f *fakeAtom) Ledger() *ledger.Ledger { return f.l }
func (f *fakeAtom) WaitInDoubt(context.Context, *ledger.Intent) error {
	f.steps = append(f.steps, "wait")
	return f.waitErr
}
func (f *fakeAtom) Settle(_ context.Context, in *ledger.Intent, result []byte, failed *string) error {
	step := "settle " + string(result)
	if failed != nil {
		step = "settle failed " + *failed
	}
	f.steps = append(f.steps, step)
	f.settled = in
	return f.settleErr
}
func (f *fakeAtom) Done(_ *ledger.Intent, result []byte) {
	f.steps = append(f.steps, "done")
	f.done = result
}

func TestResolve(t *testing.T) {
	act := ledger.Action{Tool: "pay", Args: []byte(`{"n":1}`)}
	in0, err := ledger.NewIntent(act, "r", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	reason, boom := "gone", errors.New("boom")
	for _, tc := range []struct {
		name    string
		f       fakeAtom
		act     ledger.Action
		failed  *string
		steps   string
		want    uint32 // the index settled
		wantErr error
		text    string
	}{
		{name: "default key", f: fakeAtom{last: 2}, act: act, steps: "prepare last settle ok done", want: 1},
		{name: "default key failed", f: fakeAtom{last: 2}, act: act, failed: &reason, steps: "prepare last wait settle failed gone", want: 1},
		{name: "explicit key", f: fakeAtom{last: 2}, act: ledger.Action{Tool: "pay", Args: []byte(`1`), Key: "k"}, steps: "prepare settle ok done"},
		{name: "none in doubt", f: fakeAtom{last: 0}, act: act, steps: "prepare last", wantErr: errNot},
		{name: "refused by prepare", f: fakeAtom{prepErr: boom}, act: act, steps: "prepare", wantErr: boom},
		{name: "the wait fails", f: fakeAtom{last: 2, waitErr: boom}, act: act, failed: &reason, steps: "prepare last wait",
			wantErr: boom, text: `engine: resolve "pay" (key "` + in0.WithDefaultKey(1).Key + `") in run "r" seq 3 as failed: boom`},
		{name: "the ledger fails", f: fakeAtom{last: 2, settleErr: boom}, act: act, steps: "prepare last settle ok",
			wantErr: boom, text: `engine: resolve "pay" (key "` + in0.WithDefaultKey(1).Key + `") in run "r" seq 3: boom`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			f.l = ledger.New()
			f.l.ApplyIntent(in0.WithDefaultKey(1), ledger.Loc{Segment: 1})
			result := []byte("ok")
			err := Resolve(context.Background(), &f, tc.act, result, tc.failed, errs)
			if got := strings.Join(f.steps, " "); got != tc.steps {
				t.Errorf("steps %q, want %q", got, tc.steps)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || (tc.text != "" && err.Error() != tc.text) {
					t.Fatalf("Resolve: %v, want %v %q", err, tc.wantErr, tc.text)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.act.Key == "" && f.settled.Fingerprint != in0.WithDefaultKey(tc.want).Fingerprint {
				t.Errorf("settled %+v, want index %d", f.settled, tc.want)
			}
			if tc.failed == nil {
				result[0] = 'X' // the caller's buffer
				if string(f.done) != "ok" {
					t.Errorf("the atom keeps the caller's result: %s", f.done)
				}
			}
		})
	}
}

func TestResolveInDoubt(t *testing.T) {
	in, err := ledger.NewIntent(ledger.Action{Tool: "pay", Args: []byte(`1`), Key: "k"}, "r", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := &ledger.InDoubtError{Fingerprint: in.Fingerprint, RunID: "r", Seq: 3, Tool: "pay", Key: "k"}
	reason, boom := "gone", errors.New("boom")
	for _, tc := range []struct {
		name    string
		f       fakeAtom
		e       *ledger.InDoubtError
		failed  *string
		steps   string
		wantErr error
	}{
		{name: "done", e: e, steps: "ready settle ok done"},
		{name: "failed", e: e, failed: &reason, steps: "ready wait settle failed gone"},
		{name: "another atom's", e: &ledger.InDoubtError{RunID: "r", Seq: 4, Key: "k"}, wantErr: errNot},
		{name: "another branch's", f: fakeAtom{other: "k"}, e: e, wantErr: errNot},
		{name: "the atom is done", f: fakeAtom{readyErr: boom}, e: e, steps: "ready", wantErr: boom},
		{name: "no longer in doubt", e: &ledger.InDoubtError{RunID: "r", Seq: 3, Key: "j", Tool: "pay"}, steps: "ready", wantErr: errNot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			f.l = ledger.New()
			f.l.ApplyIntent(in, ledger.Loc{Segment: 1})
			err := ResolveInDoubt(context.Background(), &f, tc.e, []byte("ok"), tc.failed, errs)
			if got := strings.Join(f.steps, " "); got != tc.steps {
				t.Errorf("steps %q, want %q", got, tc.steps)
			}
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("ResolveInDoubt: %v, want %v", err, tc.wantErr)
			}
			if err == nil && f.settled.Fingerprint != in.Fingerprint {
				t.Errorf("settled %+v", f.settled)
			}
		})
	}
}
