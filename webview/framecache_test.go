package webview

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestSteppedFramesAreStateAt: the frames the view builds by stepping from
// a kept one are the frames StateAt rebuilds, at every seq, in the order a
// slider visits them (forward, backward, jumps), on a run and its fork.
func TestSteppedFramesAreStateAt(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "s")
	db, err := engine.Open(dir, &engine.Options{Durability: engine.Relaxed})
	if err != nil {
		t.Fatal(err)
	}
	run, _ := db.Run(ctx, "r")
	const n = 1400
	for i := 1; i <= n; i++ {
		a, err := run.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d := new(frame.Delta).Set(fmt.Sprint("k", i%37), fmt.Append(nil, i)).
			AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: fmt.Sprint("step ", i)})
		if i%5 == 0 {
			d.DropMessages(2)
		}
		if i%97 == 0 {
			d.Delete(fmt.Sprint("k", (i+1)%37)).AddSubgoal(fmt.Sprint("g", i), "goal").AppendScratch([]byte("x"))
		}
		if err := a.Commit(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Fork(ctx, "r", 900, "f"); err != nil {
		t.Fatal(err)
	}
	fork, _ := db.Run(ctx, "f")
	for i := range 600 {
		a, _ := fork.Begin(ctx)
		if err := a.Commit(ctx, new(frame.Delta).Set("fork", fmt.Append(nil, i))); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	v, err := New(Options{Dir: dir, NoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	s, _ := v.acquire(ctx)
	defer v.release(s)
	p := &page{v: v, s: s, ctx: ctx, r: httptest.NewRequest("GET", "/", nil)}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, id := range []string{"r", "f"} {
		r, _ := s.in.Run(id)
		seqs := []uint64{r.LastSeq, r.LastSeq - 1, r.LastSeq - 2, r.LastSeq - 300, r.LastSeq - 299, 1000, 1001, 950, 600, 0, 1, 2, 3}
		for range 12 {
			seqs = append(seqs, rng.Uint64N(r.LastSeq+1))
		}
		for _, seq := range seqs {
			got, gotErased, err := p.stateAt(s.in, r, seq)
			if err != nil {
				t.Fatalf("%s at %d: %v", id, seq, err)
			}
			want, wantErased, err := s.in.StateAtWithErased(ctx, id, seq)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" || len(gotErased) != len(wantErased) {
				t.Fatalf("seed %d: %s at %d: stepped frame differs from StateAt (-want +got):\n%s", seed, id, seq, d)
			}
		}
	}
	if v.mu.frames.stepped < 10 {
		t.Fatalf("%d frames stepped: the test compared StateAt with itself", v.mu.frames.stepped)
	}
	t.Logf("%d frames stepped", v.mu.frames.stepped)
}

// TestFrameCacheBounds: however frames are kept, the cache holds at most
// framesPerRun frames of a run, framesRuns runs and maxCachedBytes in all,
// its byte count is the sum of what it holds, and the frame just kept is
// there to step from.
func TestFrameCacheBounds(t *testing.T) {
	v := &View{}
	big := strings.Repeat("o", maxCachedFrame/3) // shared by the clones: cheap to keep many
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	// A run's frame at a seq is one frame: a (run, seq) drawn again
	// keeps the size it was first given.
	type at struct {
		k   frameKey
		seq uint64
	}
	sizes := map[at]int{}
	for i := range 400 {
		k := frameKey{gen: uint64(rng.IntN(2)), run: fmt.Sprint("r", rng.IntN(12))}
		seq := rng.Uint64N(3000)
		n, ok := sizes[at{k, seq}]
		if !ok {
			n = rng.IntN(len(big))
			sizes[at{k, seq}] = n
		}
		f := &frame.Frame{Objective: big[:n]}
		v.keepFrame(k, seq, f)
		c := &v.mu.frames
		if got, g := v.nearestFrame(k, seq); g == nil || got != seq || g.Objective != f.Objective {
			t.Fatalf("seed %d step %d: the frame just kept (%v at %d) is not found", seed, i, k, seq)
		}
		sum := 0
		for _, fs := range c.frames {
			if len(fs) > framesPerRun {
				t.Fatalf("seed %d step %d: %d frames of a run", seed, i, len(fs))
			}
			for _, kf := range fs {
				sum += kf.size
			}
		}
		if sum != c.bytes || c.bytes > maxCachedBytes || len(c.order) > framesRuns || len(c.order) != len(c.frames) {
			t.Fatalf("seed %d step %d: %d bytes counted, %d held (at most %d), %d runs in order, %d kept",
				seed, i, c.bytes, sum, maxCachedBytes, len(c.order), len(c.frames))
		}
	}
	if v.keepFrame(frameKey{run: "huge"}, 1, &frame.Frame{Objective: strings.Repeat("o", maxCachedFrame+1)}); v.mu.frames.frames[frameKey{run: "huge"}] != nil {
		t.Fatal("a frame larger than maxCachedFrame was kept")
	}
}
