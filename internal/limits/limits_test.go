package limits

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/frame"
)

var errs = Errors{TooLarge: errors.New("too large"), InvalidDelta: errors.New("invalid delta")}

func newFrame() *frame.Frame { return &frame.Frame{Memory: map[string][]byte{}} }

func TestMaxResult(t *testing.T) {
	for _, c := range []struct {
		seg  int64
		want int
	}{
		{64 << 20, MaxResultSize},
		{1 << 40, MaxResultSize},
		{1 << 20, 1<<20 - 1<<10},
		{1 << 10, 0},
		{100, 0},
	} {
		if got := MaxResult(c.seg); got != c.want {
			t.Errorf("MaxResult(%d) = %d, want %d", c.seg, got, c.want)
		}
	}
}

func TestTooLargeAdvice(t *testing.T) {
	err := CheckRecord(errs.TooLarge, "r", 3, "the atom's record", make([]byte, MaxSize+1))
	if !errors.Is(err, errs.TooLarge) || !strings.Contains(err.Error(), `run "r" seq 3`) ||
		!strings.Contains(err.Error(), "BlobThreshold") || !strings.Contains(err.Error(), "PutBlob") {
		t.Fatalf("error %q", err)
	}
	if err := CheckRecord(errs.TooLarge, "r", 3, "the atom's record", make([]byte, MaxSize)); err != nil {
		t.Fatalf("a record of MaxSize: %v", err)
	}
}

// TestCheckFrame: below the limit the bound grows by the delta's encoding
// and 2 bytes an op; past it the frame after the delta is measured
// exactly, refused only if that is past MaxSize.
func TestCheckFrame(t *testing.T) {
	f := newFrame()
	d := new(frame.Delta).Set("a", []byte("1")).Set("b", []byte("2"))
	base := int64(frame.EncodedFrameSize(f))
	got, err := CheckFrame(base, f, d, "r", 1, errs)
	if want := base + int64(frame.EncodedDeltaSize(d)) + 4; err != nil || got != want {
		t.Fatalf("Check = %d, %v; want %d", got, err, want)
	}

	big := bytes.Repeat([]byte{'x'}, 40<<20)
	f.Memory["k"] = big
	// The bound (the frame and the delta's value) is past the limit, the
	// frame after it (the value replaced) is not.
	d = new(frame.Delta).Set("k", big)
	got, err = CheckFrame(int64(frame.EncodedFrameSize(f)), f, d, "r", 2, errs)
	next := f.Clone()
	if err := next.Apply(d); err != nil {
		t.Fatal(err)
	}
	if want := int64(frame.EncodedFrameSize(next)); err != nil || got != want {
		t.Fatalf("Check past the bound = %d, %v; want the exact %d", got, err, want)
	}
	if _, ok := f.Memory["k"]; !ok || len(f.Memory) != 1 {
		t.Fatal("Check changed the frame")
	}

	d = new(frame.Delta).Set("k2", big[:30<<20])
	if _, err := CheckFrame(int64(frame.EncodedFrameSize(f)), f, d, "r", 2, errs); !errors.Is(err, errs.TooLarge) || !strings.Contains(err.Error(), "the frame after this delta") {
		t.Fatalf("a frame past MaxSize: %v", err)
	}
	d = new(frame.Delta).Set("k2", big[:30<<20]).SetSubgoalStatus("nope", frame.SubgoalDone)
	if _, err := CheckFrame(int64(frame.EncodedFrameSize(f)), f, d, "r", 2, errs); !errors.Is(err, errs.InvalidDelta) {
		t.Fatalf("a delta that does not apply: %v", err)
	}
}

// TestGrowth: Growth(d) is at least what applying d adds to a frame's
// encoding, for each kind of op on frames small and grown, and for many
// ops in one delta (where the frame's counts grow their varints).
func TestGrowth(t *testing.T) {
	grown := newFrame()
	for i := range 200 {
		grown.Memory[strings.Repeat("k", i%7+1)+string(rune('a'+i%26))] = bytes.Repeat([]byte{byte(i)}, i)
		grown.Messages = append(grown.Messages, frame.Message{Role: frame.RoleUser, Content: strings.Repeat("m", i)})
	}
	many := new(frame.Delta)
	for i := range 300 {
		many.AppendMessage(frame.Message{Role: frame.RoleTool, Content: "x", Tool: "t", CallID: string(rune('a' + i%26))})
		many.AddSubgoal(strings.Repeat("g", i+1), "")
	}
	deltas := map[string]*frame.Delta{
		"set":       new(frame.Delta).Set("a", []byte("1")).Set(strings.Repeat("b", 200), bytes.Repeat([]byte{2}, 300)),
		"objective": new(frame.Delta).SetObjective(strings.Repeat("o", 130)),
		"subgoal":   new(frame.Delta).AddSubgoal("s1", "text").SetSubgoalStatus("s1", frame.SubgoalDone),
		"scratch":   new(frame.Delta).AppendScratch(bytes.Repeat([]byte{3}, 128)),
		"message":   new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: strings.Repeat("c", 127)}),
		"pending":   new(frame.Delta).AddPending(frame.Pending{CallID: "c1", Tool: "t"}),
		"many":      many,
	}
	for name, d := range deltas {
		for _, f := range []*frame.Frame{newFrame(), grown} {
			next := f.Clone()
			if err := next.Apply(d); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			added := int64(frame.EncodedFrameSize(next) - frame.EncodedFrameSize(f))
			if g := Growth(d); added > g {
				t.Errorf("%s on a frame of %d bytes: adds %d bytes, Growth says at most %d", name, frame.EncodedFrameSize(f), added, g)
			}
		}
	}
}
