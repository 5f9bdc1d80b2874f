package record

import (
	"strings"
	"testing"
)

// TestFieldsRunID: Fields.RunID takes printable ASCII without the full
// rule's copy to a string (printableASCII); every id, ASCII or not, gets
// the same verdict as CheckRunID.
func TestFieldsRunID(t *testing.T) {
	for _, id := range []string{
		"r", "run-1", " ", "~", strings.Repeat("x", MaxRunIDLen), // printable ASCII
		"", "a\nb", "a\x00", "\x1f", "a\x7f", "\xff", "a\xc3", // refused
		"ünïcödé", "run\u00a0x", "日本", // UTF-8 beyond ASCII: accepted
	} {
		f := NewFields(AppendString(nil, id), 0)
		got := f.RunID()
		want := CheckRunID(id)
		switch err := f.Err(); {
		case want == nil && err != nil:
			t.Errorf("%q: refused (%v), CheckRunID accepts it", id, err)
		case want != nil && err == nil:
			t.Errorf("%q: accepted, CheckRunID refuses it (%v)", id, want)
		case want == nil && got != id:
			t.Errorf("%q: read %q", id, got)
		}
	}
}
