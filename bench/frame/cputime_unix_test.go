//go:build unix

package framebench

import "syscall"

// cpuTime returns the CPU time (user + system) of this process in
// nanoseconds: on a shared, loaded machine a steadier measure of work than
// wall time (it still includes GC and other goroutines of the process).
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
