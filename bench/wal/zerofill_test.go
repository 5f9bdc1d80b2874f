package walbench

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkOverwriteZeroFilled measures the CPU of one small write (a
// record of 300 bytes, appended by offset) into a 64 MiB file zero-filled
// and fsynced beforehand, as a wal segment is, by the size of the writes
// that filled it. The page cache keeps what one write brought in as one
// folio, and ext4 walks every block of the folio on each later write into
// it; "append" is the same writes to an empty file. No fsync while
// measuring: only the write's CPU.
//
//	go test -run '^$' -bench OverwriteZeroFilled -benchtime 100000x -count 5 ./bench/wal/
func BenchmarkOverwriteZeroFilled(b *testing.B) {
	const size = 64 << 20
	for _, chunk := range []int{0, 4 << 10, 64 << 10, 1 << 20} {
		name := "append"
		if chunk > 0 {
			name = fmt.Sprintf("fill=%dKiB", chunk>>10)
		}
		b.Run(name, func(b *testing.B) {
			f, err := os.OpenFile(filepath.Join(b.TempDir(), "seg"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if chunk > 0 {
				zeros := make([]byte, chunk)
				for off := 0; off < size; off += chunk {
					if _, err := f.Write(zeros); err != nil {
						b.Fatal(err)
					}
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			rec := make([]byte, 300)
			b.ResetTimer()
			c0 := cpuNow()
			for i := 0; i < b.N; i++ {
				off := int64(i%(size/len(rec))) * int64(len(rec))
				if _, err := f.WriteAt(rec, off); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuNow()-c0)/1e3/float64(b.N), "cpu-µs/write")
		})
	}
}

// cpuNow is the process's user and system CPU time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
