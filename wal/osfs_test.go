package wal

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestOSFilesystemSegments writes a log on the operating system's
// filesystem: concurrent appends and batches, small and larger than the
// unsynced bound, across rotations, then a reopen that resumes the newest
// segment and appends more. Every record reads back where its append
// said, in order, with and without NoSync.
func TestOSFilesystemSegments(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("nosync=%v", noSync), func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			dir := t.TempDir()
			opts := &Options{FS: vfs.Default, SegmentSize: 1 << 20, NoSync: noSync}
			type rec struct {
				pos  Pos
				data []byte
			}
			var mu sync.Mutex
			var all []rec
			session := func(n int, seed uint64) {
				l, err := Open(dir, opts)
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				var wg sync.WaitGroup
				for g := range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(seed, uint64(g)))
						for i := range n {
							k := 1 + rng.IntN(3)
							var recs [][]byte
							for j := range k {
								size := rng.IntN(2000)
								if rng.IntN(200) == 0 {
									size = 300 << 10 // a group past the unsynced bound in pieces
								}
								b := make([]byte, size)
								for x := range b {
									b[x] = byte(g*31 + i*7 + j + x)
								}
								recs = append(recs, b)
							}
							ps, err := l.AppendBatch(ctx, recs)
							if err != nil {
								t.Error(err)
								return
							}
							mu.Lock()
							for j := range recs {
								all = append(all, rec{ps[j], recs[j]})
							}
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
			session(150, seed)
			session(150, seed+1)

			l, err := Open(dir, &Options{FS: vfs.Default, ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for _, r := range all {
				got, err := l.ReadAt(r.pos)
				if err != nil {
					t.Fatalf("record at %v: %v", r.pos, err)
				}
				if !bytes.Equal(got, r.data) {
					t.Fatalf("record at %v: %d bytes read, %d appended, or different", r.pos, len(got), len(r.data))
				}
			}
			rd, err := l.NewReader(Pos{})
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			n := 0
			for rd.Next() {
				n++
			}
			if err := rd.Err(); err != nil {
				t.Fatal(err)
			}
			if n != len(all) {
				t.Fatalf("the log holds %d records, %d were appended", n, len(all))
			}
			if l.Stats().Rotations == 0 && len(l.Segments()) < 2 {
				t.Fatalf("no rotation in %d records", n)
			}
		})
	}
}
