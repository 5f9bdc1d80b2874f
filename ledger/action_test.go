package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/zeebo/blake3"
)

func TestFingerprintUnambiguous(t *testing.T) {
	actions := []Action{
		{Tool: "a", Args: []byte(`1`), Key: "bc"},
		{Tool: "ab", Args: []byte(`1`), Key: "c"},
		{Tool: "a", Args: []byte(`"1"`), Key: "bc"},
		{Tool: "a", Args: []byte(`1`), Key: "b"},
		{Tool: "a", Args: []byte(`1`), Key: "bc\x00"},
		{Tool: "a\x00", Args: []byte(`1`), Key: "bc"},
		{Tool: "a", Args: []byte(`[1]`), Key: "bc"},
		{Tool: "a", Args: []byte(`{"x":1}`), Key: "bc"},
		{Tool: "a", Args: []byte(`{"x":1,"y":2}`), Key: "bc"},
		{Tool: "a", Args: nil, Key: "bc"},
		// Lengths that would collide if the envelope were concatenated:
		{Tool: "t", Args: []byte(`"ab"`), Key: "k"},
		{Tool: "t\"ab", Args: []byte(`null`), Key: "k"},
	}
	seen := map[Fingerprint]int{}
	for i, a := range actions {
		fp, err := a.Fingerprint()
		if err != nil {
			t.Fatalf("action %d: %v", i, err)
		}
		if j, ok := seen[fp]; ok {
			t.Fatalf("actions %d %+v and %d %+v share fingerprint %s", j, actions[j], i, a, fp)
		}
		seen[fp] = i
	}
}

func TestFingerprintEquivalence(t *testing.T) {
	tests := []struct{ a, b Action }{
		{Action{Tool: "x", Args: []byte(`{"a":1,"b":2}`), Key: "k"}, Action{Tool: "x", Args: []byte(` {"b":2.0,"a":1} `), Key: "k"}},
		{Action{Tool: "x", Args: []byte(`{"a":1,"tok":"s1"}`), Key: "k", Redact: []string{"/tok"}},
			Action{Tool: "x", Args: []byte(`{"a":1,"tok":"s2"}`), Key: "k", Redact: []string{"/tok"}}},
		{Action{Tool: "x", Args: []byte(`{"a":1}`), Key: "k", Idempotent: true}, Action{Tool: "x", Args: []byte(`{"a":1}`), Key: "k"}},
		{Action{Tool: "x", Key: "k"}, Action{Tool: "x", Args: []byte(`null`), Key: "k"}},
	}
	for i, tc := range tests {
		fa, err := tc.a.Fingerprint()
		if err != nil {
			t.Fatal(err)
		}
		fb, err := tc.b.Fingerprint()
		if err != nil {
			t.Fatal(err)
		}
		if fa != fb {
			t.Errorf("case %d: %s != %s", i, fa, fb)
		}
	}
}

// TestFingerprintEnvelope rebuilds the envelope documented in format.go by
// hand, and pins one fingerprint: a change of context, layout or canonical
// form changes every stored fingerprint, so it must be deliberate.
func TestFingerprintEnvelope(t *testing.T) {
	fp, err := Action{Tool: "email.send", Args: []byte(`{"to":"a@b.c","n":1.0}`), Key: "k1"}.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	var env []byte
	for _, field := range []string{"email.send", `{"n":1,"to":"a@b.c"}`, "k1"} {
		env = binary.LittleEndian.AppendUint64(env, uint64(len(field)))
		env = append(env, field...)
	}
	var want Fingerprint
	blake3.DeriveKey("github.com/continuumdb/continuum 2026-11-29 ledger action fingerprint v1", env, want[:])
	if fp != want {
		t.Fatalf("fingerprint %s, want %s from the documented envelope", fp, want)
	}
	const pinned = "0b0dcff223f3d3ac41561b40c1e743eefbc66ee49d1a9df1b01c461e1145a83d"
	if fp.String() != pinned {
		t.Fatalf("fingerprint %s, pinned %s (the envelope changed; if deliberate, bump its version)", fp, pinned)
	}
}

func TestFingerprintErrors(t *testing.T) {
	tests := []struct {
		a    Action
		want error
	}{
		{Action{Args: []byte(`1`), Key: "k"}, ErrNoTool},
		{Action{Tool: "t", Args: []byte(`1`)}, ErrNoKey},
		{Action{Tool: "t", Args: []byte(`{`), Key: "k"}, ErrInvalidArgs},
		{Action{Tool: "t", Args: []byte(`{"a":1,"a":2}`), Key: "k"}, ErrInvalidArgs},
		{Action{Tool: "t", Args: []byte(`{}`), Key: "k", Redact: []string{"nope"}}, ErrBadPointer},
	}
	for i, tc := range tests {
		if _, err := tc.a.Fingerprint(); !errors.Is(err, tc.want) {
			t.Errorf("case %d: %v, want %v", i, err, tc.want)
		}
	}
}

func TestDefaultKey(t *testing.T) {
	if got, want := DefaultKey("run-1", 42, 3), "ck1-5:run-1:42:3"; got != want {
		t.Fatalf("DefaultKey = %q, want %q", got, want)
	}
	// Run ids made to look like other (run, seq, index) triples.
	keys := map[string]string{}
	runs := []string{"", "a", "a:1", "a:1:2", "1:a", "ck1-1:a", "a\x00", ":", "::"}
	for _, r := range runs {
		for seq := uint64(0); seq < 12; seq++ {
			for idx := range 12 {
				k := DefaultKey(r, seq, idx)
				id := fmt.Sprintf("%q/%d/%d", r, seq, idx)
				if prev, ok := keys[k]; ok {
					t.Fatalf("DefaultKey collision %q: %s and %s", k, prev, id)
				}
				keys[k] = id
				if DefaultKey(r, seq, idx) != k {
					t.Fatalf("DefaultKey not deterministic for %s", id)
				}
			}
		}
	}
}

func TestNewIntent(t *testing.T) {
	a := Action{Tool: "pay", Args: []byte(`{"amount": 10.50, "card": {"cvc": "123", "last4": "4242"}}`),
		Redact: []string{"/card/cvc"}, Idempotent: true}
	in, err := NewIntent(a, "run", 7, 2)
	if err != nil {
		t.Fatal(err)
	}
	if in.Key != DefaultKey("run", 7, 2) {
		t.Fatalf("key %q", in.Key)
	}
	if string(in.Args) != `{"amount":10.5,"card":{"last4":"4242"}}` {
		t.Fatalf("args %s", in.Args)
	}
	a.Key = in.Key
	fp, err := a.Fingerprint()
	if err != nil || fp != in.Fingerprint {
		t.Fatalf("NewIntent fingerprint %s, Action.Fingerprint %s, %v", in.Fingerprint, fp, err)
	}
	if !in.Idempotent || in.RunID != "run" || in.Seq != 7 || in.Index != 2 || in.Tool != "pay" {
		t.Fatalf("intent %+v", in)
	}
	if err := in.CheckFingerprint(); err != nil {
		t.Fatal(err)
	}
	bad := *in
	bad.Key = "other"
	if err := bad.CheckFingerprint(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("CheckFingerprint with a changed key: %v", err)
	}
	bad = *in
	bad.Args = []byte(`{"card":{"last4":"4242"},"amount":10.5}`)
	if err := bad.CheckFingerprint(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("CheckFingerprint with non-canonical args: %v", err)
	}
	if _, err := NewIntent(Action{Args: []byte(`1`)}, "r", 1, 0); !errors.Is(err, ErrNoTool) {
		t.Fatalf("NewIntent without tool: %v", err)
	}
	if _, err := NewIntent(Action{Tool: "t", Args: []byte(`[`)}, "r", 1, 0); !errors.Is(err, ErrInvalidArgs) {
		t.Fatalf("NewIntent with bad args: %v", err)
	}
}

func TestStatusString(t *testing.T) {
	for s, want := range map[Status]string{StatusNone: "none", StatusIntent: "intent", StatusDone: "done",
		StatusFailed: "failed", StatusResolved: "resolved", Status(9): "status(9)"} {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", s, s.String(), want)
		}
	}
}

func TestInDoubtError(t *testing.T) {
	var err error = &InDoubtError{Key: "k-1", Tool: "email.send", RunID: "r", Seq: 3}
	if !errors.Is(err, ErrInDoubt) || errors.Is(err, ErrCorrupt) {
		t.Fatal("InDoubtError must match ErrInDoubt only")
	}
	for _, s := range []string{"k-1", "email.send", "Resolve", "reconcile"} {
		if !contains(err.Error(), s) {
			t.Errorf("%q does not mention %q", err, s)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestWithDefaultKey: the intent of another default-key call of the same
// action is the one NewIntent builds for that index.
func TestWithDefaultKey(t *testing.T) {
	act := Action{Tool: "email.send", Args: []byte(`{"to": "ops", "token": "s3cret"}`), Redact: []string{"/token"}}
	in, err := NewIntent(act, "run-1", 7, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []uint32{0, 1, 5} {
		want, err := NewIntent(act, "run-1", 7, i)
		if err != nil {
			t.Fatal(err)
		}
		got := in.WithDefaultKey(i)
		if got.Fingerprint != want.Fingerprint || got.Key != want.Key || got.Index != want.Index || string(got.Args) != string(want.Args) {
			t.Errorf("index %d: %+v, want %+v", i, got, want)
		}
	}
	if in.Key != DefaultKey("run-1", 7, 0) {
		t.Errorf("WithDefaultKey changed its receiver: key %q", in.Key)
	}
}

// TestCompensationFingerprint: a compensation is part of the fingerprint
// (so the chain, which covers fingerprints, covers what undoes an action),
// an action without one keeps the fingerprint it always had, NewIntent
// and Fingerprint agree, the record round-trips and CheckFingerprint
// passes, and a compensation that cannot be recorded is refused.
func TestCompensationFingerprint(t *testing.T) {
	plain := Action{Tool: "pay", Args: []byte(`{"eur": 5, "card":"x"}`), Key: "k", Redact: []string{"/card"}}
	undo := plain
	undo.Compensate = &Action{Tool: "refund", Args: []byte(`{"eur":5,"token":"s"}`), Redact: []string{"/token"}}
	other := plain
	other.Compensate = &Action{Tool: "refund", Args: []byte(`{"eur":6}`)}
	keyed := plain
	keyed.Compensate = &Action{Tool: "refund", Args: []byte(`{"eur":5}`), Key: "r-1"}

	fp := func(a Action) Fingerprint {
		t.Helper()
		f, err := a.Fingerprint()
		if err != nil {
			t.Fatal(err)
		}
		in, err := NewIntent(a, "run", 1, 0)
		if err != nil || in.Fingerprint != f {
			t.Fatalf("NewIntent: %v, fingerprint %s, Fingerprint %s", err, in.Fingerprint, f)
		}
		back, err := DecodeIntent(AppendIntent(nil, in))
		if err != nil {
			t.Fatal(err)
		}
		if err := back.CheckFingerprint(); err != nil {
			t.Fatalf("%s: %v", a.Tool, err)
		}
		if (back.Compensation == nil) != (a.Compensate == nil) {
			t.Fatalf("compensation lost: %+v", back)
		}
		return f
	}
	base := fingerprintOf("pay", []byte(`{"eur":5}`), "k", nil)
	if got := fp(plain); got != base {
		t.Fatalf("an action without a compensation changed fingerprint: %s, want %s", got, base)
	}
	seen := map[Fingerprint]string{base: "plain"}
	for name, a := range map[string]Action{"undo": undo, "other": other, "keyed": keyed} {
		f := fp(a)
		if prev, dup := seen[f]; dup {
			t.Fatalf("%s and %s have one fingerprint", name, prev)
		}
		seen[f] = name
	}
	in, _ := NewIntent(undo, "run", 1, 0)
	if c := in.Compensation; string(c.Args) != `{"eur":5}` || c.Key != "" {
		t.Fatalf("compensation recorded as %+v: its secret must be redacted, its key left to the default", c)
	}
	if k := CompensationKey(in.Fingerprint); k != "ckc1-"+in.Fingerprint.String() {
		t.Fatalf("CompensationKey = %q", k)
	}
	// Tampering with the recorded compensation is a fingerprint mismatch.
	in.Compensation.Tool = "nothing"
	if err := in.CheckFingerprint(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("changed compensation: %v, want ErrCorrupt", err)
	}

	for name, c := range map[string]*Action{
		"no tool":      {Args: []byte(`{}`)},
		"nested":       {Tool: "u", Compensate: &Action{Tool: "v"}},
		"bad args":     {Tool: "u", Args: []byte(`{`)},
		"redactresult": {Tool: "u", RedactResult: []string{"/x"}},
	} {
		a := plain
		a.Compensate = c
		if _, err := a.Fingerprint(); !errors.Is(err, ErrBadCompensation) {
			t.Errorf("%s: Fingerprint: %v, want ErrBadCompensation", name, err)
		}
		if _, err := NewIntent(a, "run", 1, 0); !errors.Is(err, ErrBadCompensation) {
			t.Errorf("%s: NewIntent: %v, want ErrBadCompensation", name, err)
		}
	}
}

// TestCompensationIntent: the intent a rollback runs a compensation with
// has the default key CompensationKey(undone) or the agent's, a
// fingerprint that covers the undone action (so it is never an ordinary
// action's), and it round-trips.
func TestCompensationIntent(t *testing.T) {
	undone := Fingerprint{1, 2, 3}
	c := &Compensation{Tool: "refund", Args: []byte(`{"eur":5}`), Idempotent: true}
	in, err := CompensationIntent(c, undone, "run", 7, 0)
	if err != nil {
		t.Fatal(err)
	}
	if in.Key != CompensationKey(undone) || in.Undoes != undone || !in.Idempotent || in.Compensation != nil {
		t.Fatalf("compensation intent %+v", in)
	}
	if in.Fingerprint != CompensationFingerprint(c, undone) {
		t.Fatal("CompensationFingerprint differs from the intent's")
	}
	plain, _ := Action{Tool: "refund", Args: c.Args, Key: in.Key}.Fingerprint()
	if plain == in.Fingerprint {
		t.Fatal("a compensation has the fingerprint of the same call made as an ordinary action")
	}
	other, _ := CompensationIntent(c, Fingerprint{9}, "run", 7, 0)
	if other.Fingerprint == in.Fingerprint {
		t.Fatal("compensations of two actions share a fingerprint")
	}
	back, err := DecodeIntent(AppendIntent(nil, in))
	if err != nil || back.Undoes != undone || back.CheckFingerprint() != nil {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	keyed, _ := CompensationIntent(&Compensation{Tool: "refund", Key: "mine"}, undone, "run", 7, 0)
	if keyed.Key != "mine" {
		t.Fatalf("explicit key replaced: %q", keyed.Key)
	}
	if _, err := CompensationIntent(c, Fingerprint{}, "run", 7, 0); !errors.Is(err, ErrBadCompensation) {
		t.Fatalf("compensation of the zero fingerprint: %v", err)
	}
}
