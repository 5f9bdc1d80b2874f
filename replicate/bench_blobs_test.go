package replicate

import (
	"bytes"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

// BenchmarkOpenBlobs measures the Open of a replicated store whose 1,000
// blobs (4 KiB each) were all shipped: replicate.Open (the copy is
// current) then engine.Open, which gives the Replicator the blobs its
// mark of shipped blobs lacks. It reports the median of engine.Open
// (engine-open-ms) and of both (open-ms) over b.N Opens.
//
//	go test ./replicate -run '^$' -bench OpenBlobs -benchtime 3x
func BenchmarkOpenBlobs(b *testing.B) {
	c := newCluster(b, true)
	dir := filepath.Join(b.TempDir(), "s")
	cfg := c.config("openblobs", "a", 0)
	r, err := Open(ctx, dir, cfg)
	if err != nil {
		b.Fatal(err)
	}
	db, err := engine.Open(dir, &engine.Options{Replicator: r, SnapshotEvery: -1})
	if err != nil {
		b.Fatal(err)
	}
	run, err := db.Run(ctx, "r")
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	const blobs, per = 1000, 10
	for i := 0; i < blobs; i += per {
		a, err := run.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		d := new(frame.Delta)
		for j := range per {
			data := make([]byte, 4<<10)
			rng.Read(data)
			ref, err := a.PutBlob(ctx, "", bytes.NewReader(data))
			if err != nil {
				b.Fatal(err)
			}
			d.Set(fmt.Sprint("b", i+j), []byte(blob.Value(ref)))
		}
		if err := a.Commit(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	if err := r.Close(); err != nil {
		b.Fatal(err)
	}
	var eng, all []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		r, err := Open(ctx, dir, c.config("openblobs", "a", 0))
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		db, err := engine.Open(dir, &engine.Options{Replicator: r, SnapshotEvery: -1})
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		eng, all = append(eng, t2.Sub(t1)), append(all, t2.Sub(t0))
		b.StopTimer()
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		if err := r.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	slices.Sort(eng)
	slices.Sort(all)
	b.ReportMetric(float64(eng[len(eng)/2].Microseconds())/1000, "engine-open-ms")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "open-ms")
}
