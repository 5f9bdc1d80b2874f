package settle

import (
	"errors"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/ledger"
)

var (
	errNot = errors.New("not in doubt")
	errAmb = errors.New("ambiguous")
	errs   = Errors{NotInDoubt: errNot, Ambiguous: errAmb}
)

func TestDefaultKey(t *testing.T) {
	act := ledger.Action{Tool: "pay", Args: []byte(`{"n":1}`)}
	in0, err := ledger.NewIntent(act, "r", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := func(i uint32) (*ledger.Intent, error) { return in0.WithDefaultKey(i), nil }
	loc := ledger.Loc{Segment: 1, Offset: 10}
	for _, tc := range []struct {
		name     string
		inDoubt  []uint32 // indexes whose intents the ledger holds in doubt
		done     []uint32 // indexes certified
		from     uint32   // the index of the call Resolve was given
		want     uint32
		wantErr  error
		wantText string
	}{
		{name: "one", inDoubt: []uint32{1}, from: 2, want: 1},
		{name: "the given one", inDoubt: []uint32{2}, from: 2, want: 2},
		{name: "certified ones do not count", inDoubt: []uint32{2}, done: []uint32{0, 1}, from: 2, want: 2},
		{name: "none", done: []uint32{0}, from: 2, wantErr: errNot, wantText: "calls 0..2 checked"},
		{name: "two", inDoubt: []uint32{0, 2}, from: 2, wantErr: errAmb, wantText: "keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := ledger.New()
			for _, i := range tc.inDoubt {
				l.ApplyIntent(in0.WithDefaultKey(i), loc)
			}
			for _, i := range tc.done {
				in := in0.WithDefaultKey(i)
				l.ApplyIntent(in, loc)
				l.ApplyCertificate(&ledger.Certificate{Fingerprint: in.Fingerprint, RunID: "r", Seq: 3, Status: ledger.StatusDone}, loc, true)
			}
			got, err := DefaultKey("r", 3, in0.WithDefaultKey(tc.from), 2, at, l, errs)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantText) || !strings.Contains(err.Error(), `run "r" seq 3`) {
					t.Fatalf("DefaultKey = %v, %v; want %v naming the run and %q", got, err, tc.wantErr, tc.wantText)
				}
				return
			}
			if err != nil || got.Index != tc.want || got.Fingerprint != in0.WithDefaultKey(tc.want).Fingerprint {
				t.Fatalf("DefaultKey = %+v, %v; want index %d", got, err, tc.want)
			}
		})
	}
	boom := errors.New("boom")
	if _, err := DefaultKey("r", 3, in0, 1, func(uint32) (*ledger.Intent, error) { return nil, boom }, ledger.New(), errs); !errors.Is(err, boom) {
		t.Fatalf("DefaultKey with a failing intent: %v", err)
	}
}

func TestInDoubt(t *testing.T) {
	in, err := ledger.NewIntent(ledger.Action{Tool: "pay", Args: []byte(`1`), Key: "k"}, "r", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := &ledger.InDoubtError{Fingerprint: in.Fingerprint, RunID: "r", Seq: 1, Tool: "pay", Key: "k"}
	l := ledger.New()
	if _, err := InDoubt(e, l, errs); !errors.Is(err, errNot) {
		t.Fatalf("InDoubt of an unknown action: %v", err)
	}
	l.ApplyIntent(in, ledger.Loc{Segment: 1})
	got, err := InDoubt(e, l, errs)
	if err != nil || got.Fingerprint != in.Fingerprint || got.Key != "k" || got.RunID != "r" {
		t.Fatalf("InDoubt = %+v, %v", got, err)
	}
}

func TestNames(t *testing.T) {
	none := func(string) bool { return false }
	e := &ledger.InDoubtError{RunID: "r", Seq: 2, Key: "k"}
	for _, tc := range []struct {
		e     *ledger.InDoubtError
		run   string
		seq   uint64
		other func(string) bool
		ok    bool
	}{
		{e, "r", 2, none, true},
		{nil, "r", 2, none, false},
		{e, "s", 2, none, false},
		{e, "r", 3, none, false},
		{e, "r", 2, func(k string) bool { return k == "k" }, false},
	} {
		if err := Names(tc.e, tc.run, tc.seq, tc.other, errs); (err == nil) != tc.ok || (err != nil && !errors.Is(err, errNot)) {
			t.Errorf("Names(%+v, %q, %d) = %v, want ok %v", tc.e, tc.run, tc.seq, err, tc.ok)
		}
	}
}
