//go:build !unix

package chainbench

// cpuTime is not measured on this platform; the cpu-ns metrics read 0.
func cpuTime() int64 { return 0 }
