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
	last := writeReplacing(t, s, runs, rounds, size, plain)
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
	checkNewest(t, s, last, rounds)
	if st.Snapshots != runs {
		t.Fatalf("Stats.Snapshots = %d, want %d", st.Snapshots, runs)
	}
}

// TestCloseCompactsReplaced: snapshots replaced since the last compaction,
// too few for one in the background (under minDeadBytes) or for Pebble's
// own (two tables in level 0), are compacted by Close: after a reopen the store's files hold about the live
// snapshots, where before Close they held every one written. The newest
// snapshots read back intact after the reopen.
func TestCloseCompactsReplaced(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(map[bool]string{false: "opaque", true: "plain"}[plain], func(t *testing.T) {
			memfs := vfs.NewMem()
			s, err := Open("db/snapshots", &Options{FS: memfs})
			if err != nil {
				t.Fatal(err)
			}
			const runs, rounds, size = 4, 2, 64 << 10
			last := writeReplacing(t, s, runs, rounds, size, plain)
			live := uint64(runs * size)
			limit := live + live/4 + 64<<10 // tables' framing, MANIFEST, OPTIONS
			before := s.Stats()
			if before.Compactions != 0 || before.DiskBytes <= limit {
				t.Fatalf("before Close: %d compactions, %d bytes on disk: the test needs none and more than %d", before.Compactions, before.DiskBytes, limit)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open("db/snapshots", &Options{FS: memfs})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if st := s.Stats(); st.DiskBytes > limit {
				t.Fatalf("after Close and a reopen: %d bytes on disk (%d before Close), want at most %d for %d live", st.DiskBytes, before.DiskBytes, limit, live)
			}
			checkNewest(t, s, last, rounds)
		})
	}
}

// writeReplacing writes rounds of one snapshot of size incompressible
// bytes per run, each round in a synced batch that deletes the round
// before's, and returns each run's newest frame.
func writeReplacing(t *testing.T, s *Store, runs, rounds, size int, plain bool) [][]byte {
	t.Helper()
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
	return last
}

// checkNewest checks that each run's newest snapshot is its last frame at
// seq rounds.
func checkNewest(t *testing.T, s *Store, last [][]byte, rounds int) {
	t.Helper()
	for r := range last {
		snap, err := s.Latest(string(rune('a' + r)))
		if err != nil {
			t.Fatal(err)
		}
		if snap.Seq != uint64(rounds) || string(snap.Frame) != string(last[r]) {
			t.Fatalf("run %d: the newest snapshot read back is seq %d, %d bytes, not the one written", r, snap.Seq, len(snap.Frame))
		}
	}
}
