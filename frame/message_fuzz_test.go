package frame_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzMessage builds messages from arbitrary field values (roles, part
// kinds, ids, JSON that may not be JSON, stray fields) and checks what
// Apply promises: it never panics; it refuses a message exactly when
// Validate refuses a frame holding it, leaving the frame unchanged; and
// what it accepts survives the delta and frame codecs, and references to
// certified results, unchanged.
func FuzzMessage(f *testing.F) {
	f.Add(uint8(2), "", []byte{}, "", "call_1", "create_bucket", []byte(`{"region":"eu-west-1"}`), []byte(nil), false, uint8(1))
	f.Add(uint8(1), "", []byte{2, 0, 3}, `{"ok":true}`, "toolu_1", "", []byte(nil), []byte(`[{"type":"text","text":"x"}]`), true, uint8(0))
	f.Add(uint8(2), "", []byte{0, 1, 1}, "thinking", "toolu_2", "ls", []byte(`{}`), []byte(`{"type":"thinking"}`), false, uint8(0))
	f.Add(uint8(3), "permission denied", []byte{}, "", "call_9", "rm", []byte(nil), []byte(nil), true, uint8(0))
	f.Add(uint8(4), "be brief", []byte{3}, "", "", "", []byte(nil), []byte(`{"type":"image_url"}`), false, uint8(0))
	f.Add(uint8(2), "x", []byte{1, 0x21}, "y", "a", "b", []byte(`{"a":`), []byte(` [1]`), true, uint8(3))
	f.Fuzz(func(t *testing.T, role uint8, content string, kinds []byte, text, id, name string, args, js []byte, isErr bool, ncalls uint8) {
		if len(kinds) > 8 {
			kinds = kinds[:8]
		}
		m := frame.Message{Role: frame.Role(role), Content: content, IsError: isErr}
		for i := 0; i < int(ncalls%4); i++ {
			m.ToolCalls = append(m.ToolCalls, frame.ToolCall{ID: id + string(rune('a'+i%2)), Name: name, Arguments: args})
		}
		for i, k := range kinds {
			p := frame.Part{Kind: frame.PartKind(k & 0x0f)}
			// The high bits choose which fields to set, fitting or not.
			if k&0x10 != 0 {
				p.Text = text
			}
			if k&0x20 != 0 {
				p.Call = frame.ToolCall{ID: id + string(rune('0'+i)), Name: name, Arguments: args}
			}
			if k&0x40 != 0 {
				p.CallID = id
				p.IsError = isErr
			}
			if k&0x80 != 0 {
				p.JSON = js
			}
			m.Parts = append(m.Parts, p)
		}

		base := &frame.Frame{Objective: "o", Messages: []frame.Message{{Role: frame.RoleUser, Content: "hi"}}}
		want := frame.AppendFrame(nil, base)
		var d frame.Delta
		d.AppendMessage(m)
		err := base.Apply(&d)
		verr := (&frame.Frame{Messages: []frame.Message{m}}).Validate()
		if (err == nil) != (verr == nil) {
			t.Fatalf("Apply says %v, Validate says %v", err, verr)
		}
		if err != nil {
			if !errors.Is(err, frame.ErrInvalidOp) || !errors.Is(verr, frame.ErrInvalidFrame) {
				t.Fatalf("errors match no sentinel: %v; %v", err, verr)
			}
			if !bytes.Equal(frame.AppendFrame(nil, base), want) {
				t.Fatal("a failed Apply changed the frame")
			}
			return
		}
		eq := cmpopts.EquateEmpty()
		if diff := cmp.Diff(m, base.Messages[1], eq); diff != "" {
			t.Fatalf("applied message differs (-want +got):\n%s", diff)
		}
		fb, err := frame.DecodeFrame(frame.AppendFrame(nil, base))
		if err != nil {
			t.Fatalf("frame holding an accepted message does not decode: %v", err)
		}
		if diff := cmp.Diff(base, fb, eq); diff != "" {
			t.Fatalf("frame after encoding differs (-want +got):\n%s", diff)
		}
		results := [][]byte{[]byte(content), []byte(text)}
		r := d.ReferResults(results)
		back, err := frame.DecodeDelta(frame.AppendDelta(nil, r))
		if err != nil {
			t.Fatalf("delta does not decode: %v", err)
		}
		g := &frame.Frame{}
		if err := g.ApplyWith(back, func(i int) ([]byte, error) { return results[i], nil }); err != nil {
			t.Fatalf("ApplyWith: %v", err)
		}
		if diff := cmp.Diff(m, g.Messages[0], eq); diff != "" {
			t.Fatalf("message through references differs (-want +got):\n%s", diff)
		}
	})
}
