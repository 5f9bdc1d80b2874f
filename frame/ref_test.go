package frame

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// resolverOf resolves from a slice, failing for an index it does not hold
// or holds no result for, and counts its calls.
func resolverOf(results [][]byte, calls *[]int) Resolver {
	return func(i int) ([]byte, error) {
		if calls != nil {
			*calls = append(*calls, i)
		}
		if i < 0 || i >= len(results) || results[i] == nil {
			return nil, fmt.Errorf("no certified result %d", i)
		}
		return results[i], nil
	}
}

// texts returns the texts of d that a reference may stand for.
func texts(d *Delta) []string {
	var out []string
	for i := range d.ops {
		o := &d.ops[i]
		switch o.kind {
		case opToolOutput:
			out = append(out, o.s3)
		case opAppendMessage:
			out = append(out, o.s2)
			if o.ext != nil {
				for _, p := range o.ext.parts {
					if p.Kind == PartText || p.Kind == PartToolResult {
						out = append(out, p.Text)
					}
				}
			}
		}
	}
	return out
}

// TestReferResultsLaw checks what the engine will rely on: a delta whose
// texts refer to certified results, encoded, decoded and applied with a
// resolver of those results, gives exactly the frame the delta with the
// texts inline gives, at every step; it is never larger; and the delta it
// was made from is not changed.
func TestReferResultsLaw(t *testing.T) {
	g := newGen(testSeed(t))
	live, replayed := &Frame{}, &Frame{}
	referred, saved := 0, 0
	for i := 0; i < 300; i++ {
		d := g.delta(live)
		before := AppendDelta(nil, d)
		// The atom's results: some of its texts, an unrelated one, a hole.
		results := [][]byte{nil, []byte("unrelated result")}
		for _, s := range texts(d) {
			if s != "" && g.r.IntN(2) == 0 {
				results = append(results, []byte(s))
			}
		}
		r := d.ReferResults(results)
		if !bytes.Equal(AppendDelta(nil, d), before) {
			t.Fatalf("delta %d: ReferResults changed the delta it was given", i)
		}
		enc := AppendDelta(nil, r)
		if len(enc) != EncodedDeltaSize(r) {
			t.Fatalf("delta %d: EncodedDeltaSize %d, encoded %d", i, EncodedDeltaSize(r), len(enc))
		}
		if len(enc) > len(before) {
			t.Fatalf("delta %d: %d bytes with references, %d without", i, len(enc), len(before))
		}
		refs := r.Refs()
		if got, err := DeltaRefs(nil, enc); err != nil || !slices.Equal(got, refs) {
			t.Fatalf("delta %d: DeltaRefs %v, %v; Refs of the delta %v", i, got, err, refs)
		}
		if (len(refs) > 0) != (MayRefer(enc) && r != d) {
			t.Fatalf("delta %d: refs %v, tag %x, same delta %v", i, refs, enc[0], r == d)
		}
		for _, ix := range refs {
			if ix < 2 {
				t.Fatalf("delta %d: refers to result %d, which is not one of its texts", i, ix)
			}
		}
		referred += len(refs)
		saved += len(before) - len(enc)

		back, err := DecodeDelta(enc)
		if err != nil {
			t.Fatalf("delta %d: %v", i, err)
		}
		if diff := cmp.Diff(r, back, deltaCmp); diff != "" {
			t.Fatalf("delta %d: decode(encode(r)) != r (-want +got):\n%s", i, diff)
		}
		resolved, err := back.Resolve(resolverOf(results, nil))
		if err != nil {
			t.Fatalf("delta %d: %v", i, err)
		}
		if diff := cmp.Diff(d, resolved, deltaCmp); diff != "" {
			t.Fatalf("delta %d: Resolve(ReferResults(d)) != d (-want +got):\n%s", i, diff)
		}
		var called []int
		if err := replayed.ApplyWith(back, resolverOf(results, &called)); err != nil {
			t.Fatalf("delta %d: ApplyWith: %v", i, err)
		}
		if len(refs) == 0 && len(called) != 0 {
			t.Fatalf("delta %d: the resolver was called (%v) for a delta without references", i, called)
		}
		if err := live.Apply(d); err != nil {
			t.Fatalf("delta %d: %v", i, err)
		}
		if !bytes.Equal(AppendFrame(nil, replayed), AppendFrame(nil, live)) {
			t.Fatalf("delta %d: the frame replayed through references differs from the live one", i)
		}
	}
	if referred == 0 || saved == 0 {
		t.Fatalf("the test made no references (%d) or saved nothing (%d bytes)", referred, saved)
	}
	t.Logf("%d references saved %d bytes", referred, saved)
}

// TestReferResultsWhat: which texts become references, and to which
// result.
func TestReferResultsWhat(t *testing.T) {
	out := []byte(`{"status":"created","bucket":"logs-prod-7"}`)
	var d Delta
	d.ToolOutput("c1", "create_bucket", out).
		AppendMessage(Message{Role: RoleTool, CallID: "c1", Content: string(out)}).
		AppendMessage(Message{Role: RoleUser, Parts: []Part{
			{Kind: PartToolResult, CallID: "c1", Text: string(out)},
			{Kind: PartText, Text: "sent"},
		}}).
		AppendMessage(Message{Role: RoleAssistant, Content: "sent"}).
		Set("bucket", out)
	// results 1 and 3 are both "sent": the lowest index wins. Memory values
	// are not message texts and stay inline.
	results := [][]byte{nil, []byte("sent"), out, []byte("sent")}
	r := d.ReferResults(results)
	ops := r.Ops()
	got := make([]string, len(ops))
	for i, o := range ops {
		got[i] = fmt.Sprint(o.Kind, " ", o.Refs)
	}
	want := []string{
		"tool_output_ref [{/content 2}]",
		"append_message [{/content 2}]",
		"append_message [{/parts/0/text 2} {/parts/1/text 1}]",
		"append_message [{/content 1}]",
		"set []",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("references (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{2, 1}, r.Refs()); diff != "" {
		t.Fatalf("Refs (-want +got):\n%s", diff)
	}
	if ops[0].Content != "" || ops[1].Content != "" || ops[2].Parts[0].Text != "" {
		t.Fatal("a referred text is still held by the delta")
	}
	js, err := json.Marshal(ops[2])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"refs":[{"path":"/parts/0/text","result":2},{"path":"/parts/1/text","result":1}]`) {
		t.Fatalf("JSON of a referring op: %s", js)
	}
	if n, m := EncodedDeltaSize(r), EncodedDeltaSize(&d); n >= m-3*len(out) {
		t.Fatalf("%d bytes with references, %d without: the %d-byte result is still stored", n, m, len(out))
	}

	// Nothing to refer to: the same delta comes back.
	if d.ReferResults(nil) != &d || d.ReferResults([][]byte{[]byte("other"), {}}) != &d {
		t.Fatal("ReferResults without a match did not return its delta")
	}
	if (*Delta)(nil).ReferResults(results) != nil || (*Delta)(nil).Refs() != nil {
		t.Fatal("nil delta")
	}
	// A delta made by ReferResults can be referred again without change.
	if again := r.ReferResults(results); !bytes.Equal(AppendDelta(nil, again), AppendDelta(nil, r)) {
		t.Fatal("referring a referring delta changed it")
	}
}

// TestApplyWithFailures: every way a reference can fail to resolve leaves
// the frame unchanged, with an error that says which op and result, and
// wraps the resolver's error.
func TestApplyWithFailures(t *testing.T) {
	base := func() *Frame {
		f := &Frame{}
		var d Delta
		d.AddPending(Pending{CallID: "c1", Tool: "create_bucket"}).AppendMessage(Message{Role: RoleUser, Content: "go"})
		if err := f.Apply(&d); err != nil {
			t.Fatal(err)
		}
		return f
	}
	var d Delta
	d.SetObjective("changed").ToolOutputResult("c1", "create_bucket", 1)
	errGone := errors.New("certificate not found")
	f := base()
	want := AppendFrame(nil, f)

	for _, tc := range []struct {
		name  string
		apply func() error
		is    []error
		msg   string
	}{
		{"Apply", func() error { return f.Apply(&d) }, []error{ErrInvalidOp, ErrUnresolved}, "op 1 (tool_output_ref): refers to certified result 1, which Apply cannot resolve"},
		{"CanApply", func() error { return f.CanApply(&d) }, []error{ErrInvalidOp, ErrUnresolved}, "apply it with ApplyWith"},
		{"nil resolver", func() error { return f.ApplyWith(&d, nil) }, []error{ErrUnresolved}, "op 1 (tool_output_ref): certified result 1: no resolver given"},
		{"resolver fails", func() error {
			return f.ApplyWith(&d, func(int) ([]byte, error) { return nil, errGone })
		}, []error{ErrUnresolved, errGone}, "certified result 1: certificate not found"},
		{"CanApplyWith fails", func() error {
			return f.CanApplyWith(&d, func(int) ([]byte, error) { return nil, errGone })
		}, []error{ErrUnresolved, errGone}, "certificate not found"},
		{"negative index", func() error {
			var n Delta
			return f.ApplyWith(n.ToolOutputResult("c1", "create_bucket", -1), resolverOf(nil, nil))
		}, []error{ErrInvalidOp, ErrUnresolved}, "out of range"},
		{"resolved delta cannot apply", func() error {
			var n Delta
			n.ToolOutputResult("c1", "create_bucket", 0).RemovePending("c1")
			return f.ApplyWith(&n, resolverOf([][]byte{[]byte("ok")}, nil))
		}, []error{ErrInvalidOp}, `op 1 (remove_pending): no pending call "c1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.apply()
			for _, is := range tc.is {
				if !errors.Is(err, is) {
					t.Fatalf("error %v does not match %v", err, is)
				}
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not say %q", err, tc.msg)
			}
			if !bytes.Equal(AppendFrame(nil, f), want) {
				t.Fatal("a failed apply changed the frame")
			}
		})
	}

	// Applied: the output is the result, the pending call is gone, and the
	// frame keeps its own copy of the resolver's bytes.
	buf := []byte(`{"ok":true}`)
	if err := f.CanApplyWith(&d, resolverOf([][]byte{nil, buf}, nil)); err != nil {
		t.Fatal(err)
	}
	if err := f.ApplyWith(&d, resolverOf([][]byte{nil, buf}, nil)); err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXXXXXXXX")
	wantF := &Frame{Objective: "changed", Messages: []Message{
		{Role: RoleUser, Content: "go"},
		{Role: RoleTool, Tool: "create_bucket", CallID: "c1", Content: `{"ok":true}`},
	}}
	if diff := cmp.Diff(wantF, f, frameCmp); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}
