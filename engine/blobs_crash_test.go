package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/offline"
)

// TestBlobPowerLoss cuts the power at every (or, without -long, every
// few) filesystem operation of blob writes (a delta's value, Do's result,
// PutBlob), their commits, a deletion and a GC, beside an agent
// committing: after the restart every record's blob is there with its
// bytes (verify), and after the next GC no blob is left that no record
// references, nor any temporary file.
func TestBlobPowerLoss(t *testing.T) {
	base := vfs.NewCrashableMem()
	opts := func(fs vfs.FS) *Options {
		return &Options{FS: fs, NoSync: true, DictSamples: -1, BlobThreshold: 1 << 10, CompactDead: 0.01, SegmentSize: 256 << 10}
	}
	o := opts(base)
	o.NoSync = false
	db, err := Open("s", o)
	if err != nil {
		t.Fatal(err)
	}
	old := mustRun(db, "old")
	a, err := old.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("v", blobBytes(40, 300<<10))); err != nil {
		t.Fatal(err)
	}
	if err := old.End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	everyPowerCut(t, 6, 3, "the trial", func(t *testing.T, mode Durability, pct int, target uint64) uint64 {
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("crash at op %d: "+format, append([]any{target}, args...)...)
		}
		db, fs, _, ops := cutBeside(t, base, opts, mode, pct, target, func(db *DB) error {
			r, err := db.Run(ctx, "w")
			if err != nil {
				return err
			}
			for i := range 2 {
				a, err := r.Begin(ctx)
				if err != nil {
					return err
				}
				res, err := a.Do(ctx, ledger.Action{Tool: "fetch", Args: fmt.Appendf(nil, `{"i":%d}`, i)},
					func(context.Context, string) ([]byte, error) { return blobBytes(uint64(50+i), 200<<10), nil })
				if err != nil {
					return err
				}
				ref, err := a.PutBlob(ctx, "text/plain", bytes.NewReader(blobBytes(uint64(60+i), 1<<20+5)))
				if err != nil {
					return err
				}
				d := new(frame.Delta).AddPending(frame.Pending{CallID: fmt.Sprint("c", i), Tool: "fetch"}).
					ToolOutput(fmt.Sprint("c", i), "fetch", res).Set(fmt.Sprint("put", i), []byte(blob.Value(ref))).
					Set(fmt.Sprint("v", i), blobBytes(uint64(70+i), 100<<10))
				if err := a.Commit(ctx, d); err != nil {
					return err
				}
			}
			if _, err := db.Delete(ctx, "old"); err != nil {
				return err
			}
			_, err = db.GC(ctx)
			return err
		})
		// Every value the restarted state holds reads back.
		if r, err := db.Run(ctx, "w"); err == nil {
			st := r.State()
			for k, v := range st.Memory {
				rc, err := r.OpenValue(ctx, v)
				if err != nil {
					fail("value %s: %v", k, err)
				}
				if _, err := io.Copy(io.Discard, rc); err != nil {
					fail("value %s: %v", k, err)
				}
				rc.Close()
			}
		}
		if err := db.Close(); err != nil {
			fail("close: %v", err)
		}
		rep, err := Verify(ctx, "s", &VerifyOptions{FS: fs, Deep: true})
		if err != nil || !rep.OK {
			fail("verify after the restart: %v %+v", err, rep.Failures)
		}
		o := opts(fs)
		o.Durability = mode
		db, err = Open("s", o)
		if err != nil {
			fail("reopen: %v", err)
		}
		if _, err := db.GC(ctx); err != nil {
			fail("GC: %v", err)
		}
		live := map[string]bool{}
		if err := db.blobs.Live(ctx, live); err != nil {
			fail("live blobs: %v", err)
		}
		if err := db.Close(); err != nil {
			fail("close: %v", err)
		}
		names, _ := fs.List("s/blobs")
		for _, n := range names {
			if !live[n] {
				fail("after GC, blob file %s is not referenced by any record", n)
			}
		}
		rep, err = Verify(ctx, "s", &VerifyOptions{FS: fs, Deep: true})
		if err != nil || !rep.OK {
			fail("verify after GC: %v %+v", err, rep.Failures)
		}
		return ops
	})
}

// TestBlobErasePowerLoss cuts the power at every few operations of an
// erasure of a run with blobs and the GC after it, in an encrypted store:
// after the restart the run is erased and its blob unreadable, or not
// erased and its blob intact; either way verify passes, and after the
// next GC only the blobs of runs not erased are left.
func TestBlobErasePowerLoss(t *testing.T) {
	base := vfs.NewCrashableMem()
	ring := testRing(t, "k1", "k1")
	opts := func(fs vfs.FS) *Options {
		o := encOpts(fs, ring)
		o.BlobThreshold, o.Logger = 1<<10, slog.New(slog.DiscardHandler)
		return o
	}
	o := opts(base)
	o.NoSync = false
	db, err := Open("s", o)
	if err != nil {
		t.Fatal(err)
	}
	value := map[string][]byte{"gone": blobBytes(90, 300<<10), "kept": blobBytes(91, 300<<10)}
	for _, id := range []string{"gone", "kept"} {
		r := mustRun(db, id)
		a, err := r.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Commit(ctx, new(frame.Delta).Set("v", value[id])); err != nil {
			t.Fatal(err)
		}
	}
	if err := mustRun(db, "gone").End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	goneRef, _ := blob.ParseValueBytes(mustRun(db, "gone").State().Memory["v"])
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	everyPowerCut(t, 4, 2, "the trial", func(t *testing.T, mode Durability, pct int, target uint64) uint64 {
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("crash at op %d: "+format, append([]any{target}, args...)...)
		}
		db, fs, _, ops := cutBeside(t, base, opts, mode, pct, target, func(db *DB) error {
			if _, err := db.Erase(ctx, "gone", ""); err != nil {
				return err
			}
			_, err := db.GC(ctx)
			return err
		})
		_, gerr := db.Run(ctx, "gone")
		erased := errors.Is(gerr, ErrRunErased)
		kept := mustRun(db, "kept")
		if got := readValue(t, kept, kept.State().Memory["v"]); !bytes.Equal(got, value["kept"]) {
			fail("run kept's blob read back wrong")
		}
		if !erased {
			gone := mustRun(db, "gone")
			if got := readValue(t, gone, gone.State().Memory["v"]); !bytes.Equal(got, value["gone"]) {
				fail("run gone, not erased, has lost its blob")
			}
		}
		if _, err := db.GC(ctx); err != nil {
			fail("GC: %v", err)
		}
		if err := db.Close(); err != nil {
			fail("close: %v", err)
		}
		rep, err := Verify(ctx, "s", &VerifyOptions{FS: fs, Keyring: ring, Deep: true})
		if err != nil || !rep.OK {
			fail("verify (erased %v): %v %+v", erased, err, rep.Failures)
		}
		names, _ := fs.List("s/blobs")
		want := 2
		if erased {
			want = 1
		}
		if len(names) != want {
			fail("erased %v: %d files in blobs/ after GC, want %d: %v", erased, len(names), want, names)
		}
		if erased {
			if _, err := offline.OpenBlob("s", goneRef, &offline.BlobOptions{FS: fs, Keyring: ring}); err == nil {
				fail("an erased run's blob opened")
			}
		}
		return ops
	})
}

// TestBlobSweepBesideWriters: GCs run while agents write blobs (a slow
// stream among them), commit references to them and copy references
// across runs, and runs are deleted: no GC removes a blob a committed
// record references, and a slow stream does not hold the GCs up.
func TestBlobSweepBesideWriters(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	fs := vfs.NewMem()
	db, err := Open("s", &Options{FS: fs, NoSync: true, DictSamples: -1, BlobThreshold: 1 << 10, CompactDead: 0.01, SegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	const agents, turns = 3, 12
	var wg sync.WaitGroup
	errs := make(chan error, agents+2)
	stop := make(chan struct{})
	for g := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for i := range turns {
				id := fmt.Sprintf("a%d-%d", g, i/4)
				r, err := db.Run(ctx, id)
				if err != nil {
					errs <- err
					return
				}
				a, err := r.Begin(ctx)
				if err != nil {
					errs <- err
					return
				}
				// Often the same bytes as another agent's: dedup under sweeps.
				ref, err := a.PutBlob(ctx, "", bytes.NewReader(blobBytes(uint64(rng.IntN(6)), 40<<10)))
				if err != nil {
					errs <- err
					return
				}
				if err := a.Commit(ctx, new(frame.Delta).Set(fmt.Sprint("k", i), []byte(blob.Value(ref))).Set(fmt.Sprint("v", i), blobBytes(uint64(100+rng.IntN(6)), 20<<10))); err != nil {
					errs <- err
					return
				}
				if i%4 == 3 {
					if err := r.End(ctx, StatusCompleted, nil); err != nil {
						errs <- err
						return
					}
					if i/4 == 0 {
						if _, err := db.Delete(ctx, id); err != nil {
							errs <- err
							return
						}
					}
				}
			}
		}()
	}
	// A slow stream: an upload that trickles in during the GCs.
	wg.Add(1)
	go func() {
		defer wg.Done()
		r, err := db.Run(ctx, "slow")
		if err != nil {
			errs <- err
			return
		}
		a, err := r.Begin(ctx)
		if err != nil {
			errs <- err
			return
		}
		pr, pw := io.Pipe()
		go func() {
			for range 20 {
				pw.Write(blobBytes(7, 8<<10))
				time.Sleep(5 * time.Millisecond)
			}
			pw.Close()
		}()
		ref, err := a.PutBlob(ctx, "", pr)
		if err == nil {
			err = a.Commit(ctx, new(frame.Delta).Set("slow", []byte(blob.Value(ref))))
		}
		if err != nil {
			errs <- err
		}
	}()
	gcs := 0
	var gcWG sync.WaitGroup
	gcWG.Add(1)
	go func() {
		defer gcWG.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := db.GC(ctx); err != nil {
				errs <- err
				return
			}
			gcs++
		}
	}()
	wg.Wait()
	close(stop)
	gcWG.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, err := db.GC(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range db.runList() {
		for k, v := range r.State().Memory {
			rc, err := r.OpenValue(ctx, v)
			if err != nil {
				t.Fatalf("run %s key %s after %d GCs: %v", r.ID(), k, gcs, err)
			}
			if _, err := io.Copy(io.Discard, rc); err != nil {
				t.Fatalf("run %s key %s: %v", r.ID(), k, err)
			}
			rc.Close()
		}
	}
	t.Logf("%d GCs beside the writers", gcs)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	verifyDeep(t, fs, nil)
}
