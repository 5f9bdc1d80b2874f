package workload

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRunID(t *testing.T) {
	for _, tc := range []struct {
		i    int
		want string
	}{
		{0, "run-00000"},
		{7, "run-00007"},
		{99999, "run-99999"},
		{123456, "run-123456"},
	} {
		if got := RunID(tc.i); got != tc.want {
			t.Errorf("RunID(%d) = %q, want %q", tc.i, got, tc.want)
		}
	}
	if !(RunID(9) < RunID(10)) {
		t.Errorf("RunID(9) = %q does not sort before RunID(10) = %q", RunID(9), RunID(10))
	}
}

// TestScriptDeterministic checks that Script is a pure function: equal
// inputs give byte-identical atoms, from fresh calls interleaved with
// others (no hidden state carried between calls).
func TestScriptDeterministic(t *testing.T) {
	for _, tc := range []struct {
		run  string
		seq  uint64
		seed int64
	}{
		{"run-00000", 1, 1},
		{"run-00000", 2, 1},
		{"run-00063", 50, 1},
		{"run-00001", 1 << 40, -5},
		{"", 0, 0},
	} {
		a := Script(tc.run, tc.seq, tc.seed)
		_ = Script("other", tc.seq+1, tc.seed+1) // must not disturb the next call
		b := Script(tc.run, tc.seq, tc.seed)
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("Script(%q, %d, %d) differs between calls (-first +second):\n%s", tc.run, tc.seq, tc.seed, diff)
		}
		if a.Run != tc.run || a.Seq != tc.seq {
			t.Errorf("Script(%q, %d, %d) = atom of run %q seq %d", tc.run, tc.seq, tc.seed, a.Run, a.Seq)
		}
	}
}

// TestScriptVaries checks that each input of Script matters: a different
// run, seq or seed gives a different atom.
func TestScriptVaries(t *testing.T) {
	base := Script("run-00000", 5, 1)
	for _, other := range []Atom{
		Script("run-00001", 5, 1),
		Script("run-00000", 6, 1),
		Script("run-00000", 5, 2),
	} {
		if bytes.Equal(base.Args, other.Args) || base.Thought == other.Thought {
			t.Errorf("atom %s/%d has the same args or thought as %s/%d", other.Run, other.Seq, base.Run, base.Seq)
		}
	}
}

// TestScriptGolden pins the exact bytes of a few atoms: the SIGKILL harness
// and crash tests compare what a restarted process writes against what an
// earlier build wrote, so any change to the script (or to agenttext under
// it) must be deliberate. Update the digest only together with every
// recorded crash corpus.
func TestScriptGolden(t *testing.T) {
	h := sha256.New()
	for _, run := range []string{RunID(0), RunID(1)} {
		for seq := uint64(1); seq <= 12; seq++ {
			a := Script(run, seq, 42)
			fmt.Fprintf(h, "%s|%d|%s|%s|%t|%s|%s|%s|%s|%s|%s|%s\n", a.Run, a.Seq, a.Tool, a.Args, a.Idempotent,
				a.Key, a.Result, a.Thought, a.MemKey, a.MemVal, a.Subgoal, a.Objective)
		}
	}
	const want = "2591a3fb46cd6de4aad41d68590cec3a4175004721383d154f6a7c6414eb7af4"
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Errorf("script digest = %s, want %s: the scripted agent changed", got, want)
	}
}

// TestScriptShape checks the structure of every atom of a few runs: valid
// JSON args and results, the result is the downstream's answer, the key
// names the atom, the objective only at seq 1, a subgoal every tenth atom.
func TestScriptShape(t *testing.T) {
	tools := map[string]bool{}
	idem := map[bool]int{}
	for i := 0; i < 3; i++ {
		run := RunID(i)
		for seq := uint64(1); seq <= 60; seq++ {
			a := Script(run, seq, 7)
			where := fmt.Sprintf("%s seq %d", run, seq)
			if !json.Valid(a.Args) {
				t.Errorf("%s: args are not valid JSON: %q", where, a.Args)
			}
			if !json.Valid(a.Result) {
				t.Errorf("%s: result is not valid JSON: %q", where, a.Result)
			}
			if !bytes.Equal(a.Result, Downstream(a.Tool, a.Args, a.Key)) {
				t.Errorf("%s: Result is not Downstream(Tool, Args, Key)", where)
			}
			if a.Key != IdempotencyKey(run, seq) {
				t.Errorf("%s: key %q, want %q", where, a.Key, IdempotencyKey(run, seq))
			}
			if (seq == 1) != (a.Objective != "") {
				t.Errorf("%s: objective %q (want one exactly at seq 1)", where, a.Objective)
			}
			if (seq%SubgoalEvery == 1) != (a.Subgoal != "") {
				t.Errorf("%s: subgoal %q (want one every %d atoms from seq 1)", where, a.Subgoal, SubgoalEvery)
			}
			if a.MemKey == "" || len(a.MemVal) == 0 || a.Thought == "" || a.Tool == "" {
				t.Errorf("%s: empty field in %+v", where, a)
			}
			tools[a.Tool] = true
			idem[a.Idempotent]++
		}
	}
	if len(tools) < 8 {
		t.Errorf("180 atoms used only %d tools: %v", len(tools), tools)
	}
	if idem[true] == 0 || idem[false] == 0 {
		t.Errorf("idempotent/non-idempotent mix = %v, want both", idem)
	}
}

// TestScriptSizes checks the average sizes the issue asks for: args ~200 B,
// result ~300 B, thought ~500 B.
func TestScriptSizes(t *testing.T) {
	const n = 2000
	var args, result, thought int
	for i := 0; i < n; i++ {
		a := Script(RunID(i%16), uint64(i/16+1), 3)
		args += len(a.Args)
		result += len(a.Result)
		thought += len(a.Thought)
	}
	for _, tc := range []struct {
		name     string
		avg      float64
		min, max float64
	}{
		{"args", float64(args) / n, 180, 225},
		{"result", float64(result) / n, 260, 340},
		{"thought", float64(thought) / n, 460, 540},
	} {
		t.Logf("average %s: %.0f bytes", tc.name, tc.avg)
		if tc.avg < tc.min || tc.avg > tc.max {
			t.Errorf("average %s = %.0f bytes, want in [%.0f, %.0f]", tc.name, tc.avg, tc.min, tc.max)
		}
	}
}

func TestDownstream(t *testing.T) {
	args := []byte(`{"bucket":"logs-prod-1"}`)
	a := Downstream("create_bucket", args, "k1")
	if !bytes.Equal(a, Downstream("create_bucket", args, "k1")) {
		t.Fatal("Downstream is not a pure function of (tool, args, key)")
	}
	if !json.Valid(a) {
		t.Fatalf("Downstream result is not valid JSON: %q", a)
	}
	for _, tc := range []struct {
		name       string
		tool, key  string
		args       []byte
		wantChange bool
	}{
		{"other key", "create_bucket", "k2", args, true},
		{"other tool", "delete_bucket", "k1", args, true},
		{"other args", "create_bucket", "k1", []byte(`{"bucket":"logs-prod-2"}`), true},
		{"boundary moved", "create_bucke", "k1", append([]byte("t"), args...), true},
		{"nil args", "create_bucket", "k1", nil, true},
	} {
		got := Downstream(tc.tool, tc.args, tc.key)
		if changed := !bytes.Equal(got, a); changed != tc.wantChange {
			t.Errorf("%s: result changed = %v, want %v", tc.name, changed, tc.wantChange)
		}
	}
}

// TestStateApply replays a run into a State, checks what it holds, and
// that it survives an Encode/Decode round trip and a rebuild from deltas.
func TestStateApply(t *testing.T) {
	const atoms = 120
	run := RunID(3)
	s := NewState(run)
	fromDeltas := NewState(run)
	for seq := uint64(1); seq <= atoms; seq++ {
		a := Script(run, seq, 11)
		if err := s.Apply(a); err != nil {
			t.Fatal(err)
		}
		d, err := EncodeDelta(a)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeDelta(d)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a, back); diff != "" {
			t.Fatalf("seq %d: delta round trip differs (-want +got):\n%s", seq, diff)
		}
		if err := fromDeltas.Apply(back); err != nil {
			t.Fatal(err)
		}
	}
	if s.Seq != atoms || len(s.Messages) != atoms || len(s.Subgoals) != (atoms+SubgoalEvery-1)/SubgoalEvery {
		t.Errorf("state at seq %d has %d messages and %d subgoals", s.Seq, len(s.Messages), len(s.Subgoals))
	}
	if s.Objective != Script(run, 1, 11).Objective {
		t.Errorf("objective = %q, want the one of seq 1", s.Objective)
	}
	last := Script(run, atoms, 11)
	if s.Memory[last.MemKey] != string(last.MemVal) {
		t.Errorf("memory[%q] = %q, want the last atom's value %q", last.MemKey, s.Memory[last.MemKey], last.MemVal)
	}
	if len(s.Memory) > len(memKeys) {
		t.Errorf("memory holds %d keys, more than the %d the script uses", len(s.Memory), len(memKeys))
	}
	if diff := cmp.Diff(s, fromDeltas); diff != "" {
		t.Errorf("state rebuilt from deltas differs (-want +got):\n%s", diff)
	}
	enc, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	per := float64(len(enc)) / atoms
	t.Logf("state after %d atoms: %d bytes (%.0f per atom)", atoms, len(enc), per)
	if per < 900 || per > 1600 {
		t.Errorf("state grows %.0f bytes per atom, want about a kilobyte (900..1600)", per)
	}
	dec, err := DecodeState(enc)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, dec); diff != "" {
		t.Errorf("state round trip differs (-want +got):\n%s", diff)
	}
	// A decoded state goes on growing like the original.
	next := Script(run, atoms+1, 11)
	if err := dec.Apply(next); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(next); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, dec); diff != "" {
		t.Errorf("decoded state diverges after one more atom (-want +got):\n%s", diff)
	}
}

func TestStateApplyErrors(t *testing.T) {
	good := Script("r", 1, 1)
	badArgs := good
	badArgs.Args = []byte(`{"unterminated`)
	badResult := good
	badResult.Result = []byte(`[1,`)
	other := good
	other.Run = "q"
	skip := Script("r", 3, 1)
	for _, tc := range []struct {
		name    string
		a       Atom
		wantErr error
		wantIn  string
	}{
		{"wrong run", other, ErrOutOfOrder, `run "q"`},
		{"skipped seq", skip, ErrOutOfOrder, "seq 3"},
		{"bad args", badArgs, ErrCorrupt, "tool args"},
		{"bad result", badResult, ErrCorrupt, "tool result"},
	} {
		s := NewState("r")
		err := s.Apply(tc.a)
		if !errors.Is(err, tc.wantErr) || !strings.Contains(fmt.Sprint(err), tc.wantIn) {
			t.Errorf("%s: Apply error = %v, want %v mentioning %q", tc.name, err, tc.wantErr, tc.wantIn)
		}
		if s.Seq != 0 || len(s.Messages) != 0 || len(s.Thoughts) != 0 {
			t.Errorf("%s: failed Apply changed the state: %+v", tc.name, s)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"truncated", `{"run":"r","seq":1,"thought":"abc`},
		{"wrong type", `{"run":"r","seq":"one"}`},
		{"not an object", `[1,2,3]`},
	} {
		if _, err := DecodeDelta([]byte(tc.in)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeDelta(%s) error = %v, want ErrCorrupt", tc.name, err)
		}
		if _, err := DecodeState([]byte(tc.in)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeState(%s) error = %v, want ErrCorrupt", tc.name, err)
		}
	}
	if _, err := DecodeState([]byte(`{"run":"r","seq":1,"messages":[{},{}]}`)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("DecodeState of 2 messages at seq 1: error = %v, want ErrCorrupt", err)
	}
	bad := Script("r", 1, 1)
	bad.Thought = "\xff\xfe"
	if _, err := EncodeDelta(bad); err == nil || !strings.Contains(err.Error(), "thought is not valid UTF-8") {
		t.Errorf("EncodeDelta of invalid UTF-8 thought: error = %v", err)
	}
}

// TestDeltaRoundTripRandom round-trips deltas of atoms with random field
// mutations that EncodeDelta accepts.
func TestDeltaRoundTripRandom(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for i := 0; i < 300; i++ {
		a := Script(RunID(rng.Intn(100)), uint64(rng.Intn(1000)), rng.Int63())
		switch rng.Intn(4) {
		case 0:
			a.Args = nil
		case 1:
			a.MemVal = nil
			a.MemKey = ""
		case 2:
			a.Thought = strings.Repeat("<&>\"\\\u2028é", rng.Intn(20))
		}
		d, err := EncodeDelta(a)
		if err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
		back, err := DecodeDelta(d)
		if err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
		if diff := cmp.Diff(a, back); diff != "" {
			t.Fatalf("iteration %d (seed %d): round trip differs (-want +got):\n%s", i, seed, diff)
		}
	}
}

// FuzzDecodeDelta checks that no input makes DecodeDelta panic, and that
// what it accepts re-encodes to a delta that decodes to the same atom.
func FuzzDecodeDelta(f *testing.F) {
	for seq := uint64(1); seq <= 3; seq++ {
		d, err := EncodeDelta(Script(RunID(0), seq, 1))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(d)
	}
	f.Add([]byte(`{"run":"r","seq":1,"args":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeDelta(b)
		if err != nil {
			return
		}
		d, err := EncodeDelta(a)
		if err != nil {
			return // e.g. invalid UTF-8 that json.Unmarshal replaced
		}
		again, err := DecodeDelta(d)
		if err != nil {
			t.Fatalf("re-encoded delta does not decode: %v\n%q", err, d)
		}
		if diff := cmp.Diff(a, again); diff != "" {
			t.Fatalf("decode(encode(decode(b))) differs (-want +got):\n%s", diff)
		}
	})
}
