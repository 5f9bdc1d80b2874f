package snapshot

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
)

// crashBatch writes batch i: a snapshot, ten positions and a metadata key,
// so that a partial batch would show as some of them without the others.
func crashBatch(st *Store, i int, sync bool) error {
	run := fmt.Sprintf("run-%d", i%3)
	b := st.NewBatch()
	pos := make([]Pos, 10)
	for j := range pos {
		pos[j] = Pos{Segment: uint64(i), Offset: int64(j)}
	}
	snap := testSnapshot(run, uint64(i+1))
	snap.Frame = make([]byte, 100+i*37%2000)
	for j := range snap.Frame {
		snap.Frame[j] = byte(i + j)
	}
	return errors.Join(
		b.PutSnapshot(snap),
		b.PutPositions(run, uint64(i*10+1), pos),
		b.PutMeta(fmt.Sprintf("batch/%d", i), []byte(run)),
		b.Commit(sync),
	)
}

// crashBatchPresent reports whether batch i is wholly present, wholly absent,
// or (an error) partly present or damaged.
func crashBatchPresent(st *Store, i int) (bool, error) {
	run := fmt.Sprintf("run-%d", i%3)
	seqs, err := st.Snapshots(run)
	if err != nil {
		return false, err
	}
	hasSnap := false
	for _, s := range seqs {
		if s == uint64(i+1) {
			hasSnap = true
		}
	}
	if hasSnap {
		got, err := st.AtOrBelow(run, uint64(i+1))
		if err != nil {
			return false, err
		}
		if got.Seq != uint64(i+1) || len(got.Frame) != 100+i*37%2000 {
			return false, fmt.Errorf("batch %d: snapshot %d with %d frame bytes", i, got.Seq, len(got.Frame))
		}
	}
	pos, perr := st.Positions(run, uint64(i*10+1), uint64(i*10+10))
	if perr != nil && !errors.Is(perr, ErrNotFound) {
		return false, perr
	}
	hasPos := perr == nil
	if hasPos {
		for j, p := range pos {
			if p != (Pos{Segment: uint64(i), Offset: int64(j)}) {
				return false, fmt.Errorf("batch %d: position %d = %+v", i, j, p)
			}
		}
	} else if _, err := st.Positions(run, uint64(i*10+1), uint64(i*10+1)); err == nil {
		return false, fmt.Errorf("batch %d: some positions present, not all: %v", i, perr)
	}
	_, merr := st.Meta(fmt.Sprintf("batch/%d", i))
	if merr != nil && !errors.Is(merr, ErrNotFound) {
		return false, merr
	}
	hasMeta := merr == nil
	if hasSnap != hasPos || hasPos != hasMeta {
		return false, fmt.Errorf("batch %d is partial: snapshot %v, positions %v, meta %v", i, hasSnap, hasPos, hasMeta)
	}
	return hasSnap, nil
}

// TestCrashRecovery commits batches, some synced, crashes the filesystem at a
// random point (keeping a random share of the unsynced data), and checks
// after reopening that every synced batch survived, that every batch is
// wholly present or wholly absent, that batches survive in commit order, and
// that the snapshot count agrees with the data.
func TestCrashRecovery(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	rounds := 40
	if testing.Short() {
		rounds = 8
	}
	for round := range rounds {
		memfs := vfs.NewCrashableMem()
		st, err := Open("store/snapshots", &Options{FS: memfs, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		n := 5 + rng.IntN(40)
		lastSynced := -1
		for i := range n {
			sync := rng.IntN(3) == 0
			if err := crashBatch(st, i, sync); err != nil {
				t.Fatalf("round %d batch %d: %v", round, i, err)
			}
			if sync {
				lastSynced = i
			}
		}
		pct := rng.IntN(101)
		crashed := memfs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(rng.Uint64(), 0))})
		st.Close()

		re, err := Open("store/snapshots", &Options{FS: crashed, Logger: discardLogger()})
		if err != nil {
			t.Fatalf("round %d (%d%% unsynced kept): reopen after crash: %v", round, pct, err)
		}
		present := -1
		for i := range n {
			ok, err := crashBatchPresent(re, i)
			if err != nil {
				t.Fatalf("round %d (%d%% unsynced kept): %v", round, pct, err)
			}
			if ok && present != i-1 {
				t.Fatalf("round %d: batch %d survived but batch %d did not", round, i, present+1)
			}
			if ok {
				present = i
			}
		}
		if present < lastSynced {
			t.Fatalf("round %d (%d%% unsynced kept): synced batch %d lost; only %d survived", round, pct, lastSynced, present+1)
		}
		var count int64
		for r := range 3 {
			seqs, err := re.Snapshots(fmt.Sprintf("run-%d", r))
			if err != nil {
				t.Fatal(err)
			}
			count += int64(len(seqs))
		}
		if got := re.Stats().Snapshots; got != count || count != int64(present+1) {
			t.Fatalf("round %d: Stats().Snapshots = %d, store holds %d, %d batches survived", round, got, count, present+1)
		}
		// The recovered store takes writes and keeps them.
		if err := crashBatch(re, present+1, true); err != nil {
			t.Fatalf("round %d: writing after recovery: %v", round, err)
		}
		if ok, err := crashBatchPresent(re, present+1); !ok || err != nil {
			t.Fatalf("round %d: batch written after recovery: %v, %v", round, ok, err)
		}
		re.Close()
	}
}

// TestCrashDuringConcurrentCommits crashes while a writer commits synced
// batches: every batch whose Commit returned before the crash survives.
func TestCrashDuringConcurrentCommits(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	memfs := vfs.NewCrashableMem()
	st, err := Open("s", &Options{FS: memfs, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	acked := make(chan int, 1000)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		defer close(acked)
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := crashBatch(st, i, true); err != nil {
				done <- err
				return
			}
			select {
			case acked <- i:
			default:
				done <- nil
				return
			}
		}
	}()
	var lastAcked = -1
	want := 5 + rng.IntN(30)
	for lastAcked < want {
		i, ok := <-acked
		if !ok {
			break
		}
		lastAcked = i
	}
	crashed := memfs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rand.New(rand.NewPCG(rng.Uint64(), 0))})
	close(stop)
	for range acked {
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st.Close()

	re, err := Open("s", &Options{FS: crashed, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	for i := 0; i <= lastAcked; i++ {
		ok, err := crashBatchPresent(re, i)
		if err != nil || !ok {
			t.Fatalf("acknowledged batch %d after crash: present %v, %v", i, ok, err)
		}
	}
	// Whatever else survived is whole.
	for i := lastAcked + 1; i < lastAcked+50; i++ {
		if _, err := crashBatchPresent(re, i); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(uint64(0), re.Stats().BackgroundErrors); diff != "" {
		t.Errorf("background errors (-want +got):\n%s", diff)
	}
}
