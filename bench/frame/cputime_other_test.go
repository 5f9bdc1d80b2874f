//go:build !unix

package framebench

// cpuTime is not available here; cpu-ns/op then reads 0.
func cpuTime() int64 { return 0 }
