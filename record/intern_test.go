package record

import (
	"fmt"
	"testing"
	"unsafe"
)

// TestIntern: a Decoder's interning returns the string of the bytes given
// (for names that share a slot of its recent strings too), and the same
// string each time while its table has room.
func TestIntern(t *testing.T) {
	var d Decoder
	names := []string{"", "a", "run-1", "run-9", "run-17", "billing.charge", "email.send", "run-1"}
	for i := range 40 {
		names = append(names, fmt.Sprint("run-", i))
	}
	first := map[string]string{}
	for round := range 3 {
		for _, n := range names {
			got := d.intern([]byte(n))
			if got != n {
				t.Fatalf("round %d: intern(%q) = %q", round, n, got)
			}
			if f, ok := first[n]; !ok {
				first[n] = got
			} else if len(n) > 0 && unsafe.StringData(f) != unsafe.StringData(got) {
				t.Fatalf("round %d: intern(%q) returned a new string", round, n)
			}
		}
	}
	if allocs := testing.AllocsPerRun(100, func() { d.intern([]byte("run-3")); d.intern([]byte("run-35")) }); allocs != 0 {
		t.Errorf("interning known names: %v allocations", allocs)
	}
}
