// The fast path of CanonicalArgs: a document that is already in the
// canonical form (compact, keys sorted, no needless escapes), or is but
// for the order of its top-level object's members (an agent's tool
// arguments, as a model writes them), is recognised in one pass over its
// bytes and copied, the top-level members in key order, without the
// parser's nodes, sort and writer.

package ledger

import (
	"bytes"
	"unicode/utf8"
)

// fastMaxDepth bounds the nesting the fast path follows (by recursion);
// a deeper document takes the parser, which holds the limit (maxDepth).
const fastMaxDepth = 16

// fastMaxNumber bounds the length of a number literal the fast path
// checks in a buffer on the stack; a longer one takes the parser.
const fastMaxNumber = 40

// fastMaxMembers bounds the members of a top-level object whose order
// the fast path puts right (on the stack); a larger one takes the parser.
const fastMaxMembers = 32

// appendFast appends the canonical form of args and reports true if args
// is canonical but for the order of its top-level object's members (an
// agent's tool arguments, compact, keys in the model's order): the
// members are copied in key order. Otherwise it appends nothing and
// reports false: the parser decides (isCanonical says which documents
// the fast path takes).
func appendFast(dst, args []byte) ([]byte, bool) {
	if len(args) == 0 || args[0] != '{' {
		if !isCanonical(args) {
			return dst, false
		}
		return append(dst, args...), true
	}
	type member struct{ key, whole []byte }
	var ms [fastMaxMembers]member
	n := 0
	i := 1
	if i < len(args) && args[i] == '}' {
		i++
	} else {
		for {
			if n == len(ms) || i >= len(args) || args[i] != '"' {
				return dst, false
			}
			end, esc, ok := canonString(args, i)
			if !ok || esc || end >= len(args) || args[end] != ':' {
				return dst, false
			}
			lo := i
			if i, ok = canonValue(args, end+1, 1); !ok || i >= len(args) {
				return dst, false
			}
			ms[n] = member{args[lo+1 : end-1], args[lo:i]}
			n++
			if args[i] == '}' {
				i++
				break
			}
			if args[i] != ',' {
				return dst, false
			}
			i++
		}
	}
	if i != len(args) {
		return dst, false
	}
	// Insertion sort: a handful of members, mostly in order.
	for k := 1; k < n; k++ {
		for j := k; j > 0 && bytes.Compare(ms[j-1].key, ms[j].key) > 0; j-- {
			ms[j-1], ms[j] = ms[j], ms[j-1]
		}
	}
	for k := 1; k < n; k++ {
		if bytes.Equal(ms[k-1].key, ms[k].key) {
			return dst, false // the parser's error, with its offset
		}
	}
	dst = append(dst, '{')
	for k := range n {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, ms[k].whole...)
	}
	return append(dst, '}'), true
}

// isCanonical reports whether args is a JSON document that the parser
// and writer (appendCanonical without redactions) would give back byte
// for byte. It answers false for anything it does not check itself
// (invalid JSON included, so that the parser reports the error): escaped
// object keys, nesting deeper than fastMaxDepth, numbers longer than
// fastMaxNumber. A true answer is exact, a false one says only "ask the
// parser" (FuzzCanonicalFastPath holds both to the parser's output).
func isCanonical(args []byte) bool {
	if len(args) == 0 {
		return false // empty stands for null: not the same bytes
	}
	i, ok := canonValue(args, 0, 0)
	return ok && i == len(args)
}

// canonValue checks the canonical value at i (no space before it) and
// returns the offset after it.
func canonValue(in []byte, i, depth int) (int, bool) {
	if i >= len(in) {
		return i, false
	}
	switch c := in[i]; {
	case c == '"':
		end, _, ok := canonString(in, i)
		return end, ok
	case c == '{':
		return canonObject(in, i, depth+1)
	case c == '[':
		return canonArray(in, i, depth+1)
	case c == '-' || (c >= '0' && c <= '9'):
		return canonNumber(in, i)
	case bytes.HasPrefix(in[i:], []byte("true")):
		return i + 4, true
	case bytes.HasPrefix(in[i:], []byte("false")):
		return i + 5, true
	case bytes.HasPrefix(in[i:], []byte("null")):
		return i + 4, true
	}
	return i, false
}

func canonArray(in []byte, i, depth int) (int, bool) {
	if depth > fastMaxDepth {
		return i, false
	}
	i++
	if i < len(in) && in[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = canonValue(in, i, depth); !ok || i >= len(in) {
			return i, false
		}
		switch in[i] {
		case ']':
			return i + 1, true
		case ',':
			i++
		default:
			return i, false
		}
	}
}

// canonObject checks an object whose keys hold no escape and come in
// strictly increasing byte order (the writer's order; equal keys are the
// parser's error).
func canonObject(in []byte, i, depth int) (int, bool) {
	if depth > fastMaxDepth {
		return i, false
	}
	i++
	if i < len(in) && in[i] == '}' {
		return i + 1, true
	}
	var last []byte
	for k := 0; ; k++ {
		if i >= len(in) || in[i] != '"' {
			return i, false
		}
		end, esc, ok := canonString(in, i)
		if !ok || esc {
			return i, false
		}
		key := in[i+1 : end-1]
		if k > 0 && bytes.Compare(last, key) >= 0 {
			return i, false
		}
		last = key
		if end >= len(in) || in[end] != ':' {
			return end, false
		}
		if i, ok = canonValue(in, end+1, depth); !ok || i >= len(in) {
			return i, false
		}
		switch in[i] {
		case '}':
			return i + 1, true
		case ',':
			i++
		default:
			return i, false
		}
	}
}

// canonString checks the string literal at the quote at i: valid UTF-8,
// no control character, and only the escapes the writer produces (\" \\
// \b \f \n \r \t, and \u00xx in lower case for the other control
// characters). It returns the offset after the closing quote and whether
// the literal holds an escape.
func canonString(in []byte, i int) (int, bool, bool) {
	esc := false
	for j := i + 1; j < len(in); {
		for j < len(in) && plainByte[in[j]] {
			j++
		}
		if j == len(in) {
			break
		}
		c := in[j]
		switch {
		case c == '"':
			return j + 1, esc, true
		case c < 0x20:
			return j, esc, false
		case c == '\\':
			esc = true
			if j+1 >= len(in) {
				return j, esc, false
			}
			switch in[j+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(in) || in[j+2] != '0' || in[j+3] != '0' || (in[j+4] != '0' && in[j+4] != '1') {
					return j, esc, false
				}
				var v byte
				switch h := in[j+5]; {
				case h >= '0' && h <= '9':
					v = h - '0'
				case h >= 'a' && h <= 'f':
					v = h - 'a' + 10
				default:
					return j, esc, false
				}
				v += (in[j+4] - '0') << 4
				switch v {
				case '\b', '\t', '\n', '\f', '\r':
					return j, esc, false // written as \b \t \n \f \r
				}
				j += 6
			default:
				return j, esc, false
			}
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(in[j:])
			if r == utf8.RuneError && size <= 1 {
				return j, esc, false
			}
			j += size
		}
	}
	return len(in), esc, false
}

// plainByte[c]: c is ASCII that stands for itself in a canonical string
// (not a control character, quote or backslash).
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// canonNumber checks the number literal at i: valid (the parser's
// grammar and bounds) and equal to what appendNumber writes for it.
func canonNumber(in []byte, i int) (int, bool) {
	p := parser{in: in}
	end, err := p.number(i)
	if err != nil || end-i > fastMaxNumber {
		return end, false
	}
	var buf [fastMaxNumber + 32]byte
	return end, bytes.Equal(appendNumber(buf[:0], in[i:end]), in[i:end])
}
