// Package goldenhex reads the annotated hex of the golden tests that pin
// the project's frozen formats: hex digits with any spacing, and "#"
// comments to the end of a line, which say what each byte is.
package goldenhex

import (
	"encoding/hex"
	"strings"
	"testing"
)

// Decode returns the bytes s spells, failing t if s is not hex once its
// spaces and comments are removed.
func Decode(t testing.TB, s string) []byte {
	t.Helper()
	var clean strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		clean.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(clean.String())
	if err != nil {
		t.Fatalf("bad hex in test: %v", err)
	}
	return b
}
