// Package ledgerbench measures the ledger's hot paths, each beside a
// baseline in the same run:
//
//   - Fingerprint of ~200 B of JSON args (canonicalise, redact, BLAKE3)
//     against a bare BLAKE3 of the raw bytes and against the naive
//     canonicaliser (encoding/json decode into any, re-encode, BLAKE3).
//   - Do when the certificate is present (exec not called) against a bare
//     RWMutex-guarded Go map lookup plus copy of the result.
//   - Lookup in a 1M-entry index: the loaded table (binary search in place)
//     against the ledger's map and a bare Go map.
//   - Open-time cost of a 1M-entry index: LoadTable against replaying the
//     same entries into the map.
package ledgerbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/continuumdb/continuum/ledger"
	"github.com/zeebo/blake3"
)

// args200 is a realistic ~200 B tool call with one secret.
var args200 = []byte(`{"to": ["ops@example.com", "oncall@example.com"], "subject": "Deploy 2026.11.29 finished",
 "body": "All 14 services healthy; p99 41.0 ms.", "priority": 2, "api_key": "sk-live-0123456789abcdef", "retry": {"max": 3, "backoff_ms": 250}}`)

func BenchmarkFingerprint(b *testing.B) {
	a := ledger.Action{Tool: "email.send", Args: args200, Key: ledger.DefaultKey("run-42", 7, 0), Redact: []string{"/api_key"}}
	b.Run("ledger", func(b *testing.B) {
		b.SetBytes(int64(len(args200)))
		b.ReportAllocs()
		cpu := cpuStart()
		for b.Loop() {
			if _, err := a.Fingerprint(); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu)
	})
	b.Run("baseline-blake3-raw", func(b *testing.B) {
		b.SetBytes(int64(len(args200)))
		b.ReportAllocs()
		cpu := cpuStart()
		for b.Loop() {
			_ = blake3.Sum256(args200)
		}
		reportCPU(b, cpu)
	})
	b.Run("baseline-encoding-json", func(b *testing.B) {
		// What one writes without a canonicaliser: decode into any (numbers
		// become float64, so ints beyond 2^53 are lost), delete the secret,
		// re-encode (sorted map keys), hash.
		b.SetBytes(int64(len(args200)))
		b.ReportAllocs()
		cpu := cpuStart()
		for b.Loop() {
			var v map[string]any
			if err := json.Unmarshal(args200, &v); err != nil {
				b.Fatal(err)
			}
			delete(v, "api_key")
			out, err := json.Marshal(v)
			if err != nil {
				b.Fatal(err)
			}
			_ = blake3.Sum256(out)
		}
		reportCPU(b, cpu)
	})
}

// memJournal holds certificates in memory, for the read-back path.
type memJournal struct {
	mu    sync.Mutex
	certs [][]byte
}

func (j *memJournal) WriteIntent(ctx context.Context, in *ledger.Intent) (ledger.Loc, error) {
	return ledger.Loc{}, nil
}

func (j *memJournal) WriteCertificate(ctx context.Context, c *ledger.Certificate) (ledger.Loc, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.certs = append(j.certs, ledger.AppendCertificate(nil, c))
	return ledger.Loc{Segment: 1, Offset: int64(len(j.certs) - 1)}, nil
}

func (j *memJournal) ReadCertificate(loc ledger.Loc) (*ledger.Certificate, error) {
	j.mu.Lock()
	b := j.certs[loc.Offset]
	j.mu.Unlock()
	return ledger.DecodeCertificate(b)
}

func BenchmarkDoHit(b *testing.B) {
	ctx := context.Background()
	result := bytes.Repeat([]byte("r"), 256)
	in, err := ledger.NewIntent(ledger.Action{Tool: "email.send", Args: args200, Redact: []string{"/api_key"}}, "run-42", 7, 0)
	if err != nil {
		b.Fatal(err)
	}
	never := func(context.Context, string) ([]byte, error) { panic("exec called on the hit path") }
	j := &memJournal{}
	held := ledger.New()
	if _, err := held.Do(ctx, j, in, func(context.Context, string) ([]byte, error) { return result, nil }); err != nil {
		b.Fatal(err)
	}
	fromTable := ledger.New()
	if err := fromTable.LoadTable(held.AppendTable(nil)); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		l    *ledger.Ledger
	}{{"held-result", held}, {"table+read-certificate", fromTable}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuStart()
			for b.Loop() {
				if _, err := tc.l.Do(ctx, j, in, never); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuStart()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := tc.l.Do(ctx, j, in, never); err != nil {
						b.Fatal(err)
					}
				}
			})
			reportCPU(b, cpu)
		})
	}
	var mu sync.RWMutex
	m := map[ledger.Fingerprint][]byte{in.Fingerprint: result}
	b.Run("baseline-rwmutex-map", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cpuStart()
		for b.Loop() {
			mu.RLock()
			r := bytes.Clone(m[in.Fingerprint])
			mu.RUnlock()
			_ = r
		}
		reportCPU(b, cpu)
	})
}

const bigN = 1 << 20

var (
	bigOnce  sync.Once
	bigFPs   []ledger.Fingerprint
	bigTable []byte
	bigMap   *ledger.Ledger
)

// bigIndex builds once a 1M-entry index: its fingerprints, its table and a
// ledger holding the same entries in its map.
func bigIndex(b *testing.B) {
	bigOnce.Do(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		bigFPs = make([]ledger.Fingerprint, bigN)
		bigMap = ledger.New()
		for i := range bigFPs {
			for k := 0; k < 32; k += 8 {
				v := rng.Uint64()
				for s := range 8 {
					bigFPs[i][k+s] = byte(v >> (8 * s))
				}
			}
			bigMap.ApplyCertificate(&ledger.Certificate{Fingerprint: bigFPs[i], Status: ledger.StatusDone},
				ledger.Loc{Segment: 1, Offset: int64(i)}, false)
		}
		bigTable = bigMap.AppendTable(nil)
	})
}

func BenchmarkLookup1M(b *testing.B) {
	bigIndex(b)
	table := ledger.New()
	if err := table.LoadTable(bigTable); err != nil {
		b.Fatal(err)
	}
	plain := make(map[ledger.Fingerprint]ledger.Loc, bigN)
	for i, fp := range bigFPs {
		plain[fp] = ledger.Loc{Segment: 1, Offset: int64(i)}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	order := make([]int, 1<<16)
	for i := range order {
		order[i] = rng.IntN(bigN)
	}
	for _, tc := range []struct {
		name string
		l    *ledger.Ledger
	}{{"table", table}, {"map", bigMap}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			cpu := cpuStart()
			for b.Loop() {
				if _, ok := tc.l.Lookup(bigFPs[order[i&(len(order)-1)]]); !ok {
					b.Fatal("missing")
				}
				i++
			}
			reportCPU(b, cpu)
		})
	}
	b.Run("baseline-go-map", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		cpu := cpuStart()
		for b.Loop() {
			if _, ok := plain[bigFPs[order[i&(len(order)-1)]]]; !ok {
				b.Fatal("missing")
			}
			i++
		}
		reportCPU(b, cpu)
	})
}

// BenchmarkOpen1M is the open-time cost of a 1M-entry index: LoadTable
// (one verification pass, no per-entry allocation) against replaying the
// entries into the ledger's map.
func BenchmarkOpen1M(b *testing.B) {
	bigIndex(b)
	b.Run("load-table", func(b *testing.B) {
		b.SetBytes(int64(len(bigTable)))
		b.ReportAllocs()
		cpu := cpuStart()
		for b.Loop() {
			if err := ledger.New().LoadTable(bigTable); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/bigN, "ns/entry")
	})
	b.Run("baseline-replay-into-map", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cpuStart()
		for b.Loop() {
			l := ledger.New()
			for i, fp := range bigFPs {
				l.ApplyCertificate(&ledger.Certificate{Fingerprint: fp, Status: ledger.StatusDone},
					ledger.Loc{Segment: 1, Offset: int64(i)}, false)
			}
		}
		reportCPU(b, cpu)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/bigN, "ns/entry")
	})
}

func ExampleAction_Fingerprint() {
	fp, err := ledger.Action{Tool: "email.send", Args: []byte(`{"to":"a@b.c"}`), Key: "k1"}.Fingerprint()
	fmt.Println(len(fp.String()), err)
	// Output: 64 <nil>
}
