package snapshotbench

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/snapshot"
)

// The small store of the benchmarks: runs with a snapshot every 50 atoms and
// the position of every atom, as the engine leaves it after a short session.
const (
	benchRuns      = 20
	benchAtoms     = 500 // per run
	benchEvery     = 50
	benchFrameSize = 8 << 10 // compressed frame bytes per snapshot
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// rawOptions are the Pebble options of the baselines: the same cache and
// memtable as the store's defaults, and a quiet logger.
func rawOptions(fs vfs.FS) *pebble.Options {
	return &pebble.Options{
		FS:           fs,
		Cache:        pebble.NewCache(snapshot.DefaultCacheSize),
		MemTableSize: snapshot.DefaultMemTableSize,
		Logger:       noLog{},
	}
}

type noLog struct{}

func (noLog) Infof(string, ...any)  {}
func (noLog) Errorf(string, ...any) {}
func (noLog) Fatalf(f string, a ...any) {
	panic(fmt.Sprintf(f, a...))
}

func benchFrame(run, seq int) []byte {
	r := rand.New(rand.NewPCG(uint64(run), uint64(seq)))
	f := make([]byte, benchFrameSize)
	for i := range f {
		f[i] = byte(r.Uint32())
	}
	return f
}

func benchSnapshot(run, seq int) *snapshot.Snapshot {
	return &snapshot.Snapshot{
		RunID:   fmt.Sprintf("run-%03d", run),
		Seq:     uint64(seq),
		Frame:   benchFrame(run, seq),
		Created: time.Unix(1_800_000_000+int64(seq), 0),
	}
}

func benchPositions(run, first int) []snapshot.Pos {
	pos := make([]snapshot.Pos, benchEvery)
	for i := range pos {
		pos[i] = snapshot.Pos{Segment: uint64(run), Offset: int64((first + i) * 300)}
	}
	return pos
}

// fillStore writes the small store through the snapshot API, one batch per
// snapshot interval, as the engine's background writer does.
func fillStore(b *testing.B, st *snapshot.Store) {
	for r := range benchRuns {
		for seq := benchEvery; seq <= benchAtoms; seq += benchEvery {
			bt := st.NewBatch()
			if err := bt.PutSnapshot(benchSnapshot(r, seq)); err != nil {
				b.Fatal(err)
			}
			if err := bt.PutPositions(fmt.Sprintf("run-%03d", r), uint64(seq-benchEvery+1), benchPositions(r, seq-benchEvery+1)); err != nil {
				b.Fatal(err)
			}
			if err := bt.Commit(false); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// Raw baseline layout: "s"+run+seq for snapshots, "p"+run+seq for positions.
func rawKey(space byte, run int, seq uint64) []byte {
	k := fmt.Appendf([]byte{space}, "run-%03d", run)
	return binary.BigEndian.AppendUint64(k, seq)
}

func fillRaw(b *testing.B, db *pebble.DB) {
	for r := range benchRuns {
		for seq := benchEvery; seq <= benchAtoms; seq += benchEvery {
			bt := db.NewBatch()
			s := benchSnapshot(r, seq)
			if err := bt.Set(rawKey('s', r, uint64(seq)), snapshot.AppendSnapshot(nil, s), nil); err != nil {
				b.Fatal(err)
			}
			for i, p := range benchPositions(r, seq-benchEvery+1) {
				var v []byte
				v = binary.AppendUvarint(v, p.Segment)
				v = binary.AppendUvarint(v, uint64(p.Offset))
				if err := bt.Set(rawKey('p', r, uint64(seq-benchEvery+1+i)), v, nil); err != nil {
					b.Fatal(err)
				}
			}
			if err := bt.Commit(pebble.NoSync); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// reportLatency reports the p50 and p99 of the per-op durations.
func reportLatency(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds())/1e6, "p50-ms")
	b.ReportMetric(float64(d[min(len(d)-1, len(d)*99/100)].Nanoseconds())/1e6, "p99-ms")
}

// BenchmarkOpen measures opening (and closing) the small store on the real
// disk, the engine's case, and on vfs.NewMem to separate Pebble's own work
// from the disk's. Run it with -benchtime=20x for p50/p99 over 20 opens.
// "raw-pebble" opens the same data with pebble.Open directly.
func BenchmarkOpen(b *testing.B) {
	for _, where := range []string{"disk", "mem"} {
		for _, which := range []string{"store", "raw-pebble"} {
			b.Run(where+"/"+which, func(b *testing.B) {
				fs := vfs.Default
				dir := filepath.Join(b.TempDir(), "snapshots")
				if where == "mem" {
					fs = vfs.NewMem()
					dir = "snapshots"
				}
				if which == "store" {
					st, err := snapshot.Open(dir, &snapshot.Options{FS: fs, Logger: quiet})
					if err != nil {
						b.Fatal(err)
					}
					fillStore(b, st)
					if err := st.Close(); err != nil {
						b.Fatal(err)
					}
				} else {
					db, err := pebble.Open(dir, rawOptions(fs))
					if err != nil {
						b.Fatal(err)
					}
					fillRaw(b, db)
					if err := db.Close(); err != nil {
						b.Fatal(err)
					}
				}
				durs := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for range b.N {
					start := time.Now()
					if which == "store" {
						st, err := snapshot.Open(dir, &snapshot.Options{FS: fs, Logger: quiet})
						if err != nil {
							b.Fatal(err)
						}
						durs = append(durs, time.Since(start))
						b.StopTimer()
						if err := st.Close(); err != nil {
							b.Fatal(err)
						}
					} else {
						opts := rawOptions(fs)
						db, err := pebble.Open(dir, opts)
						opts.Cache.Unref()
						if err != nil {
							b.Fatal(err)
						}
						durs = append(durs, time.Since(start))
						b.StopTimer()
						if err := db.Close(); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
				}
				b.StopTimer()
				reportLatency(b, durs)
			})
		}
	}
}

// BenchmarkStateAtLookup measures what StateAt(seq) asks of the store: the
// nearest snapshot at or below a random seq, then the positions of the 50
// atoms after it. The baseline reads the same data from raw Pebble by exact
// keys (a Get of the snapshot, 50 Gets of positions), as if the snapshot's
// seq were known; the ratio is the price of the seek and the checks.
func BenchmarkStateAtLookup(b *testing.B) {
	b.Run("store", func(b *testing.B) {
		st, err := snapshot.Open("snapshots", &snapshot.Options{FS: vfs.NewMem(), Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		fillStore(b, st)
		rng := rand.New(rand.NewPCG(1, 2))
		durs := make([]time.Duration, 0, b.N)
		b.SetBytes(benchFrameSize)
		b.ResetTimer()
		for range b.N {
			run := fmt.Sprintf("run-%03d", rng.IntN(benchRuns))
			seq := uint64(benchEvery + rng.IntN(benchAtoms-2*benchEvery))
			start := time.Now()
			s, err := st.AtOrBelow(run, seq)
			if err != nil {
				b.Fatal(err)
			}
			pos, err := st.Positions(run, s.Seq+1, s.Seq+benchEvery)
			if err != nil || len(pos) != benchEvery {
				b.Fatalf("positions after %d: %d, %v", s.Seq, len(pos), err)
			}
			durs = append(durs, time.Since(start))
		}
		b.StopTimer()
		reportLatency(b, durs)
	})
	b.Run("raw-pebble-gets", func(b *testing.B) {
		opts := rawOptions(vfs.NewMem())
		db, err := pebble.Open("snapshots", opts)
		opts.Cache.Unref()
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		fillRaw(b, db)
		rng := rand.New(rand.NewPCG(1, 2))
		durs := make([]time.Duration, 0, b.N)
		b.SetBytes(benchFrameSize)
		b.ResetTimer()
		for range b.N {
			run := rng.IntN(benchRuns)
			seq := uint64(benchEvery + rng.IntN(benchAtoms-2*benchEvery))
			snapSeq := seq / benchEvery * benchEvery
			start := time.Now()
			v, c, err := db.Get(rawKey('s', run, snapSeq))
			if err != nil {
				b.Fatal(err)
			}
			frame := append([]byte(nil), v...)
			c.Close()
			for i := range uint64(benchEvery) {
				v, c, err := db.Get(rawKey('p', run, snapSeq+1+i))
				if err != nil {
					b.Fatal(err)
				}
				seg, n := binary.Uvarint(v)
				off, _ := binary.Uvarint(v[n:])
				_, _ = seg, off
				c.Close()
			}
			durs = append(durs, time.Since(start))
			_ = frame
		}
		b.StopTimer()
		reportLatency(b, durs)
	})
}

// BenchmarkCommit measures the background write: one snapshot of 8 KiB and
// the positions of 50 atoms in one batch, synced or not, on the real disk.
// The baseline commits the same bytes to raw Pebble.
func BenchmarkCommit(b *testing.B) {
	for _, sync := range []bool{false, true} {
		name := "nosync"
		if sync {
			name = "sync"
		}
		b.Run(name+"/store", func(b *testing.B) {
			st, err := snapshot.Open(filepath.Join(b.TempDir(), "s"), &snapshot.Options{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			b.SetBytes(benchFrameSize)
			b.ResetTimer()
			for i := range b.N {
				seq := (i + 1) * benchEvery
				bt := st.NewBatch()
				if err := bt.PutSnapshot(benchSnapshot(0, seq)); err != nil {
					b.Fatal(err)
				}
				if err := bt.PutPositions("run-000", uint64(seq-benchEvery+1), benchPositions(0, seq-benchEvery+1)); err != nil {
					b.Fatal(err)
				}
				if err := bt.Commit(sync); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/raw-pebble", func(b *testing.B) {
			opts := rawOptions(vfs.Default)
			db, err := pebble.Open(filepath.Join(b.TempDir(), "s"), opts)
			opts.Cache.Unref()
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			wo := pebble.NoSync
			if sync {
				wo = pebble.Sync
			}
			b.SetBytes(benchFrameSize)
			b.ResetTimer()
			for i := range b.N {
				seq := (i + 1) * benchEvery
				bt := db.NewBatch()
				if err := bt.Set(rawKey('s', 0, uint64(seq)), snapshot.AppendSnapshot(nil, benchSnapshot(0, seq)), nil); err != nil {
					b.Fatal(err)
				}
				for j, p := range benchPositions(0, seq-benchEvery+1) {
					v := binary.AppendUvarint(binary.AppendUvarint(nil, p.Segment), uint64(p.Offset))
					if err := bt.Set(rawKey('p', 0, uint64(seq-benchEvery+1+j)), v, nil); err != nil {
						b.Fatal(err)
					}
				}
				if err := bt.Commit(wo); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
