package frame

import (
	"bytes"
	"errors"
	"testing"

	"github.com/continuumdb/continuum/internal/goldenhex"
)

// TestGoldenReplaceFrame pins the version 3 delta (format.go says it is
// frozen): one replace_frame op holding a frame record, which Apply puts
// in place of the whole frame.
func TestGoldenReplaceFrame(t *testing.T) {
	target := &Frame{Objective: "ship", Subgoals: []Subgoal{{ID: "a", Text: "b", Status: SubgoalDone}},
		Memory: map[string][]byte{"k": []byte("v")}}
	want := goldenhex.Decode(t, `
		d3                 # delta, version 3
		01                 # 1 op
		0e                 # op 14: replace_frame
		14                 # the frame record, 20 bytes:
		  f1               #   frame, version 1
		  04 73686970      #   objective "ship"
		  01 0161 0162 02  #   1 subgoal: id "a", text "b", status done
		  01 016b 0176     #   1 memory entry: "k" = "v"
		  00               #   no scratchpad
		  00               #   no messages
		  00               #   no pending`)
	d := new(Delta).ReplaceFrame(target)
	if got := AppendDelta(nil, d); !bytes.Equal(got, want) {
		t.Fatalf("replace_frame encoding changed:\n got %x\nwant %x", got, want)
	}
	if n := EncodedDeltaSize(d); n != len(want) {
		t.Fatalf("EncodedDeltaSize = %d, want %d", n, len(want))
	}
	back, err := DecodeDelta(want)
	if err != nil {
		t.Fatal(err)
	}
	// A frame that is ahead of the target in every way, subgoals and the
	// newest messages included: no other op could take it back.
	f := &Frame{Objective: "other", Subgoals: []Subgoal{{ID: "a", Text: "b"}, {ID: "later", Text: "x"}},
		Memory: map[string][]byte{"k": []byte("w"), "new": []byte("1")}, Scratchpad: []byte("notes"),
		Messages: []Message{{Role: RoleUser, Content: "hi"}}, Pending: []Pending{{CallID: "c", Tool: "t"}}}
	if err := f.Apply(back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(AppendFrame(nil, f), AppendFrame(nil, target)) {
		t.Fatalf("after replace_frame: %+v, want %+v", f, target)
	}
	// The frame holds no memory of the delta: changing it later changes nothing.
	f.Memory["k"][0] = 'z'
	if AppendDelta(nil, back)[len(want)-4] != 'v' {
		t.Fatal("the applied frame aliases the delta's bytes")
	}
	ops := back.Ops()
	if len(ops) != 1 || ops[0].Kind != "replace_frame" || ops[0].Frame == nil || ops[0].Frame.Objective != "ship" {
		t.Fatalf("Ops: %+v", ops)
	}
	js, err := ops[0].MarshalJSON()
	if err != nil || !bytes.Contains(js, []byte(`"frame":[{"op":"set_objective","text":"ship"}`)) {
		t.Fatalf("MarshalJSON: %s, %v", js, err)
	}

	// The empty frame replaces too (a rollback to seq 0).
	var empty Frame
	if err := f.Apply(new(Delta).ReplaceFrame(nil)); err != nil || !bytes.Equal(AppendFrame(nil, f), AppendFrame(nil, &empty)) {
		t.Fatalf("replace with the empty frame: %v, %+v", err, f)
	}
}

// TestReplaceFrameOnlyOp: a replace_frame op beside another is refused,
// and so is one holding an invalid frame; the frame is unchanged.
func TestReplaceFrameOnlyOp(t *testing.T) {
	f := &Frame{Objective: "keep"}
	for name, d := range map[string]*Delta{
		"after another op":  new(Delta).Set("k", nil).ReplaceFrame(&Frame{}),
		"before another op": new(Delta).ReplaceFrame(&Frame{}).SetObjective("x"),
		"invalid frame":     new(Delta).ReplaceFrame(&Frame{Subgoals: []Subgoal{{ID: ""}}}),
	} {
		if err := f.Apply(d); !errors.Is(err, ErrInvalidOp) {
			t.Errorf("%s: Apply = %v, want ErrInvalidOp", name, err)
		}
		if f.Objective != "keep" {
			t.Fatalf("%s: a refused delta changed the frame", name)
		}
	}
}
