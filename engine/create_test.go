package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

// TestCreateCrash: a power loss at any filesystem operation of a new
// store's life, from its first Open through the creation of a run (the
// first acknowledged write), a few atoms and Close, with 0, 30, 50, 70
// and 100 percent of the unsynced blocks and directory entries kept, leaves a
// directory that the next Open accepts, never refuses: a new store again
// when nothing was acknowledged, and otherwise the store with every
// acknowledged atom; either way it takes a write, and verifies.
func TestCreateCrash(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 16))
	type image struct {
		fs    *vfs.MemFS
		acked int // atoms acknowledged (0: not even the run's creation)
		at    string
	}
	mem := vfs.NewCrashableMem()
	var (
		mu     sync.Mutex
		acked  = -1 // the run is not created yet
		images []image
	)
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() != errorfs.OpIsWrite || op.Kind == errorfs.OpLock {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		for _, pct := range []int{0, 30, 50, 70, 100} {
			images = append(images, image{
				fs:    mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(rng.Uint64(), 0))}),
				acked: acked,
				at:    fmt.Sprintf("op %d on %s (unsynced kept %d%%)", op.Kind, op.Path, pct),
			})
		}
		return nil
	})
	opts := func(fs vfs.FS) *engine.Options {
		return &engine.Options{FS: &faultLockFS{FS: fs}, Logger: quietLogger()}
	}
	ctx := context.Background()
	db, err := engine.Open("store", opts(errorfs.Wrap(mem, inj)))
	if err != nil {
		t.Fatal(err)
	}
	run, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	acked = 0
	mu.Unlock()
	for i := 1; i <= 3; i++ {
		a, err := run.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Commit(ctx, new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: fmt.Sprint("atom ", i)})); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		acked = i
		mu.Unlock()
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if len(images) < 100 {
		t.Fatalf("only %d crash points", len(images))
	}
	for k, img := range images {
		what := fmt.Sprintf("image %d (crash before %s, %d atoms acknowledged)", k, img.at, img.acked)
		db, err := engine.Open("store", opts(img.fs))
		if err != nil {
			t.Fatalf("%s: Open: %v", what, err)
		}
		created := db.Stats().Open.Created
		runs, err := db.Runs()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		switch {
		case img.acked >= 0 && created:
			t.Fatalf("%s: the store was created again after the run's creation was acknowledged", what)
		case img.acked >= 0 && (len(runs) != 1 || runs[0].ID != "r" || runs[0].LastSeq < uint64(img.acked)):
			t.Fatalf("%s: runs %+v, want r with at least %d atoms", what, runs, img.acked)
		}
		// The store takes a write. (It also keeps verify from a store
		// whose log holds no record: verify reports the CHECKPOINT of one
		// opened and closed without a write as past the log's end.)
		if _, err := db.Run(ctx, "after"); err != nil {
			t.Fatalf("%s: a write after recovery: %v", what, err)
		}
		if err := db.Close(); err != nil {
			t.Fatalf("%s: Close: %v", what, err)
		}
		rep, err := engine.Verify(ctx, "store", &engine.VerifyOptions{FS: img.fs, Deep: true})
		if err != nil {
			t.Fatalf("%s: verify: %v", what, err)
		}
		if !rep.OK {
			t.Fatalf("%s: verify: %v", what, rep.Failures)
		}
	}
	t.Logf("%d crash points", len(images))
}
