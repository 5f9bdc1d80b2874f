package blob

import (
	"strings"
	"testing"
)

func TestValueRoundTrip(t *testing.T) {
	for _, r := range []Ref{
		{Size: 0},
		{Hash: Hash([]byte("x")), Size: 1, Media: "text/plain; charset=utf-8"},
		{Hash: Hash(make([]byte, ChunkSize+1)), Size: ChunkSize + 1, Media: strings.Repeat("m", MaxMediaType)},
	} {
		v := Value(r)
		got, ok := ParseValue(v)
		if !ok || got != r {
			t.Fatalf("ParseValue(Value(%v)) = %v, %v", r, got, ok)
		}
		if got, ok := ParseValueBytes([]byte(v)); !ok || got != r {
			t.Fatalf("ParseValueBytes: %v, %v", got, ok)
		}
		if !HasValuePrefix([]byte(v)) {
			t.Fatal("HasValuePrefix")
		}
	}
}

// TestValueCanonical: only what Value writes parses, so that a value is a
// reference in one spelling.
func TestValueCanonical(t *testing.T) {
	good := Value(Ref{Hash: Hash([]byte("x")), Size: 12, Media: "a/b"})
	h := good[len(ValuePrefix) : len(ValuePrefix)+64]
	for _, v := range []string{
		"",
		ValuePrefix,
		ValuePrefix + h,
		ValuePrefix + h + "/",
		ValuePrefix + h + "/012;a/b",
		ValuePrefix + h + "/+12",
		ValuePrefix + h + "/-1",
		ValuePrefix + h + "/12;",
		ValuePrefix + h + "/12;a\x00b",
		ValuePrefix + h + "/12;\xff",
		ValuePrefix + strings.ToUpper(h) + "/12",
		ValuePrefix + h[:63] + "g/12",
		ValuePrefix + h + "/99999999999999999999",
		ValuePrefix + h + "/12;" + strings.Repeat("m", MaxMediaType+1),
		"x" + good,
	} {
		if r, ok := ParseValue(v); ok {
			t.Errorf("ParseValue(%q) = %v, want no reference", v, r)
		}
	}
}

func FuzzParseValue(f *testing.F) {
	f.Add(Value(Ref{Hash: Hash([]byte("x")), Size: 12, Media: "a/b"}))
	f.Add(Value(Ref{}))
	f.Add(ValuePrefix + "zz")
	f.Fuzz(func(t *testing.T, v string) {
		r, ok := ParseValue(v)
		if !ok {
			return
		}
		if Value(r) != v {
			t.Fatalf("ParseValue(%q) = %v, which Value writes as %q", v, r, Value(r))
		}
	})
}
