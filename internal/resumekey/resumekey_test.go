package resumekey

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
)

// fakeLedger holds entries and the intents at their locations.
type fakeLedger struct {
	entries map[ledger.Fingerprint]ledger.Entry
	intents map[ledger.Loc]*ledger.Intent
	readErr error
}

func (l *fakeLedger) Lookup(fp ledger.Fingerprint) (ledger.Entry, bool) {
	e, ok := l.entries[fp]
	return e, ok
}

func (l *fakeLedger) Intent(loc ledger.Loc) (*ledger.Intent, error) {
	if l.readErr != nil {
		return nil, l.readErr
	}
	return l.intents[loc], nil
}

func intent(t *testing.T, tool, key string) *ledger.Intent {
	t.Helper()
	in, err := ledger.NewIntent(ledger.Action{Tool: tool, Args: []byte(`{}`), Key: key}, "run", 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestCheck(t *testing.T) {
	newCall := intent(t, "charge", "")
	oldCall := intent(t, "refund", "") // same default key, another action
	explicit := intent(t, "mail", "my-key")
	loc, loc2 := ledger.Loc{Segment: 1, Offset: 10}, ledger.Loc{Segment: 1, Offset: 20}
	l := &fakeLedger{
		entries: map[ledger.Fingerprint]ledger.Entry{},
		intents: map[ledger.Loc]*ledger.Intent{loc: oldCall, loc2: explicit},
	}
	olds := []layout.InflightAction{{Index: 1, FP: oldCall.Fingerprint}}

	// No earlier call at the index, or only the same call: unchanged.
	if use, old, err := Check(newCall, nil, l); use != newCall || old != nil || err != nil {
		t.Fatalf("no olds: %v %v %v", use, old, err)
	}
	if use, old, err := Check(newCall, []layout.InflightAction{{Index: 1, FP: newCall.Fingerprint}}, l); use != newCall || old != nil || err != nil {
		t.Fatalf("same call: %v %v %v", use, old, err)
	}
	// The old call unknown to the ledger: unchanged.
	if use, _, _ := Check(newCall, olds, l); use != newCall {
		t.Fatal("an old call without an entry changed the key")
	}
	// In doubt: refused, naming the old call.
	l.entries[oldCall.Fingerprint] = ledger.Entry{Status: ledger.StatusIntent, IntentLoc: loc}
	use, old, err := Check(newCall, olds, l)
	if use != nil || err != nil || old == nil || old.Tool != "refund" || old.Key != oldCall.Key || old.Fingerprint != oldCall.Fingerprint {
		t.Fatalf("in doubt: %v %+v %v", use, old, err)
	}
	// The same call in doubt at another index: not this call's.
	if use, old, err := Check(newCall, []layout.InflightAction{{Index: 0, FP: oldCall.Fingerprint}}, l); use != newCall || old != nil || err != nil {
		t.Fatalf("another index: %v %v %v", use, old, err)
	}
	// Its exec running: not refused; the new call takes another key.
	l.entries[oldCall.Fingerprint] = ledger.Entry{Status: ledger.StatusIntent, IntentLoc: loc, InFlight: true}
	if use, old, _ := Check(newCall, olds, l); use == nil || use.Key != ReplacementKey(newCall) || old != nil {
		t.Fatalf("in flight: %v %v", use, old)
	}
	// Settled: the replacement key, at the same index.
	l.entries[oldCall.Fingerprint] = ledger.Entry{Status: ledger.StatusDone, IntentLoc: loc}
	use, old, err = Check(newCall, olds, l)
	if err != nil || old != nil || use == newCall || use.Key != ReplacementKey(newCall) || use.Index != newCall.Index {
		t.Fatalf("settled: %+v %v %v", use, old, err)
	}
	// The replacement called again: the ledger's rules apply.
	if use2, _, _ := Check(newCall, []layout.InflightAction{{Index: 1, FP: use.Fingerprint}}, l); use2 != newCall {
		t.Fatal("the replacement's own call was taken for another")
	}
	// An explicit key numbers no call.
	l.entries[explicit.Fingerprint] = ledger.Entry{Status: ledger.StatusIntent, IntentLoc: loc2}
	if use, old, _ := Check(newCall, []layout.InflightAction{{Index: 1, FP: explicit.Fingerprint}}, l); use != newCall || old != nil {
		t.Fatalf("explicit key: %v %v", use, old)
	}
	// A log that cannot be read: the error names the call.
	l.readErr = errors.New("disk gone")
	if _, _, err := Check(newCall, olds, l); !errors.Is(err, l.readErr) {
		t.Fatalf("read error: %v", err)
	}
}

// TestDescribe: the text names the run, the seq, the index, both tools and
// the old call's key, and how to settle it.
func TestDescribe(t *testing.T) {
	got := Describe("r1", 7, 2, "email.send", "sms.send", "r1/7/2")
	for _, want := range []string{`run "r1" seq 7`, `call 2 is "sms.send"`, `call 2, "email.send" with key "r1/7/2"`, "ResolveInDoubtFailed"} {
		if !strings.Contains(got, want) {
			t.Errorf("Describe: %q lacks %q", got, want)
		}
	}
}

// TestFailed: a run's failed calls are kept per seq: Note adds them
// once each, another seq's Note replaces them, At gives none of another
// seq, and Committed of their seq (only) forgets them.
func TestFailed(t *testing.T) {
	a := layout.InflightAction{Index: 0, FP: ledger.Fingerprint{1}}
	b := layout.InflightAction{Index: 1, FP: ledger.Fingerprint{2}}
	var f Failed
	if f.At(1) != nil {
		t.Fatal("the zero Failed holds calls")
	}
	f.Note(1, []layout.InflightAction{a})
	f.Note(1, []layout.InflightAction{a, b}) // a second failed attempt of seq 1
	if got := f.At(1); !slices.Equal(got, []layout.InflightAction{a, b}) {
		t.Fatalf("At(1) = %v, want a and b once each", got)
	}
	if f.At(2) != nil {
		t.Fatal("seq 1's calls given for seq 2")
	}
	f.Committed(2)
	if len(f.At(1)) != 2 {
		t.Fatal("another seq's commit forgot seq 1's calls")
	}
	f.Committed(1)
	if f.At(1) != nil {
		t.Fatal("seq 1's calls kept after it committed")
	}
	f.Note(1, []layout.InflightAction{a})
	f.Note(2, []layout.InflightAction{b})
	if f.At(1) != nil || !slices.Equal(f.At(2), []layout.InflightAction{b}) {
		t.Fatalf("a Note of seq 2 after seq 1: At(1) %v, At(2) %v", f.At(1), f.At(2))
	}
}
