package blob

import (
	"encoding/hex"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A reference value is how a Ref stands in a value of a frame (a memory
// value, a tool output, a message's content or a part's text) in place of
// the bytes it names: text, so that it fits every such field, and so that
// inspect and export show it as it is:
//
//	"\x00continuum-blob:" hex(hash) "/" size [";" media]
//
// size is decimal without leading zeros and media, when present, non-empty
// UTF-8 without a NUL. The form is unique (ParseValue accepts only what
// Value writes), so a value is a reference or it is not. A value that
// starts with ValuePrefix but is not a reference to a blob of its run is
// stored as a blob itself by the engine (so that it reads back as the
// bytes it was), which keeps the two apart.
const ValuePrefix = "\x00continuum-blob:"

// MaxValueLen bounds a reference value's length.
const MaxValueLen = len(ValuePrefix) + 64 + 1 + 20 + 1 + MaxMediaType

// Value returns the reference value of r.
func Value(r Ref) string {
	var b strings.Builder
	b.Grow(len(ValuePrefix) + 64 + 1 + 20 + 1 + len(r.Media))
	b.WriteString(ValuePrefix)
	b.WriteString(hex.EncodeToString(r.Hash[:]))
	b.WriteByte('/')
	b.WriteString(strconv.FormatInt(r.Size, 10))
	if r.Media != "" {
		b.WriteByte(';')
		b.WriteString(r.Media)
	}
	return b.String()
}

// ParseValue returns the Ref v is the reference value of, if it is one.
func ParseValue(v string) (Ref, bool) {
	var r Ref
	if len(v) > MaxValueLen || !strings.HasPrefix(v, ValuePrefix) {
		return r, false
	}
	v = v[len(ValuePrefix):]
	if len(v) < 64+2 || v[64] != '/' {
		return r, false
	}
	h := v[:64]
	if _, err := hex.Decode(r.Hash[:], []byte(h)); err != nil || strings.ToLower(h) != h {
		return r, false
	}
	v = v[65:]
	size, media, hasMedia := strings.Cut(v, ";")
	if size == "" || (size[0] == '0' && len(size) > 1) || size[0] < '0' || size[0] > '9' {
		return r, false
	}
	n, err := strconv.ParseInt(size, 10, 64)
	if err != nil || n < 0 || n > 1<<62 {
		return r, false
	}
	if hasMedia && (media == "" || len(media) > MaxMediaType || !utf8.ValidString(media) || strings.IndexByte(media, 0) >= 0) {
		return r, false
	}
	r.Size, r.Media = n, media
	return r, true
}

// ParseValueBytes is ParseValue of a byte value (a memory value).
func ParseValueBytes(v []byte) (Ref, bool) {
	if len(v) > MaxValueLen || len(v) < len(ValuePrefix) || string(v[:len(ValuePrefix)]) != ValuePrefix {
		return Ref{}, false
	}
	return ParseValue(string(v))
}

// HasValuePrefix reports whether v starts as a reference value does.
func HasValuePrefix(v []byte) bool {
	return len(v) >= len(ValuePrefix) && string(v[:len(ValuePrefix)]) == ValuePrefix
}
