package snapshot_test

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/snapshot"
)

// The engine's background writer stores a snapshot with the positions of the
// atoms it covers; StateAt then finds the nearest snapshot and the positions
// of the deltas after it.
func Example() {
	st, err := snapshot.Open("store/snapshots", &snapshot.Options{FS: vfs.NewMem()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	policy := snapshot.Policy{} // every 50 atoms or 10 minutes
	fmt.Println("due after 49 atoms:", policy.Due(49, time.Minute))
	fmt.Println("due after 50 atoms:", policy.Due(50, time.Minute))

	b := st.NewBatch()
	pos := make([]snapshot.Pos, 60)
	for i := range pos {
		pos[i] = snapshot.Pos{Segment: 1, Offset: int64(i) * 128}
	}
	_ = b.PutSnapshot(&snapshot.Snapshot{RunID: "run-1", Seq: 50, Frame: []byte("compressed frame")})
	_ = b.PutPositions("run-1", 1, pos)
	_ = b.PutMeta("indexed/run-1", []byte{60})
	if err := b.Commit(true); err != nil {
		fmt.Println(err)
		return
	}

	// StateAt(57): the snapshot at 50, then the deltas of 51..57.
	snap, err := st.AtOrBelow("run-1", 57)
	if err != nil {
		fmt.Println(err)
		return
	}
	deltas, err := st.Positions("run-1", snap.Seq+1, 57)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("snapshot at %d, %d deltas from offset %d\n", snap.Seq, len(deltas), deltas[0].Offset)

	_, err = st.Positions("run-1", 58, 70)
	fmt.Println(err)
	// Output:
	// due after 49 atoms: false
	// due after 50 atoms: true
	// snapshot at 50, 7 deltas from offset 6400
	// snapshot: not found: run "run-1" has no position for seq 61
}
