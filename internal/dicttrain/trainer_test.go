package dicttrain

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
)

type host struct {
	ids []uint32
	err error
}

func (h *host) Replicate(id uint32, data []byte) error {
	h.ids = append(h.ids, id)
	return h.err
}

func newTrainer(t *testing.T, fs vfs.FS, samples int, encrypted bool, h Host) (*Trainer, *atomic.Uint32, *atomic.Int32) {
	t.Helper()
	if err := fs.MkdirAll("/s/"+layout.DictsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	cur, failed := new(atomic.Uint32), new(atomic.Int32)
	tr := New(Config{FS: fs, Dir: "/s", NoSync: true, Samples: samples, Size: 4 << 10, Encrypted: encrypted,
		Dicts: frame.NewDicts(), Current: cur, OnFailure: func() { failed.Add(1) }}, h)
	if err := tr.Load(); err != nil {
		t.Fatal(err)
	}
	return tr, cur, failed
}

func body(i int) []byte {
	return []byte(fmt.Sprintf(`{"role":"tool","name":"search","content":"result number %d of the agent's search for flights to Lisbon, %d"}`, i, i*7))
}

func TestTrainOnce(t *testing.T) {
	fs := vfs.NewMem()
	h := &host{}
	tr, cur, failed := newTrainer(t, fs, 64, false, h)
	for i := 0; i < 200; i++ {
		tr.Sample(body(i))
	}
	tr.Wait()
	if failed.Load() != 0 || cur.Load() != 1 || len(h.ids) != 1 || h.ids[0] != 1 {
		t.Fatalf("current %d, replicated %v, failures %d: want dictionary 1 trained, replicated and selected once", cur.Load(), h.ids, failed.Load())
	}
	// A new Trainer of the same store finds it and trains no other.
	h2 := &host{}
	tr2, cur2, _ := newTrainer(t, fs, 64, false, h2)
	for i := 0; i < 200; i++ {
		tr2.Sample(body(i))
	}
	tr2.Wait()
	if cur2.Load() != 1 || len(h2.ids) != 0 {
		t.Fatalf("reopened: current %d, replicated %v; want the stored dictionary 1 and no training", cur2.Load(), h2.ids)
	}
}

func TestNoTraining(t *testing.T) {
	for _, c := range []struct {
		name      string
		samples   int
		encrypted bool
	}{{"disabled", -1, false}, {"encrypted", 8, true}} {
		t.Run(c.name, func(t *testing.T) {
			h := &host{}
			tr, cur, _ := newTrainer(t, vfs.NewMem(), c.samples, c.encrypted, h)
			for i := 0; i < 100; i++ {
				tr.Sample(body(i))
			}
			tr.Wait()
			if cur.Load() != 0 || len(h.ids) != 0 {
				t.Fatalf("current %d, replicated %v: want no dictionary", cur.Load(), h.ids)
			}
		})
	}
}

func TestReplicateRefused(t *testing.T) {
	h := &host{err: errors.New("replica down")}
	tr, cur, failed := newTrainer(t, vfs.NewMem(), 32, false, h)
	for i := 0; i < 64; i++ {
		tr.Sample(body(i))
	}
	tr.Wait()
	if cur.Load() != 0 || failed.Load() != 1 || len(h.ids) != 1 {
		t.Fatalf("current %d, failures %d, replicated %v: a refused dictionary must stay unused and be reported", cur.Load(), failed.Load(), h.ids)
	}
}

func TestSampleCut(t *testing.T) {
	tr, _, _ := newTrainer(t, vfs.NewMem(), 1000, false, &host{})
	tr.Sample(make([]byte, 3*MaxSample))
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.mu.samples) != 1 || len(tr.mu.samples[0]) != MaxSample {
		t.Fatalf("sample of %d bytes kept as %d", 3*MaxSample, len(tr.mu.samples[0]))
	}
}

// TestCheckNewest: a CHECKPOINT written after a dictionary newer than the
// store's newest is log damage naming the missing file; one that names
// the newest, an older one or none, or no CHECKPOINT, is not.
func TestCheckNewest(t *testing.T) {
	fs := vfs.NewMem()
	tr, cur, _ := newTrainer(t, fs, -1, false, &host{})
	cur.Store(2)
	for _, dict := range []uint32{0, 1, 2} {
		if err := tr.CheckNewest(&layout.Checkpoint{Dict: dict, Gen: 7}, "/s/CHECKPOINT"); err != nil {
			t.Fatalf("CHECKPOINT naming dictionary %d, the newest 2: %v", dict, err)
		}
	}
	if err := tr.CheckNewest(nil, "/s/CHECKPOINT"); err != nil {
		t.Fatalf("no CHECKPOINT: %v", err)
	}
	err := tr.CheckNewest(&layout.Checkpoint{Dict: 3, Gen: 7}, "/s/CHECKPOINT")
	var ce *record.CorruptionError
	want := "/s/" + layout.DictsDir + "/" + layout.DictFileName(3)
	if !errors.As(err, &ce) || ce.File != want || !strings.Contains(err.Error(), "missing: /s/CHECKPOINT (generation 7) was written after it existed") {
		t.Fatalf("CHECKPOINT naming dictionary 3, the newest 2: %v, want damage at %s", err, want)
	}
}
