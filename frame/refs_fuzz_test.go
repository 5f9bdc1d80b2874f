package frame

import (
	"slices"
	"testing"
)

// refSeeds are deltas that refer to certified results in every way a
// delta can: a tool output, a message's content, parts' texts, the same
// result twice, beside ops that refer to nothing.
func refSeeds() [][]byte {
	results := [][]byte{[]byte("listing"), []byte("created"), []byte("text of a part")}
	var d Delta
	d.Set("k", []byte("v")).
		ToolOutput("c1", "ls", results[0]).
		AppendMessage(Message{Role: RoleTool, CallID: "c2", Tool: "mk", Content: "created"}).
		AppendMessage(Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c3", Name: "ls", Arguments: []byte(`{}`)}}}).
		AppendMessage(Message{Role: RoleUser, Parts: []Part{
			{Kind: PartText, Text: "text of a part"},
			{Kind: PartToolResult, CallID: "c1", Text: "listing", JSON: []byte(`{"n":1}`)},
			{Kind: PartText, Text: "inline"},
		}})
	var sealed Delta
	sealed.SetSealed("s", []byte{1}).ToolOutputResult("c", "ls", 7)
	return [][]byte{
		AppendDelta(nil, d.ReferResults(results)),
		AppendDelta(nil, &sealed),
		AppendDelta(nil, new(Delta).ToolOutputResult("c", "ls", 0).ToolOutputResult("d", "ls", 0)),
	}
}

// FuzzDeltaRefs holds DeltaRefs to what it promises against the decoder
// it stands in for: for any bytes it fails exactly when DecodeDelta does,
// with the same error, and otherwise returns the decoded delta's Refs,
// appended to what dst held.
func FuzzDeltaRefs(f *testing.F) {
	for _, b := range append(fuzzSeeds(), refSeeds()...) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeDelta(b)
		prefix := []int{-1}
		got, gerr := DeltaRefs(prefix, b)
		switch {
		case (err == nil) != (gerr == nil):
			t.Fatalf("DecodeDelta: %v; DeltaRefs: %v", err, gerr)
		case err != nil:
			if err.Error() != gerr.Error() {
				t.Fatalf("errors differ:\nDecodeDelta %v\nDeltaRefs   %v", err, gerr)
			}
		case len(got) == 0 || got[0] != -1:
			t.Fatalf("DeltaRefs dropped what dst held: %v", got)
		case !slices.Equal(got[1:], d.Refs()):
			t.Fatalf("DeltaRefs %v, Refs of the decoded delta %v", got[1:], d.Refs())
		}
	})
}

// TestDeltaRefsAllocs checks DeltaRefs' reason to exist: with room in dst
// it allocates nothing, for deltas that refer to results in every way.
func TestDeltaRefsAllocs(t *testing.T) {
	dst := make([]int, 0, 8)
	for i, b := range refSeeds() {
		want, err := DecodeDelta(b)
		if err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		if len(want.Refs()) == 0 {
			t.Fatalf("seed %d refers to no result", i)
		}
		if n := testing.AllocsPerRun(100, func() {
			if _, err := DeltaRefs(dst[:0], b); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("seed %d: %v allocations per DeltaRefs", i, n)
		}
	}
}
