package snapshot

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestReplacedSnapshotsCompacted writes snapshots as the engine does (each
// new one replaces the last, in a synced batch that flushes it to a table)
// and checks that the space of the replaced ones is given back: the
// store's files end within a few times the live snapshots, where without
// compaction they would hold every snapshot written. The newest snapshot
// of each run reads back intact. Plain frames too: their chunks are
// deleted with the snapshots, counted as dead, and compacted.
func TestReplacedSnapshotsCompacted(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(map[bool]string{false: "opaque", true: "plain"}[plain], func(t *testing.T) { testReplacedSnapshotsCompacted(t, plain) })
	}
}

func testReplacedSnapshotsCompacted(t *testing.T, plain bool) {
	s := openMem(t, vfs.NewMem())
	const runs, rounds, size = 4, 40, 64 << 10
	rng := rand.New(rand.NewPCG(1, 2))
	frame := func(run, round int) []byte {
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(rng.Uint32()) // incompressible
		}
		b[0], b[1] = byte(run), byte(round)
		return b
	}
	last := make([][]byte, runs)
	for round := 1; round <= rounds; round++ {
		b := s.NewBatch()
		for r := range runs {
			id := string(rune('a' + r))
			last[r] = frame(r, round)
			if err := b.PutSnapshot(&Snapshot{RunID: id, Seq: uint64(round), Frame: last[r], Plain: plain, Created: time.Unix(int64(round), 0)}); err != nil {
				t.Fatal(err)
			}
			if round > 1 {
				if err := b.DeleteSnapshot(id, uint64(round-1)); err != nil {
					t.Fatal(err)
				}
			}
		}
		mustCommit(t, b, true)
	}
	// The last compaction runs in the background.
	deadline := time.Now().Add(30 * time.Second)
	for s.compacting.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	st := s.Stats()
	written := uint64(runs * rounds * size)
	live := uint64(runs * size)
	// A compaction waits for minDeadBytes of deleted snapshots, and one
	// that comes due while another runs waits for the next commit: up to
	// twice that lies on disk past the last one, however the rounds fell
	// (and Pebble removes the files a compaction replaced a moment later).
	limit := 4*live + 2*minDeadBytes
	if st.Compactions == 0 || st.DiskBytes > limit || limit*3 > written {
		t.Fatalf("after %d bytes of snapshots written, %d live: %d bytes on disk after %d compactions, want at most %d",
			written, live, st.DiskBytes, st.Compactions, limit)
	}
	for r := range runs {
		snap, err := s.Latest(string(rune('a' + r)))
		if err != nil {
			t.Fatal(err)
		}
		if snap.Seq != rounds || string(snap.Frame) != string(last[r]) {
			t.Fatalf("run %d: the newest snapshot read back is seq %d, %d bytes, not the one written", r, snap.Seq, len(snap.Frame))
		}
	}
	if st.Snapshots != runs {
		t.Fatalf("Stats.Snapshots = %d, want %d", st.Snapshots, runs)
	}
}
