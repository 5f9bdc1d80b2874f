// Package chainbench measures the chain package against its two goals:
// the cost a chained record adds to the commit path (<= 2 us for 500 B) and
// verification throughput (>= 1M records/s of 500 B on a 2-core machine).
// Every benchmark has its baseline in the same run: a bare BLAKE3 hash of
// the same bytes.
package chainbench

import (
	"crypto/ed25519"
	"fmt"
	"math/rand"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/zeebo/blake3"
)

var sizes = []int{100, 500, 4096}

// BenchmarkLink is the commit-path cost of chaining one record: one Link
// call. The baseline is blake3.Sum256 of the payload alone.
func BenchmarkLink(b *testing.B) {
	for _, size := range sizes {
		p := make([]byte, size)
		rand.New(rand.NewSource(1)).Read(p)
		for _, mode := range []string{"unkeyed", "keyed", "baseline-blake3"} {
			b.Run(fmt.Sprintf("size=%d/%s", size, mode), func(b *testing.B) {
				var key []byte
				if mode == "keyed" {
					key = make([]byte, chain.KeySize)
				}
				h, err := chain.NewHasher(key)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				var head chain.Hash
				cpu := cpuTime()
				n := 0
				for i := 0; b.Loop(); i++ {
					if mode == "baseline-blake3" {
						head = blake3.Sum256(p)
					} else {
						head = h.Link("run-0123456789", uint64(i+1), head, p)
					}
					n++
				}
				b.ReportMetric(float64(cpuTime()-cpu)/float64(n), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkLinkParallel checks that the pooled Hasher scales across
// goroutines (it is shared by every run of an engine).
func BenchmarkLinkParallel(b *testing.B) {
	h, _ := chain.NewHasher(nil)
	p := make([]byte, 500)
	b.SetBytes(500)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var head chain.Hash
		for i := uint64(1); pb.Next(); i++ {
			head = h.Link("run-0123456789", i, head, p)
		}
	})
}

// BenchmarkSignCheckpoint is the cost of one signed checkpoint; divided by
// the checkpoint interval it is the amortized per-record cost.
func BenchmarkSignCheckpoint(b *testing.B) {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	s, err := chain.NewSigner("continuum", priv)
	if err != nil {
		b.Fatal(err)
	}
	c := chain.Checkpoint{StoreID: "store-0123", RunID: "run-0123456789", Seq: 123456, Head: chain.Hash{1}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.SignCheckpoint(c); err != nil {
			b.Fatal(err)
		}
	}
}

// store is a pre-built log: runs interleaved, a signed checkpoint per run
// every 1000 records and at the end.
type store struct {
	runs    []string
	nonces  []chain.Nonce
	payload [][]byte // per record index (shared across runs)
	heads   [][]chain.Hash
	cps     [][][]byte // per run, per checkpoint
	pub     ed25519.PublicKey
}

const checkpointEvery = 1000

func buildStore(b *testing.B, runs, records, size int) *store {
	b.Helper()
	rng := rand.New(rand.NewSource(42))
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	signer, _ := chain.NewSigner("continuum", priv)
	h, _ := chain.NewHasher(nil)
	s := &store{pub: priv.Public().(ed25519.PublicKey)}
	for i := 0; i < records; i++ {
		p := make([]byte, size)
		rng.Read(p)
		s.payload = append(s.payload, p)
	}
	for r := 0; r < runs; r++ {
		id := "run-" + strconv.Itoa(r)
		var n chain.Nonce
		rng.Read(n[:])
		s.runs = append(s.runs, id)
		s.nonces = append(s.nonces, n)
		head := h.Genesis(id, n)
		hs := make([]chain.Hash, records)
		var cps [][]byte
		for i := range records {
			head = h.Link(id, uint64(i+1), head, s.payload[i])
			hs[i] = head
			if (i+1)%checkpointEvery == 0 || i+1 == records {
				cp, err := signer.SignCheckpoint(chain.Checkpoint{StoreID: "bench", RunID: id, Seq: uint64(i + 1), Head: head, Final: i+1 == records})
				if err != nil {
					b.Fatal(err)
				}
				cps = append(cps, cp)
			}
		}
		s.heads = append(s.heads, hs)
		s.cps = append(s.cps, cps)
	}
	return s
}

func (s *store) verify(b *testing.B, workers int) *chain.Report {
	v, err := chain.NewVerifier(chain.VerifyOptions{PublicKey: s.pub, Workers: workers})
	if err != nil {
		b.Fatal(err)
	}
	v.Store("bench")
	for r, id := range s.runs {
		v.Run(id, s.nonces[r], "create")
	}
	cp := make([]int, len(s.runs))
	for i := range s.payload {
		for r, id := range s.runs {
			v.Record(id, uint64(i+1), s.payload[i], s.heads[r][i], "log")
			if (i+1)%checkpointEvery == 0 || i+1 == len(s.payload) {
				v.Checkpoint(s.cps[r][cp[r]], "cp")
				cp[r]++
			}
		}
	}
	return v.Finish()
}

// BenchmarkVerify feeds a whole store (records interleaved across runs,
// signed checkpoints every 1000 records) to a Verifier and reports
// records/s. The baseline hashes the same payloads with bare BLAKE3 on one
// goroutine.
func BenchmarkVerify(b *testing.B) {
	const records, size = 20000, 500
	for _, runs := range []int{1, 8} {
		s := buildStore(b, runs, records, size)
		total := runs * records
		workerSet := []int{1, runtime.GOMAXPROCS(0)}
		if workerSet[1] == 1 {
			workerSet = workerSet[:1]
		}
		for _, w := range workerSet {
			b.Run(fmt.Sprintf("runs=%d/size=%d/workers=%d", runs, size, w), func(b *testing.B) {
				b.SetBytes(int64(total * size))
				start, cpu := time.Now(), cpuTime()
				n := 0
				for b.Loop() {
					r := s.verify(b, w)
					if !r.OK || r.Records != uint64(total) {
						b.Fatalf("store does not verify: %v", r.Failures)
					}
					n++
				}
				reportRate(b, total*n, start, cpu)
			})
		}
		b.Run(fmt.Sprintf("runs=%d/size=%d/baseline-blake3-parallel", runs, size), func(b *testing.B) {
			// The ceiling of this machine: bare BLAKE3 of every record on
			// GOMAXPROCS goroutines, with no chaining, dispatch or signatures.
			b.SetBytes(int64(total * size))
			start, cpu := time.Now(), cpuTime()
			n := 0
			procs := runtime.GOMAXPROCS(0)
			for b.Loop() {
				var wg sync.WaitGroup
				for g := range procs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var sink [32]byte
						for i := g; i < len(s.payload); i += procs {
							for range s.runs {
								sink = blake3.Sum256(s.payload[i])
							}
						}
						_ = sink
					}()
				}
				wg.Wait()
				n++
			}
			reportRate(b, total*n, start, cpu)
		})
		b.Run(fmt.Sprintf("runs=%d/size=%d/baseline-blake3", runs, size), func(b *testing.B) {
			b.SetBytes(int64(total * size))
			start, cpu := time.Now(), cpuTime()
			n := 0
			var sink [32]byte
			for b.Loop() {
				for i := range s.payload {
					for range s.runs {
						sink = blake3.Sum256(s.payload[i])
					}
				}
				n++
			}
			_ = sink
			reportRate(b, total*n, start, cpu)
		})
	}
}

// reportRate reports wall-clock records/s and the CPU time spent per
// record (all goroutines), from which the throughput of an idle machine
// with GOMAXPROCS cores is bounded: cores / cpu-ns-per-record.
func reportRate(b *testing.B, records int, start time.Time, cpu0 int64) {
	b.ReportMetric(float64(records)/time.Since(start).Seconds(), "records/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(records), "cpu-ns/record")
}
