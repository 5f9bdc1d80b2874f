package textclip

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/continuumdb/continuum/blob"
)

// TestIsJoinFields: String and Bytes read only what they need and say what
// the whole-value rule says.
func TestIsJoinFields(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 4))
	ref := func(s string, n int) string {
		s = strings.Join(strings.Fields(s), " ")
		if utf8.RuneCountInString(s) <= n {
			return s
		}
		r := []rune(s)
		return string(r[:n-1]) + "…"
	}
	pieces := []string{"a", "bc", " ", "\n", "\u00a0", "\u2028", "é", "✓", "\xff", "\xe2\x9c"}
	for range 5000 {
		var b strings.Builder
		for range rng.IntN(30) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s, n := b.String(), 1+rng.IntN(12)
		if got, want := String(s, n), ref(s, n); got != want {
			t.Fatalf("seed %d: String(%q, %d) = %q, want %q", seed, s, n, got, want)
		}
		if got, want := Bytes([]byte(s), n), ref(s, n); got != want {
			t.Fatalf("seed %d: Bytes(%q, %d) = %q, want %q", seed, s, n, got, want)
		}
	}
}

func TestExamples(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 5, ""},
		{"  a \n\t b  ", 5, "a b"},
		{"abcdef", 6, "abcdef"},
		{"abcdef", 5, "abcd…"},
		{"héllo wörld", 7, "héllo …"},
		{"a\xffb", 3, "a\xffb"},
		{"a\xffbc", 3, "a\uFFFD…"},
	} {
		if got := String(c.s, c.n); got != c.want {
			t.Errorf("String(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

// TestBlobReference: a reference value is shown whole, as blob get takes it.
func TestBlobReference(t *testing.T) {
	ref := blob.Ref{Hash: blob.Hash([]byte("x")), Size: 12345, Media: "text/html"}
	want := "blob " + ref.String()
	if got := String(blob.Value(ref), 10); got != want {
		t.Fatalf("String: %q, want %q", got, want)
	}
	if got := Bytes([]byte(blob.Value(ref)), 10); got != want {
		t.Fatalf("Bytes: %q, want %q", got, want)
	}
	if got := String(blob.ValuePrefix+"not one", 5); got == want || len([]rune(got)) > 5 {
		t.Fatalf("a value that only starts as a reference does: %q", got)
	}
}
