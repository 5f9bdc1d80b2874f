//go:build unix

package ledgerbench

import (
	"syscall"
	"testing"
	"time"
)

// cpuStart returns the CPU time (user + system) the process has used so far.
// On a shared, loaded machine, CPU time per op is steadier than wall time.
func cpuStart() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process CPU time per op since start as cpu-ns/op.
func reportCPU(b *testing.B, start time.Duration) {
	if start < 0 || b.N == 0 {
		return
	}
	b.ReportMetric(float64(cpuStart()-start)/float64(b.N), "cpu-ns/op")
}
