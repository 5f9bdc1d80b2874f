//go:build !unix

package ledgerbench

import (
	"testing"
	"time"
)

// cpuStart has no portable implementation here; reportCPU then reports
// nothing.
func cpuStart() time.Duration { return -1 }

func reportCPU(b *testing.B, start time.Duration) {}
