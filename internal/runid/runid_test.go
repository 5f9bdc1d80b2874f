package runid

import (
	"errors"
	"strings"
	"testing"
)

// TestCheck: the rule's edges, with the reason each refusal gives.
func TestCheck(t *testing.T) {
	for _, id := range []string{
		"r",
		"agent-7/task 3",
		"agent/ünï",
		" ",                           // the lowest printable byte
		"~",                           // the highest printable ASCII byte
		"\u0080\u009f",                // C1 controls are not among the refused ones
		"\U0010ffff",                  // the highest code point
		strings.Repeat("x", MaxLen),   // at the limit
		strings.Repeat("é", MaxLen/2), // at the limit, two bytes a rune
		strings.Repeat("€", MaxLen/3), // three bytes a rune, under the limit
		strings.Repeat("x", MaxLen-1) + "~",
	} {
		if err := Check(id); err != nil {
			t.Errorf("Check(%q) = %v, want nil", id, err)
		}
	}
	for _, tc := range []struct {
		id, reason string
	}{
		{"", "empty"},
		{strings.Repeat("x", MaxLen+1), "257 bytes, at most 256"},
		{strings.Repeat("é", MaxLen/2) + "x", "257 bytes, at most 256"},
		{"a\nb", `"a\nb" has a control character at byte 1`},
		{"\x00", `"\x00" has a control character at byte 0`},
		{"a\x7fb", `"a\x7fb" has a control character at byte 1`},
		{"é\x01", `"é\x01" has a control character at byte 2`},
		{"\xff", `"\xff" is not valid UTF-8`},
		{"é\xff", `"é\xff" is not valid UTF-8`},
		{"\xed\xa0\x80", `"\xed\xa0\x80" is not valid UTF-8`}, // a surrogate
		{"\xc0\xaf", `"\xc0\xaf" is not valid UTF-8`},         // an overlong '/'
	} {
		err := Check(tc.id)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Check(%q) = %v, want ErrInvalid", tc.id, err)
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Reason != tc.reason || e.ID != tc.id {
			t.Errorf("Check(%q) = %#v, want reason %q", tc.id, err, tc.reason)
		}
		if want := "invalid run id: " + tc.reason; err.Error() != want {
			t.Errorf("Check(%q) says %q, want %q", tc.id, err, want)
		}
	}
}
