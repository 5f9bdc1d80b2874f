package frame

import (
	"strings"
	"testing"
)

// TestMapValues: MapValues replaces exactly the free-form values, leaves
// the delta it was given unchanged, and Values visits what it maps.
func TestMapValues(t *testing.T) {
	d := new(Delta).Set("k", []byte("BIG-memory")).Set("s", []byte("small")).
		AddPending(Pending{CallID: "c", Tool: "t", Args: []byte(`{"BIG":1}`)}).
		ToolOutput("c", "t", []byte("BIG-output")).
		AppendMessage(Message{Role: RoleUser, Content: "BIG-content"}).
		AppendMessage(Message{Role: RoleUser, Parts: []Part{{Kind: PartText, Text: "BIG-part"}, {Kind: PartJSON, JSON: []byte(`{"BIG":2}`)}}}).
		SetObjective("BIG-objective")
	before := d.String()
	var seen []string
	if err := d.Values(func(v []byte) { seen = append(seen, string(v)) }); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(seen, ","); got != "BIG-memory,small,BIG-output,BIG-content,,BIG-part" {
		t.Fatalf("Values visited %s", got)
	}
	m, err := d.MapValues(func(v []byte) (string, bool, error) {
		if strings.HasPrefix(string(v), "BIG") {
			return "ref:" + string(v), true, nil
		}
		return "", false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d.String() != before {
		t.Fatal("MapValues changed its delta")
	}
	f := &Frame{}
	if err := f.Apply(m); err != nil {
		t.Fatal(err)
	}
	if string(f.Memory["k"]) != "ref:BIG-memory" || string(f.Memory["s"]) != "small" || f.Objective != "BIG-objective" {
		t.Fatalf("memory %q objective %q", f.Memory, f.Objective)
	}
	if f.Messages[0].Content != "ref:BIG-output" || f.Messages[1].Content != "ref:BIG-content" || f.Messages[2].Parts[0].Text != "ref:BIG-part" {
		t.Fatalf("messages %+v", f.Messages)
	}
	seen = nil
	f.Values(func(v []byte) { seen = append(seen, string(v)) })
	if len(seen) != 6 {
		t.Fatalf("Frame.Values visited %q", seen)
	}
	if same, _ := d.MapValues(func([]byte) (string, bool, error) { return "", false, nil }); same != d {
		t.Fatal("MapValues that replaces nothing did not return its delta")
	}
}

// FuzzDeltaValues: on any delta that decodes, Values visits without
// failing but for a replace_frame's frame, and MapValues gives a delta
// that encodes and decodes again, holding the replacement wherever Values
// saw a value.
func FuzzDeltaValues(f *testing.F) {
	seeds := []*Delta{
		new(Delta).Set("k", []byte("v")).ToolOutput("c", "t", []byte("out")),
		new(Delta).AppendMessage(Message{Role: RoleUser, Parts: []Part{{Kind: PartText, Text: "p"}, {Kind: PartJSON, JSON: []byte(`{}`)}}}),
		new(Delta).AppendMessage(Message{Role: RoleTool, Content: "c", CallID: "x"}).SetObjective("o"),
		new(Delta).ToolOutputResult("c", "t", 0),
		new(Delta).ReplaceFrame(&Frame{Memory: map[string][]byte{"k": []byte("v")}, Messages: []Message{{Role: RoleUser, Content: "m"}}}),
	}
	for _, d := range seeds {
		f.Add(AppendDelta(nil, d))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeDelta(b)
		if err != nil {
			return
		}
		n := 0
		if d.Values(func([]byte) { n++ }) != nil {
			return
		}
		m, err := d.MapValues(func(v []byte) (string, bool, error) { return "x" + string(v), true, nil })
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeDelta(AppendDelta(nil, m))
		if err != nil {
			t.Fatalf("a mapped delta does not decode: %v", err)
		}
		if b[0] == tagDelta3 {
			return // a replace_frame's frame is not mapped (MapValues says why)
		}
		seen := 0
		if err := again.Values(func(v []byte) {
			seen++
			if len(v) == 0 || v[0] != 'x' {
				t.Fatalf("a value was not mapped: %q", v)
			}
		}); err != nil {
			t.Fatal(err)
		}
		if seen != n {
			t.Fatalf("mapped %d values, the original had %d", seen, n)
		}
	})
}
