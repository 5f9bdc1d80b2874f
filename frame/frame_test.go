package frame

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDeltaRoundTrip(t *testing.T) {
	g := newGen(testSeed(t))
	f := &Frame{}
	for i := 0; i < 300; i++ {
		d := g.delta(f)
		b := AppendDelta(nil, d)
		if len(b) != EncodedDeltaSize(d) {
			t.Fatalf("delta %d: EncodedDeltaSize %d, encoded %d", i, EncodedDeltaSize(d), len(b))
		}
		d2, err := DecodeDelta(b)
		if err != nil {
			t.Fatalf("delta %d: %v\n%s", i, err, d)
		}
		if diff := cmp.Diff(d, d2, deltaCmp); diff != "" {
			t.Fatalf("delta %d: decode(encode(d)) != d (-want +got):\n%s", i, diff)
		}
		if b2 := AppendDelta([]byte("prefix"), d2); !bytes.Equal(b2[6:], b) {
			t.Fatalf("delta %d: encode(decode(b)) != b", i)
		}
		if err := f.CanApply(d2); err != nil {
			t.Fatalf("delta %d: CanApply: %v", i, err)
		}
		if err := f.Apply(d2); err != nil {
			t.Fatalf("delta %d: apply: %v", i, err)
		}
	}
}

func TestFrameRoundTrip(t *testing.T) {
	g := newGen(testSeed(t))
	for _, n := range []int{0, 1, 5, 50, 200} {
		f := g.frame(n)
		b := AppendFrame(nil, f)
		if len(b) != EncodedFrameSize(f) {
			t.Fatalf("n=%d: EncodedFrameSize %d, encoded %d", n, EncodedFrameSize(f), len(b))
		}
		f2, err := DecodeFrame(b)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if diff := cmp.Diff(f, f2, frameCmp); diff != "" {
			t.Fatalf("n=%d: decode(encode(f)) != f (-want +got):\n%s", n, diff)
		}
		if b2 := AppendFrame(nil, f2); !bytes.Equal(b2, b) {
			t.Fatalf("n=%d: encode(decode(b)) != b", n)
		}
		f3, err := DecodeFrameOwned(bytes.Clone(b))
		if err != nil {
			t.Fatalf("n=%d: DecodeFrameOwned: %v", n, err)
		}
		if diff := cmp.Diff(f, f3, frameCmp); diff != "" {
			t.Fatalf("n=%d: DecodeFrameOwned(encode(f)) != f (-want +got):\n%s", n, diff)
		}
		// Determinism: an equal frame built differently (a clone, whose map
		// has a different insertion order) encodes to the same bytes.
		if b3 := AppendFrame(nil, f.Clone()); !bytes.Equal(b3, b) {
			t.Fatalf("n=%d: equal frames encode differently", n)
		}
	}
}

// TestAppendFrameMessages checks that AppendFrameMessages writes
// AppendFrame's bytes and that out[start:end] are the messages' encodings,
// the same whatever else the frame holds.
func TestAppendFrameMessages(t *testing.T) {
	g := newGen(testSeed(t))
	for _, n := range []int{0, 1, 5, 50, 200} {
		f := g.frame(n)
		out, start, end := AppendFrameMessages([]byte("prefix"), f)
		if want := AppendFrame([]byte("prefix"), f); !bytes.Equal(out, want) {
			t.Fatalf("n=%d: AppendFrameMessages wrote other bytes than AppendFrame", n)
		}
		if start < len("prefix") || end < start || end > len(out) {
			t.Fatalf("n=%d: messages at [%d, %d) of %d bytes", n, start, end, len(out))
		}
		if len(f.Messages) == 0 && start != end {
			t.Fatalf("n=%d: no messages, yet [%d, %d)", n, start, end)
		}
		// The messages alone, in a frame with nothing else: the same bytes.
		only, s2, e2 := AppendFrameMessages(nil, &Frame{Messages: f.Messages})
		if !bytes.Equal(out[start:end], only[s2:e2]) {
			t.Fatalf("n=%d: the messages' bytes depend on the rest of the frame", n)
		}
		// Each message decodes from its own slice of them.
		var cat []byte
		for i := range f.Messages {
			b, s, e := AppendFrameMessages(nil, &Frame{Messages: f.Messages[i : i+1]})
			cat = append(cat, b[s:e]...)
		}
		if !bytes.Equal(cat, out[start:end]) {
			t.Fatalf("n=%d: out[start:end] is not the messages' encodings in order", n)
		}
	}
}

func TestFrameDeterministicMapOrder(t *testing.T) {
	keys := []string{"b", "a", "zz", "", "m", "aa"}
	a := &Frame{Memory: map[string][]byte{}}
	b := &Frame{Memory: map[string][]byte{}}
	for i, k := range keys {
		a.Memory[k] = []byte(k + "v")
		b.Memory[keys[len(keys)-1-i]] = []byte(keys[len(keys)-1-i] + "v")
	}
	for i := 0; i < 20; i++ {
		if !bytes.Equal(AppendFrame(nil, a), AppendFrame(nil, b)) {
			t.Fatal("same memory in different insertion order encodes differently")
		}
	}
	if !bytes.Equal(AppendFrame(nil, &Frame{}), AppendFrame(nil, &Frame{Memory: map[string][]byte{}, Subgoals: []Subgoal{}})) {
		t.Fatal("nil and empty encode differently")
	}
}

// TestApplyLaw checks the property the engine's restart relies on: applying
// deltas one by one from the start equals decoding a snapshot taken midway
// and applying the remaining (decoded) deltas to it.
func TestApplyLaw(t *testing.T) {
	seed := testSeed(t)
	g := newGen(seed)
	const n = 120
	var encoded [][]byte
	live := &Frame{}
	var snaps [][]byte // snaps[i] = encoding of the frame after i deltas
	snaps = append(snaps, AppendFrame(nil, live))
	for i := 0; i < n; i++ {
		d := g.delta(live)
		encoded = append(encoded, AppendDelta(nil, d))
		if err := live.Apply(d); err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, AppendFrame(nil, live))
	}
	for _, mid := range []int{0, 1, n / 3, n / 2, n - 1, n} {
		f, err := DecodeFrame(snaps[mid])
		if err != nil {
			t.Fatalf("snapshot at %d: %v", mid, err)
		}
		for i := mid; i < n; i++ {
			d, err := DecodeDelta(encoded[i])
			if err != nil {
				t.Fatalf("delta %d: %v", i, err)
			}
			if err := f.Apply(d); err != nil {
				t.Fatalf("snapshot at %d, delta %d: %v", mid, i, err)
			}
			if !bytes.Equal(AppendFrame(nil, f), snaps[i+1]) {
				t.Fatalf("snapshot at %d, after delta %d: frame differs from the live one", mid, i)
			}
		}
		if diff := cmp.Diff(live, f, frameCmp); diff != "" {
			t.Fatalf("snapshot at %d: final frame differs (-live +replayed):\n%s", mid, diff)
		}
	}
}

func TestApplyInvalidLeavesFrameUnchanged(t *testing.T) {
	base := func() *Frame {
		f := &Frame{Objective: "ship it"}
		var d Delta
		d.AddSubgoal("s1", "build").
			Set("k", []byte("v")).
			AppendScratch([]byte("note")).
			AppendMessage(Message{Role: RoleUser, Content: "hi"}).
			AddPending(Pending{CallID: "c1", Tool: "deploy_service", Args: []byte(`{}`)})
		if err := f.Apply(&d); err != nil {
			t.Fatal(err)
		}
		return f
	}
	// Every delta starts with valid ops, so the test sees that they are not
	// applied either.
	prefix := func() *Delta {
		var d Delta
		return d.SetObjective("changed").Set("k", []byte("changed")).AppendScratch([]byte("more")).
			AppendMessage(Message{Role: RoleAssistant, Content: "x"}).ToolOutput("c1", "deploy_service", []byte("ok"))
	}
	tests := []struct {
		name  string
		delta *Delta
	}{
		{"unknown subgoal", prefix().SetSubgoalStatus("nope", SubgoalDone)},
		{"bad status", prefix().SetSubgoalStatus("s1", SubgoalStatus(9))},
		{"duplicate subgoal", prefix().AddSubgoal("s1", "again")},
		{"duplicate subgoal within delta", prefix().AddSubgoal("s2", "a").AddSubgoal("s2", "b")},
		{"empty subgoal id", prefix().AddSubgoal("", "x")},
		{"bad role", prefix().AppendMessage(Message{Role: Role(7)})},
		{"duplicate pending", prefix().AddPending(Pending{CallID: "c2"}).AddPending(Pending{CallID: "c2"})},
		{"empty call id", prefix().AddPending(Pending{Tool: "x"})},
		{"remove pending twice", prefix().RemovePending("c1")}, // ToolOutput removed it
		{"remove unknown pending", prefix().RemovePending("zz")},
		{"drop too many", prefix().DropMessages(4)},
		{"drop negative", prefix().DropMessages(-1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := base()
			want := AppendFrame(nil, f)
			if err := f.CanApply(tc.delta); !errors.Is(err, ErrInvalidOp) {
				t.Fatalf("CanApply error = %v, want ErrInvalidOp", err)
			}
			err := f.Apply(tc.delta)
			if !errors.Is(err, ErrInvalidOp) {
				t.Fatalf("Apply error = %v, want ErrInvalidOp", err)
			}
			if got := AppendFrame(nil, f); !bytes.Equal(got, want) {
				t.Fatalf("frame changed by a failed Apply")
			}
			t.Log(err)
		})
	}
}

func TestApplySemantics(t *testing.T) {
	f := &Frame{}
	var d Delta
	d.SetObjective("migrate billing").
		AddSubgoal("s1", "back up").
		AddSubgoal("s2", "migrate").
		SetSubgoalStatus("s1", SubgoalDone).
		Set("region", []byte("eu-west-1")).
		Set("tmp", []byte("x")).
		Delete("tmp").
		AppendScratch([]byte("a")).
		AppendScratch([]byte("b")).
		AppendMessage(Message{Role: RoleUser, Content: "go"}).
		AddPending(Pending{CallID: "c1", Tool: "run_migration", Args: []byte(`{"m":1}`), Key: "k1"}).
		AddPending(Pending{CallID: "c2", Tool: "send_email"}).
		ToolOutput("c1", "run_migration", []byte(`{"ok":true}`)).
		RemovePending("c2").
		AddPending(Pending{CallID: "c2", Tool: "send_email"}) // re-add after removal in the same delta
	if d.Len() != 15 {
		t.Fatalf("Len = %d", d.Len())
	}
	if err := f.Apply(&d); err != nil {
		t.Fatal(err)
	}
	want := &Frame{
		Objective:  "migrate billing",
		Subgoals:   []Subgoal{{"s1", "back up", SubgoalDone}, {"s2", "migrate", SubgoalOpen}},
		Memory:     map[string][]byte{"region": []byte("eu-west-1")},
		Scratchpad: []byte("ab"),
		Messages: []Message{
			{Role: RoleUser, Content: "go"},
			{Role: RoleTool, Content: `{"ok":true}`, Tool: "run_migration", CallID: "c1"},
		},
		Pending: []Pending{{CallID: "c2", Tool: "send_email"}},
	}
	if diff := cmp.Diff(want, f, frameCmp); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	var d2 Delta
	d2.ClearScratch().DropMessages(1).ToolOutput("unknown-call", "http_get", []byte("404"))
	if err := f.Apply(&d2); err != nil {
		t.Fatal(err)
	}
	if len(f.Scratchpad) != 0 || len(f.Messages) != 2 || f.Messages[0].CallID != "c1" || len(f.Pending) != 1 {
		t.Fatalf("after clear/drop/tool output: %+v", f)
	}
}

func TestBuildersCopyArguments(t *testing.T) {
	val := []byte("value")
	var d Delta
	d.Set("k", val).AppendScratch(val).AddPending(Pending{CallID: "c", Args: val})
	copy(val, "XXXXX")
	f := &Frame{}
	if err := f.Apply(&d); err != nil {
		t.Fatal(err)
	}
	if string(f.Memory["k"]) != "value" || string(f.Scratchpad) != "value" || string(f.Pending[0].Args) != "value" {
		t.Fatalf("builder kept a reference to the caller's slice: %+v", f)
	}
}

func TestCloneIndependent(t *testing.T) {
	g := newGen(testSeed(t))
	f := g.frame(40)
	f.Memory = map[string][]byte{"k": []byte("v")}
	f.Scratchpad = []byte("scratch")
	f.Pending = append(f.Pending, Pending{CallID: "zz", Args: []byte("args")})
	want := AppendFrame(nil, f)
	c := f.Clone()
	c.Memory["k"][0] = 'X'
	c.Memory["new"] = nil
	c.Scratchpad[0] = 'X'
	c.Pending[len(c.Pending)-1].Args[0] = 'X'
	if len(c.Subgoals) > 0 {
		c.Subgoals[0].Status = SubgoalFailed
	}
	if len(c.Messages) > 0 {
		c.Messages[0].Content = "changed"
	}
	var d Delta
	if err := c.Apply(d.SetObjective("other").AppendMessage(Message{Content: "x"})); err != nil {
		t.Fatal(err)
	}
	if got := AppendFrame(nil, f); !bytes.Equal(got, want) {
		t.Fatal("mutating a clone changed the original")
	}
	if (*Frame)(nil).Clone() != nil {
		t.Fatal("Clone of nil is not nil")
	}
	if err := c.CanApply(nil); err != nil {
		t.Fatalf("CanApply(nil): %v", err)
	}
	if err := c.Apply(nil); err != nil {
		t.Fatalf("Apply(nil): %v", err)
	}
	if err := (*Frame)(nil).Apply(&d); !errors.Is(err, ErrInvalidOp) {
		t.Fatalf("Apply on nil frame: %v", err)
	}
	if !bytes.Equal(AppendFrame(nil, nil), AppendFrame(nil, &Frame{})) || EncodedFrameSize(nil) != len(AppendFrame(nil, nil)) {
		t.Fatal("nil frame does not encode as an empty one")
	}
}

// TestApplyDoesNotCopyFrame checks requirement 4: the cost of Apply on a
// large frame is that of the delta. It counts allocations, which (unlike
// time) are deterministic.
func TestApplyDoesNotCopyFrame(t *testing.T) {
	g := newGen(1)
	f := &Frame{}
	var big Delta
	for i := 0; i < 1000; i++ {
		big.AppendMessage(Message{Role: RoleAssistant, Content: g.t.Message(500)})
	}
	big.Set("a", []byte("1"))
	if err := f.Apply(&big); err != nil {
		t.Fatal(err)
	}
	// Leave room in the slices so that appends do not grow them.
	f.Messages = append(make([]Message, 0, len(f.Messages)+1000), f.Messages...)
	var d Delta
	d.AppendMessage(Message{Role: RoleUser, Content: "next"}).Set("a", []byte("2")).AppendScratch([]byte("s"))
	allocs := testing.AllocsPerRun(100, func() {
		if err := f.Apply(&d); err != nil {
			t.Fatal(err)
		}
	})
	// The scratchpad may grow; nothing proportional to the 500 KB frame.
	if allocs > 2 {
		t.Fatalf("Apply of a 3-op delta on a 500 KB frame made %.1f allocations", allocs)
	}
}

func TestStrings(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{SubgoalOpen.String(), "open"}, {SubgoalAbandoned.String(), "abandoned"}, {SubgoalStatus(9).String(), "status(9)"},
		{RoleTool.String(), "tool"}, {Role(200).String(), "role(200)"},
		{CodecZstd.String(), "zstd"}, {Codec(7).String(), "codec(7)"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	var d Delta
	d.SetSubgoalStatus("s1", SubgoalDone).DropMessages(3)
	if got, want := d.String(), "set_subgoal_status \"s1\" done\ndrop_messages 3"; got != want {
		t.Errorf("Delta.String = %q, want %q", got, want)
	}
	d.Reset()
	if d.Len() != 0 {
		t.Error("Reset left ops")
	}
}
