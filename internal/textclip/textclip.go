// Package textclip shortens a value to a few runes on one line, for people:
// continuumctl's text views and the web view's previews of folded values
// say it the same way.
//
// String and Bytes read a value only as far as they need, so a value of
// tens of megabytes costs no copy of it: the result is
// strings.Join(strings.Fields(s), " ") if that has at most n runes, else
// its first n-1 runes (an invalid byte as U+FFFD) and "…".
//
// A blob's reference value (package blob) is shown whole, whatever n, as
// "blob blake3t:HASH/SIZE [MEDIA]": what `continuumctl blob get` takes.
package textclip

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/continuumdb/continuum/blob"
)

// String shortens s to n runes (n >= 1) on one line.
func String(s string, n int) string {
	if ref, ok := blob.ParseValue(s); ok {
		return "blob " + ref.String()
	}
	return clip(len(s), func(i int) (rune, int) { return utf8.DecodeRuneInString(s[i:]) }, func(i, j int) string { return s[i:j] }, n)
}

// Bytes is String of string(b), without the copy.
func Bytes(b []byte, n int) string {
	if ref, ok := blob.ParseValueBytes(b); ok {
		return "blob " + ref.String()
	}
	return clip(len(b), func(i int) (rune, int) { return utf8.DecodeRune(b[i:]) }, func(i, j int) string { return string(b[i:j]) }, n)
}

func clip(size int, decode func(i int) (rune, int), slice func(i, j int) string, n int) string {
	var out strings.Builder
	runes, space := 0, false
	for i := 0; i < size && runes <= n; {
		r, w := decode(i)
		if unicode.IsSpace(r) {
			space = runes > 0
			i += w
			continue
		}
		if space {
			out.WriteByte(' ')
			runes++
			space = false
		}
		out.WriteString(slice(i, i+w)) // an invalid byte as it is
		runes++
		i += w
	}
	s := out.String()
	if runes <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
