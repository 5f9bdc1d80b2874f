//go:build unix

package ledger

import (
	"context"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// nullJournal makes nothing durable: it measures the ledger's own CPU.
type nullJournal struct{ n atomic.Int64 }

func (j *nullJournal) WriteIntent(ctx context.Context, in *Intent) (Loc, error) {
	_ = AppendIntent(make([]byte, 0, 128), in)
	return Loc{Segment: 1, Offset: j.n.Add(1)}, nil
}
func (j *nullJournal) WriteCertificate(ctx context.Context, c *Certificate) (Loc, error) {
	_ = AppendCertificate(make([]byte, 0, 128), c)
	return Loc{Segment: 1, Offset: j.n.Add(1)}, nil
}
func (j *nullJournal) ReadCertificate(Loc) (*Certificate, error) { return nil, nil }

// BenchmarkDoFirstTime is the cost of a retry policy on an action whose
// first attempt succeeds, side by side with the same action without one:
// NewIntent (the fingerprint hashes the policy), the intent's and the
// certificate's encoding, and Do's retry path.
func BenchmarkDoFirstTime(b *testing.B) {
	ok := func(context.Context, string) ([]byte, error) { return []byte(`{"ok":true}`), nil }
	args := []byte(`{"url":"https://example.com/hook","body":{"n":1}}`)
	for _, bc := range []struct {
		name string
		pol  *RetryPolicy
	}{{"plain", nil}, {"retry", &RetryPolicy{MaxAttempts: 5, Initial: 100 * time.Millisecond, Max: 10 * time.Second, Deadline: time.Minute}}} {
		b.Run(bc.name, func(b *testing.B) {
			l, j := New(), &nullJournal{}
			b.ReportAllocs()
			cpu0 := processCPU()
			for i := 0; b.Loop(); i++ {
				in, err := NewIntent(Action{Tool: "http.post", Args: args, Key: "k-" + strconv.Itoa(i), Retry: bc.pol}, "run-1", 1, 0)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := l.Do(context.Background(), j, in, ok); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
		})
	}
}

// processCPU is the CPU time the process used so far, every thread (the
// log's writer, the GC) counted, in nanoseconds: on a machine shared with
// other work it is steadier than the wall clock.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
