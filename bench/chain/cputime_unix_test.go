//go:build unix

package chainbench

import "syscall"

// cpuTime returns the CPU time (user + system) this process has used, in
// nanoseconds. On a shared machine it is a steadier measure of work than
// wall time.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
