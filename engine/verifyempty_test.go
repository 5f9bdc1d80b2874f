package engine

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestVerifyStoreNeverWritten: a store opened and closed with nothing
// written, once and again, verifies (its log holds no record; CHECKPOINT
// replays from where the first would start), as the engine reads it.
func TestVerifyStoreNeverWritten(t *testing.T) {
	mem := vfs.NewMem()
	for i := 0; i < 2; i++ {
		db, err := Open("store", testOptions(mem))
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		for _, deep := range []bool{false, true} {
			rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: deep})
			if err != nil || !rep.OK {
				t.Fatalf("verify (deep %v) after open %d: %v %v", deep, i+1, err, rep.Failures)
			}
		}
	}
}
