package frame

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/internal/goldenhex"
	"github.com/google/go-cmp/cmp"
)

// TestGoldenEncodingSealed pins version 4 of a delta (op 15 set_sealed)
// and version 3 of a frame (the sealed section), as format.go describes
// them: they are frozen from now on.
func TestGoldenEncodingSealed(t *testing.T) {
	var d Delta
	d.Set("a", []byte("1")).
		SetSealed("k", []byte{0x00, 0xff}).
		Delete("a").
		AppendMessage(Message{Role: RoleDeveloper, Content: "d"})
	wantDelta := goldenhex.Decode(t, `
		d4 04                    # tag delta v4, 4 ops
		04 01 61 01 31           # set "a" = "1"
		0f 01 6b 02 00ff         # set_sealed "k" = 00 ff (opaque)
		05 01 61                 # delete "a"
		08 04 01 64              # append_message developer "d" (a version 2 message)
	`)
	if got := AppendDelta(nil, &d); !bytes.Equal(got, wantDelta) {
		t.Fatalf("delta v4 encoding changed:\n got %x\nwant %x", got, wantDelta)
	}
	if n := EncodedDeltaSize(&d); n != len(wantDelta) {
		t.Fatalf("EncodedDeltaSize = %d, want %d", n, len(wantDelta))
	}
	back, err := DecodeDelta(wantDelta)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&d, back, deltaCmp); diff != "" {
		t.Fatalf("golden v4 delta decodes differently (-want +got):\n%s", diff)
	}

	f := &Frame{
		Memory:   map[string][]byte{"p": []byte("v")},
		Sealed:   map[string][]byte{"s": {0xaa}, "b": nil},
		Messages: []Message{{Role: RoleUser, Content: "u"}},
	}
	wantFrame := goldenhex.Decode(t, `
		f3                       # tag frame v3
		00 00                    # objective "", no subgoals
		01 01 70 01 76           # 1 memory entry: "p" = "v"
		00                       # scratchpad ""
		01 01 01 75              # 1 message: user "u" (version 1 bytes)
		00                       # no pending
		02 01 62 00 01 73 01 aa  # 2 sealed entries, sorted: "b" = "", "s" = aa
	`)
	if got := AppendFrame(nil, f); !bytes.Equal(got, wantFrame) {
		t.Fatalf("frame v3 encoding changed:\n got %x\nwant %x", got, wantFrame)
	}
	if n := EncodedFrameSize(f); n != len(wantFrame) {
		t.Fatalf("EncodedFrameSize = %d, want %d", n, len(wantFrame))
	}
	fb, err := DecodeFrame(wantFrame)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f, fb, frameCmp); diff != "" {
		t.Fatalf("golden v3 frame decodes differently (-want +got):\n%s", diff)
	}

	// A replace_frame op holds a version 3 frame: the rollback of a run
	// with sealed values keeps them sealed.
	rd := new(Delta).ReplaceFrame(f)
	enc := AppendDelta(nil, rd)
	if enc[0] != tagDelta3 || !bytes.Equal(enc[4:], wantFrame) {
		t.Fatalf("replace_frame of a sealed frame encodes as %x", enc)
	}
	rb, err := DecodeDelta(enc)
	if err != nil {
		t.Fatal(err)
	}
	got := &Frame{Memory: map[string][]byte{"s": []byte("plain")}}
	if err := got.Apply(rb); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f, got, frameCmp); diff != "" {
		t.Fatalf("replace_frame of a sealed frame gives (-want +got):\n%s", diff)
	}
}

// TestNoSealedKeepsBytes: a delta without set_sealed and a frame without
// sealed values encode exactly as before sealed values existed, in
// version 1 or 2 (the goldens of golden_test.go pin those bytes; this
// checks the rule on random records).
func TestNoSealedKeepsBytes(t *testing.T) {
	g := newGen(testSeed(t))
	f := &Frame{}
	for i := 0; i < 200; i++ {
		d := g.delta(f)
		hasSealed := false
		for j := range d.ops {
			hasSealed = hasSealed || d.ops[j].kind == opSetSealed
		}
		if tag := AppendDelta(nil, d)[0]; hasSealed != (tag == tagDelta4) {
			t.Fatalf("delta %d: tag %x, holds set_sealed %v", i, tag, hasSealed)
		}
		if err := f.Apply(d); err != nil {
			t.Fatal(err)
		}
		if tag := AppendFrame(nil, f)[0]; (len(f.Sealed) > 0) != (tag == tagFrame3) {
			t.Fatalf("frame after delta %d: tag %x with %d sealed values", i, tag, len(f.Sealed))
		}
		plain := *f
		plain.Sealed = nil
		if tag := AppendFrame(nil, &plain)[0]; tag != tagFrame && tag != tagFrame2 {
			t.Fatalf("frame after delta %d without its sealed values: tag %x", i, tag)
		}
	}
}

// TestApplySealed: set, set_sealed and delete keep each key in at most
// one of Memory and Sealed, and the last op on a key decides where.
func TestApplySealed(t *testing.T) {
	f := &Frame{}
	step := func(d *Delta, memory, sealed map[string]string) {
		t.Helper()
		if err := f.CanApply(d); err != nil {
			t.Fatalf("CanApply %s: %v", d, err)
		}
		if err := f.Apply(d); err != nil {
			t.Fatalf("Apply %s: %v", d, err)
		}
		if err := f.Validate(); err != nil {
			t.Fatalf("after %s: %v", d, err)
		}
		got := func(m map[string][]byte) map[string]string {
			out := map[string]string{}
			for k, v := range m {
				out[k] = string(v)
			}
			return out
		}
		if diff := cmp.Diff(memory, got(f.Memory)); diff != "" {
			t.Fatalf("after %s: Memory (-want +got):\n%s", d, diff)
		}
		if diff := cmp.Diff(sealed, got(f.Sealed)); diff != "" {
			t.Fatalf("after %s: Sealed (-want +got):\n%s", d, diff)
		}
		if len(sealed) == 0 && f.Sealed != nil {
			t.Fatalf("after %s: Sealed is empty but not nil", d)
		}
	}
	step(new(Delta).Set("a", []byte("1")).SetSealed("b", []byte("S1")),
		map[string]string{"a": "1"}, map[string]string{"b": "S1"})
	step(new(Delta).SetSealed("a", []byte("S2")),
		map[string]string{}, map[string]string{"a": "S2", "b": "S1"})
	step(new(Delta).Set("b", []byte("2")),
		map[string]string{"b": "2"}, map[string]string{"a": "S2"})
	step(new(Delta).Delete("a").Delete("missing"),
		map[string]string{"b": "2"}, map[string]string{})
	// Within one delta, the last op on a key wins.
	step(new(Delta).SetSealed("c", []byte("S3")).Set("c", []byte("3")).SetSealed("c", []byte("S4")).SetSealed("d", []byte("S5")).Delete("d"),
		map[string]string{"b": "2"}, map[string]string{"c": "S4"})
	step(new(Delta).Delete("b").Delete("c"), map[string]string{}, map[string]string{})

	// The builder copies its argument.
	arg := []byte("sealed")
	d := new(Delta).SetSealed("k", arg)
	arg[0] = 'X'
	if err := f.Apply(d); err != nil {
		t.Fatal(err)
	}
	if string(f.Sealed["k"]) != "sealed" {
		t.Fatalf("SetSealed kept its argument: %q", f.Sealed["k"])
	}
	if s := d.String(); s != `set_sealed "k" 6 bytes` {
		t.Fatalf("String() = %q", s)
	}
}

// TestValidateSealedAndPlain: a key both plain and sealed is refused by
// Validate, by DecodeFrame, and by Apply of a replace_frame holding it.
func TestValidateSealedAndPlain(t *testing.T) {
	f := &Frame{
		Memory: map[string][]byte{"x": nil, "b": []byte("1"), "a": []byte("2")},
		Sealed: map[string][]byte{"b": {1}, "a": {2}, "y": {3}},
	}
	err := f.Validate()
	if !errors.Is(err, ErrInvalidFrame) || !strings.Contains(err.Error(), `memory key "a" is both plain (Memory) and sealed (Sealed)`) {
		t.Fatalf("Validate = %v", err)
	}
	if _, err := DecodeFrame(AppendFrame(nil, f)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `sealed memory key "a" is also a plain memory key`) {
		t.Fatalf("DecodeFrame of a key in both = %v", err)
	}
	var target Frame
	if err := target.Apply(new(Delta).ReplaceFrame(f)); !errors.Is(err, ErrInvalidOp) {
		t.Fatalf("Apply of replace_frame with a key in both = %v", err)
	}
	delete(f.Memory, "a")
	delete(f.Memory, "b")
	if err := f.Validate(); err != nil {
		t.Fatalf("Validate of disjoint maps: %v", err)
	}
}

// TestCloneSealed: Clone copies Sealed deeply.
func TestCloneSealed(t *testing.T) {
	f := &Frame{Sealed: map[string][]byte{"k": []byte("sealed")}}
	c := f.Clone()
	c.Sealed["k"][0] = 'X'
	c.Sealed["new"] = nil
	if string(f.Sealed["k"]) != "sealed" || len(f.Sealed) != 1 {
		t.Fatalf("Clone shares Sealed: %q", f.Sealed)
	}
	if (&Frame{}).Clone().Sealed != nil {
		t.Fatal("Clone of a frame without sealed values has a Sealed map")
	}
}

// sealFn seals the keys with prefix "secret." as "S(" value ")", and
// records every call.
func sealFn(calls *[]string) func(string, []byte) ([]byte, bool, error) {
	return func(key string, value []byte) ([]byte, bool, error) {
		*calls = append(*calls, key+"="+string(value))
		if !strings.HasPrefix(key, "secret.") {
			return nil, false, nil
		}
		return []byte("S(" + string(value) + ")"), true, nil
	}
}

func TestSealSets(t *testing.T) {
	var calls []string
	if d, err := (*Delta)(nil).SealSets(sealFn(&calls)); d != nil || err != nil || len(calls) != 0 {
		t.Fatalf("SealSets of nil = %v, %v (calls %v)", d, err, calls)
	}
	none := new(Delta).SetObjective("o").AppendScratch([]byte("x")).SetSealed("secret.old", []byte("S0"))
	if d, err := none.SealSets(sealFn(&calls)); d != none || err != nil || len(calls) != 0 {
		t.Fatalf("SealSets of a delta without set ops = %p (want %p), %v; calls %v", d, none, err, calls)
	}

	plain := new(Delta).Set("a", []byte("1")).Delete("b").Set("c", []byte("3"))
	if d, err := plain.SealSets(sealFn(&calls)); d != plain || err != nil {
		t.Fatalf("SealSets sealing nothing = %p (want %p), %v", d, plain, err)
	}
	if want := []string{"a=1", "c=3"}; !cmp.Equal(calls, want) {
		t.Fatalf("fn called with %v, want %v", calls, want)
	}

	calls = nil
	d := new(Delta).
		Set("a", []byte("1")).
		Set("secret.k", []byte("v")).
		AppendMessage(Message{Role: RoleAssistant, Content: "hi", ToolCalls: []ToolCall{{ID: "c", Name: "ls"}}}).
		Delete("secret.k").
		Set("secret.j", nil).
		SetSealed("secret.old", []byte("S0"))
	before := AppendDelta(nil, d)
	beforeStr := d.String()
	s, err := d.SealSets(sealFn(&calls))
	if err != nil {
		t.Fatal(err)
	}
	if s == d {
		t.Fatal("SealSets returned d although it sealed ops")
	}
	if want := []string{"a=1", "secret.k=v", "secret.j="}; !cmp.Equal(calls, want) {
		t.Fatalf("fn called with %v, want %v", calls, want)
	}
	if !bytes.Equal(AppendDelta(nil, d), before) || d.String() != beforeStr {
		t.Fatal("SealSets changed the delta it was given")
	}
	want := new(Delta).
		Set("a", []byte("1")).
		SetSealed("secret.k", []byte("S(v)")).
		AppendMessage(Message{Role: RoleAssistant, Content: "hi", ToolCalls: []ToolCall{{ID: "c", Name: "ls"}}}).
		Delete("secret.k").
		SetSealed("secret.j", []byte("S()")).
		SetSealed("secret.old", []byte("S0"))
	if diff := cmp.Diff(want, s, deltaCmp); diff != "" {
		t.Fatalf("SealSets (-want +got):\n%s", diff)
	}
	if enc := AppendDelta(nil, s); enc[0] != tagDelta4 {
		t.Fatalf("a sealed delta encodes with tag %x", enc[0])
	}
	var f Frame
	if err := f.Apply(s); err != nil {
		t.Fatal(err)
	}
	if string(f.Memory["a"]) != "1" || string(f.Sealed["secret.j"]) != "S()" || string(f.Sealed["secret.old"]) != "S0" ||
		len(f.Sealed) != 2 || len(f.Memory) != 1 {
		t.Fatalf("applied sealed delta: Memory %q, Sealed %q", f.Memory, f.Sealed)
	}

	boom := errors.New("no data key")
	_, err = d.SealSets(func(key string, _ []byte) ([]byte, bool, error) {
		if key == "secret.k" {
			return nil, false, boom
		}
		return nil, false, nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("SealSets with a failing fn = %v", err)
	}
}

// TestSealSetsAllocs: sealing nothing allocates nothing (the commit path
// calls it on every delta).
func TestSealSetsAllocs(t *testing.T) {
	d := sealBenchDelta()
	fn := func(string, []byte) ([]byte, bool, error) { return nil, false, nil }
	if n := testing.AllocsPerRun(100, func() {
		if s, err := d.SealSets(fn); s != d || err != nil {
			t.Fatal("SealSets sealed something")
		}
	}); n != 0 {
		t.Fatalf("SealSets sealing nothing: %v allocations", n)
	}
}

func sealBenchDelta() *Delta {
	return new(Delta).
		SetSubgoalStatus("s1", SubgoalDone).
		Set("bucket", []byte("logs-prod-7")).
		Set("region", []byte("eu-west-1")).
		AppendMessage(Message{Role: RoleAssistant, Content: "created the bucket"}).
		ToolOutput("call_1", "create_bucket", []byte(`{"status":"ok"}`)).
		Set("attempts", []byte("1"))
}

// BenchmarkSealSetsNone: SealSets of a typical delta with three set ops,
// none of an erasable key.
func BenchmarkSealSetsNone(b *testing.B) {
	d := sealBenchDelta()
	fn := func(string, []byte) ([]byte, bool, error) { return nil, false, nil }
	b.ReportAllocs()
	for b.Loop() {
		if s, _ := d.SealSets(fn); s != d {
			b.Fatal("sealed")
		}
	}
}

func TestUnseal(t *testing.T) {
	open := func(calls *[]string) func(string, []byte) ([]byte, bool, error) {
		return func(key string, sealed []byte) ([]byte, bool, error) {
			*calls = append(*calls, key)
			if key == "erased" {
				return nil, false, nil
			}
			return bytes.TrimSuffix(bytes.TrimPrefix(sealed, []byte("S(")), []byte(")")), true, nil
		}
	}
	var calls []string
	plain := &Frame{Memory: map[string][]byte{"a": []byte("1")}}
	if u, err := plain.Unseal(open(&calls)); u != plain || err != nil || len(calls) != 0 {
		t.Fatalf("Unseal of a frame without sealed values = %p (want %p), %v; calls %v", u, plain, err, calls)
	}
	if u, err := (*Frame)(nil).Unseal(open(&calls)); u != nil || err != nil {
		t.Fatalf("Unseal of nil = %v, %v", u, err)
	}

	f := &Frame{
		Objective:  "o",
		Subgoals:   []Subgoal{{ID: "s", Text: "t"}},
		Memory:     map[string][]byte{"a": []byte("1")},
		Scratchpad: make([]byte, 1, 64),
		Messages:   []Message{{Role: RoleUser, Content: "u1"}, {Role: RoleUser, Content: "u2"}},
		Pending:    []Pending{{CallID: "p1"}, {CallID: "p2"}},
		Sealed:     map[string][]byte{"k": []byte("S(v)"), "erased": []byte("S(gone)")},
	}
	f.Subgoals = append(make([]Subgoal, 0, 8), f.Subgoals...)
	f.Messages = append(make([]Message, 0, 8), f.Messages...)
	before := AppendFrame(nil, f)
	u, err := f.Unseal(open(&calls))
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 {
		t.Fatalf("fn called for %v", calls)
	}
	want := &Frame{
		Objective:  "o",
		Subgoals:   []Subgoal{{ID: "s", Text: "t"}},
		Memory:     map[string][]byte{"a": []byte("1"), "k": []byte("v")},
		Scratchpad: []byte{0},
		Messages:   []Message{{Role: RoleUser, Content: "u1"}, {Role: RoleUser, Content: "u2"}},
		Pending:    []Pending{{CallID: "p1"}, {CallID: "p2"}},
	}
	if diff := cmp.Diff(want, u, frameCmp); diff != "" {
		t.Fatalf("Unseal (-want +got):\n%s", diff)
	}
	if u.Sealed != nil {
		t.Fatalf("Unseal left Sealed %q", u.Sealed)
	}
	// Applying to the unsealed frame, in every way Apply changes a frame
	// in place, leaves f as it was.
	var d Delta
	d.SetSubgoalStatus("s", SubgoalDone).AddSubgoal("s2", "").Set("a", []byte("2")).Delete("k").
		AppendScratch([]byte("more")).AppendMessage(Message{Role: RoleUser, Content: "u3"}).
		DropMessages(1).RemovePending("p1").AddPending(Pending{CallID: "p3"})
	if err := u.Apply(&d); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(AppendFrame(nil, f), before) {
		t.Fatal("Apply to the unsealed frame changed the sealed one")
	}
	if f.Scratchpad[:cap(f.Scratchpad)][1] != 0 {
		t.Fatal("an append to the unsealed scratchpad wrote into the sealed frame's array")
	}
	f.Apply(new(Delta).Set("b", []byte("x")))
	if _, ok := u.Memory["b"]; ok {
		t.Fatal("the unsealed frame shares its Memory map with the sealed one")
	}

	boom := errors.New("corrupt seal")
	if _, err := f.Unseal(func(string, []byte) ([]byte, bool, error) { return nil, false, boom }); !errors.Is(err, boom) {
		t.Fatalf("Unseal with a failing fn = %v", err)
	}
}

func TestDecodeSealedMalformed(t *testing.T) {
	deltas := []struct {
		name string
		in   []byte
		msg  string
	}{
		{"version 4 without set_sealed", rec(0xD4, 0), "version 4 delta holds no set_sealed op"},
		{"version 4 of other ops", rec(0xD4, 1, 4, 1, "k", 0), "version 4 delta holds no set_sealed op"},
		{"set_sealed in version 1", rec(0xD1, 1, 15, 1, "k", 0), "offset 2: unknown op kind 15"},
		{"set_sealed in version 2", rec(0xD2, 1, 15, 1, "k", 0), "unknown op kind 15"},
		{"set_sealed in version 3", rec(0xD3, 2, 14, 7, 0xF1, 0, 0, 0, 0, 0, 0, 15, 1, "k", 0), "unknown op kind 15"},
		{"op 16 in version 4", rec(0xD4, 2, 15, 1, "k", 0, 16), "unknown op kind 16"},
		{"truncated sealed value", rec(0xD4, 1, 15, 1, "k", 5, "ab"), "sealed memory value length 5 exceeds the remaining 2 bytes"},
		{"truncated sealed key", rec(0xD4, 1, 15), "truncated: want sealed memory key length"},
		{"trailing", rec(0xD4, 1, 15, 0, 0, 0), "1 trailing bytes"},
	}
	for _, tc := range deltas {
		t.Run("delta/"+tc.name, func(t *testing.T) {
			d, err := DecodeDelta(tc.in)
			if err == nil {
				t.Fatalf("decoded %v", d)
			}
			var ce *CorruptError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Record != "delta" || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want a delta ErrCorrupt saying %q", err, tc.msg)
			}
		})
	}
	// objective "", no subgoals, memory, scratchpad, messages, pending
	head := rec(0, 0, 0, 0, 0, 0)
	frames := []struct {
		name string
		in   []byte
		msg  string
	}{
		{"no sealed value", rec(0xF3, head, 0), "version 3 frame holds no sealed value"},
		{"no sealed section", rec(0xF3, head), "truncated: want sealed entry count"},
		{"count beyond input", rec(0xF3, head, 5, 1, "a", 0), "sealed entry count 5 exceeds"},
		{"unsorted", rec(0xF3, head, 2, 1, "b", 0, 1, "a", 0), `sealed memory key "a" not after "b" (keys must be sorted and unique)`},
		{"duplicate", rec(0xF3, head, 2, 1, "a", 0, 1, "a", 0), `sealed memory key "a" not after "a"`},
		{"key in both", rec(0xF3, 0, 0, 1, 1, "a", 0, 0, 0, 0, 1, 1, "a", 1, "S"), `sealed memory key "a" is also a plain memory key`},
		{"truncated value", rec(0xF3, head, 1, 1, "a", 9, "S"), "sealed memory value length 9 exceeds the remaining 1 bytes"},
		{"trailing", rec(0xF3, head, 1, 1, "a", 0, 0), "1 trailing bytes"},
		{"sealed section in version 2", rec(0xF2, head, 1, 1, "a", 0), "trailing bytes"},
		{"sealed section in version 1", rec(0xF1, head, 1, 1, "a", 0), "trailing bytes"},
		{"version 4", rec(0xF4, head, 1, 1, "a", 0), "version 4 (this build reads versions 1 to 3)"},
	}
	for _, tc := range frames {
		t.Run("frame/"+tc.name, func(t *testing.T) {
			f, err := DecodeFrame(tc.in)
			if err == nil {
				t.Fatalf("decoded %+v", f)
			}
			var ce *CorruptError
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) || !errors.As(err, &ce) || ce.Record != "frame" || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want a frame CorruptError saying %q", err, tc.msg)
			}
		})
	}
	// A version 3 frame may hold messages of version 1 only: the sealed
	// section alone justifies it.
	if _, err := DecodeFrame(rec(0xF3, 0, 0, 0, 0, 1, 1, 1, "u", 0, 1, 1, "a", 0)); err != nil {
		t.Fatalf("version 3 frame of version 1 messages: %v", err)
	}
}

// TestSealedOpsAndJSON: the exported views of set_sealed, alone and in a
// replace_frame's frame.
func TestSealedOpsAndJSON(t *testing.T) {
	d := new(Delta).SetSealed("k", []byte{0x00, 0xff})
	ops := d.Ops()
	if len(ops) != 1 || ops[0].Kind != "set_sealed" || ops[0].Key != "k" || !bytes.Equal(ops[0].Value, []byte{0, 0xff}) {
		t.Fatalf("Ops() = %+v", ops)
	}
	b, err := json.Marshal(ops[0])
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"op":"set_sealed","key":"k","sealed_base64":"AP8="}` {
		t.Fatalf("JSON %s", b)
	}
	// Even a sealed value that is valid UTF-8 is base64: never a "value".
	b, _ = json.Marshal(new(Delta).SetSealed("k", []byte("abc")).Ops()[0])
	if string(b) != `{"op":"set_sealed","key":"k","sealed_base64":"YWJj"}` {
		t.Fatalf("JSON %s", b)
	}

	f := &Frame{Memory: map[string][]byte{"p": []byte("v")}, Sealed: map[string][]byte{"z": {1}, "s": {2}}}
	var kinds []string
	for _, o := range BuildOps(f) {
		kinds = append(kinds, o.Kind+" "+o.Key)
	}
	if want := []string{"set p", "set_sealed s", "set_sealed z"}; !cmp.Equal(kinds, want) {
		t.Fatalf("BuildOps = %v, want %v", kinds, want)
	}
	rf := new(Delta).ReplaceFrame(f).Ops()
	if diff := cmp.Diff(f, rf[0].Frame, frameCmp); diff != "" {
		t.Fatalf("replace_frame op's frame (-want +got):\n%s", diff)
	}
}

// TestHeapSizeSealed: sealed values count like memory values.
func TestHeapSizeSealed(t *testing.T) {
	f := &Frame{Memory: map[string][]byte{"a": make([]byte, 100)}}
	was := HeapSize(f)
	f.Sealed = map[string][]byte{"b": make([]byte, 1000)}
	if got := HeapSize(f); got < was+1000 {
		t.Fatalf("HeapSize %d with a 1000-byte sealed value, %d without", got, was)
	}
}

// TestSealedThroughReferences: deltas that seal values also refer to
// certified results (version 4 holds everything of version 2), and the
// derived deltas of ReferResults and Resolve keep their set_sealed ops.
func TestSealedThroughReferences(t *testing.T) {
	d := new(Delta).SetSealed("k", []byte("S")).ToolOutput("c", "ls", []byte("out"))
	results := [][]byte{[]byte("out")}
	r := d.ReferResults(results)
	enc := AppendDelta(nil, r)
	if enc[0] != tagDelta4 || !MayRefer(enc) {
		t.Fatalf("referring sealed delta: tag %x, MayRefer %v", enc[0], MayRefer(enc))
	}
	back, err := DecodeDelta(enc)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Refs(); !cmp.Equal(got, []int{0}) {
		t.Fatalf("Refs() = %v", got)
	}
	resolved, err := back.Resolve(func(i int) ([]byte, error) { return results[i], nil })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, resolved, deltaCmp); diff != "" {
		t.Fatalf("Resolve(ReferResults(d)) (-want +got):\n%s", diff)
	}
}
