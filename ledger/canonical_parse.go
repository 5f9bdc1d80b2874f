// The validating JSON parser behind CanonicalArgs: values, strings and
// their escapes, numbers, and the limits on hostile input.

package ledger

import (
	"bytes"
	"fmt"
	"slices"
	"unicode/utf8"
)

// maxDepth bounds the nesting of arrays and objects, so that hostile input
// cannot exhaust the stack.
const maxDepth = 512

// maxExponent bounds the magnitude of a number's exponent; beyond it the
// exact decimal arithmetic would need unbounded space.
const maxExponent = 1_000_000_000

func argErr(off int, format string, args ...any) error {
	return fmt.Errorf("%w: offset %d: %s", ErrInvalidArgs, off, fmt.Sprintf(format, args...))
}

func describe(in []byte, i int) string {
	if i >= len(in) {
		return "end of input"
	}
	c := in[i]
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("character %q", c)
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (p *parser) skipSpace(i int) int {
	for i < len(p.in) {
		switch p.in[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value parses the value starting at i (no leading space) and returns the
// offset after it and its node index.
func (p *parser) value(i, depth int) (int, int, error) {
	if i >= len(p.in) {
		return i, 0, argErr(i, "unexpected end of input, expected a value")
	}
	switch c := p.in[i]; {
	case c == '{':
		return p.object(i, depth+1)
	case c == '[':
		return p.array(i, depth+1)
	case c == '"':
		end, _, err := p.str(i)
		if err != nil {
			return end, 0, err
		}
		return end, p.add(jnode{kind: jString, start: i + 1, end: end - 1}), nil
	case c == '-' || (c >= '0' && c <= '9'):
		end, err := p.number(i)
		if err != nil {
			return end, 0, err
		}
		return end, p.add(jnode{kind: jNumber, start: i, end: end}), nil
	case bytes.HasPrefix(p.in[i:], []byte("true")):
		return i + 4, p.add(jnode{kind: jTrue}), nil
	case bytes.HasPrefix(p.in[i:], []byte("false")):
		return i + 5, p.add(jnode{kind: jFalse}), nil
	case bytes.HasPrefix(p.in[i:], []byte("null")):
		return i + 4, p.add(jnode{kind: jNull}), nil
	default:
		return i, 0, argErr(i, "unexpected %s, expected a value", describe(p.in, i))
	}
}

func (p *parser) add(n jnode) int {
	p.nodes = append(p.nodes, n)
	return len(p.nodes) - 1
}

func (p *parser) array(i, depth int) (int, int, error) {
	if depth > maxDepth {
		return i, 0, argErr(i, "nesting deeper than %d", maxDepth)
	}
	base := len(p.stack)
	i = p.skipSpace(i + 1)
	if i < len(p.in) && p.in[i] == ']' {
		return i + 1, p.add(jnode{kind: jArray, kidLo: len(p.kids), kidHi: len(p.kids)}), nil
	}
	for {
		end, n, err := p.value(i, depth)
		if err != nil {
			return end, 0, err
		}
		p.stack = append(p.stack, n)
		i = p.skipSpace(end)
		if i >= len(p.in) {
			return i, 0, argErr(i, "unexpected end of input in array")
		}
		if p.in[i] == ']' {
			i++
			break
		}
		if p.in[i] != ',' {
			return i, 0, argErr(i, "unexpected %s in array, expected ',' or ']'", describe(p.in, i))
		}
		i = p.skipSpace(i + 1)
	}
	lo := len(p.kids)
	p.kids = append(p.kids, p.stack[base:]...)
	p.stack = p.stack[:base]
	return i, p.add(jnode{kind: jArray, kidLo: lo, kidHi: len(p.kids)}), nil
}

func (p *parser) object(i, depth int) (int, int, error) {
	if depth > maxDepth {
		return i, 0, argErr(i, "nesting deeper than %d", maxDepth)
	}
	base := len(p.stack)
	i = p.skipSpace(i + 1)
	if i < len(p.in) && p.in[i] == '}' {
		return i + 1, p.add(jnode{kind: jObject, kidLo: len(p.kids), kidHi: len(p.kids)}), nil
	}
	for {
		if i >= len(p.in) || p.in[i] != '"' {
			return i, 0, argErr(i, "unexpected %s in object, expected a string key", describe(p.in, i))
		}
		keyOff := i
		kend, esc, err := p.str(i)
		if err != nil {
			return kend, 0, err
		}
		keyLo, keyHi := i+1, kend-1
		if esc {
			keyLo = len(p.keys)
			p.keys = appendUnescaped(p.keys, p.in[i+1:kend-1])
			keyHi = len(p.keys)
		}
		i = p.skipSpace(kend)
		if i >= len(p.in) || p.in[i] != ':' {
			return i, 0, argErr(i, "unexpected %s in object, expected ':'", describe(p.in, i))
		}
		end, n, err := p.value(p.skipSpace(i+1), depth)
		if err != nil {
			return end, 0, err
		}
		nd := &p.nodes[n]
		nd.keyOff, nd.keyLo, nd.keyHi, nd.keyBuf = keyOff, keyLo, keyHi, esc
		p.stack = append(p.stack, n)
		i = p.skipSpace(end)
		if i >= len(p.in) {
			return i, 0, argErr(i, "unexpected end of input in object")
		}
		if p.in[i] == '}' {
			i++
			break
		}
		if p.in[i] != ',' {
			return i, 0, argErr(i, "unexpected %s in object, expected ',' or '}'", describe(p.in, i))
		}
		i = p.skipSpace(i + 1)
	}
	members := p.stack[base:]
	slices.SortStableFunc(members, func(a, b int) int { return bytes.Compare(p.key(a), p.key(b)) })
	for k := 1; k < len(members); k++ {
		if bytes.Equal(p.key(members[k-1]), p.key(members[k])) {
			later := max(p.nodes[members[k-1]].keyOff, p.nodes[members[k]].keyOff)
			return later, 0, argErr(later, "duplicate object key %q", p.key(members[k]))
		}
	}
	lo := len(p.kids)
	p.kids = append(p.kids, members...)
	p.stack = p.stack[:base]
	return i, p.add(jnode{kind: jObject, kidLo: lo, kidHi: len(p.kids)}), nil
}

// key returns the decoded key of object member n.
func (p *parser) key(n int) []byte {
	nd := &p.nodes[n]
	if nd.keyBuf {
		return p.keys[nd.keyLo:nd.keyHi]
	}
	return p.in[nd.keyLo:nd.keyHi]
}

// str validates the string starting at the quote at i and returns the offset
// after its closing quote and whether it holds escapes.
func (p *parser) str(i int) (int, bool, error) {
	in := p.in
	esc := false
	j := i + 1
	for {
		if j >= len(in) {
			return j, esc, argErr(i, "unterminated string")
		}
		c := in[j]
		switch {
		case c == '"':
			return j + 1, esc, nil
		case c < 0x20:
			return j, esc, argErr(j, "control character 0x%02x in string must be escaped", c)
		case c == '\\':
			esc = true
			if j+1 >= len(in) {
				return j, esc, argErr(j, "unterminated escape in string")
			}
			switch in[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				r, ok := hex4(in, j+2)
				if !ok {
					return j, esc, argErr(j, "bad \\u escape: want four hex digits")
				}
				j += 6
				switch {
				case r >= 0xDC00 && r <= 0xDFFF:
					return j - 6, esc, argErr(j-6, "lone low surrogate \\u%04x", r)
				case r >= 0xD800 && r <= 0xDBFF:
					lo, ok := -1, j+1 < len(in) && in[j] == '\\' && in[j+1] == 'u'
					if ok {
						var r2 rune
						r2, ok = hex4(in, j+2)
						lo = int(r2)
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return j - 6, esc, argErr(j-6, "high surrogate \\u%04x not followed by a low surrogate", r)
					}
					j += 6
				}
			default:
				return j, esc, argErr(j, "bad escape \\%c", in[j+1])
			}
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(in[j:])
			if r == utf8.RuneError && size <= 1 {
				return j, esc, argErr(j, "invalid UTF-8 in string")
			}
			j += size
		}
	}
}

func hex4(in []byte, i int) (rune, bool) {
	if i+4 > len(in) {
		return 0, false
	}
	var r rune
	for _, c := range in[i : i+4] {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

// appendUnescaped appends the decoded form of raw, the validated contents of
// a string literal.
func appendUnescaped(dst, raw []byte) []byte {
	for j := 0; j < len(raw); {
		c := raw[j]
		if c != '\\' {
			dst = append(dst, c)
			j++
			continue
		}
		switch raw[j+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(raw, j+2)
			if r >= 0xD800 && r <= 0xDBFF {
				lo, _ := hex4(raw, j+8)
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				j += 6
			}
			dst = utf8.AppendRune(dst, r)
			j += 6
			continue
		default: // '"', '\\', '/'
			dst = append(dst, raw[j+1])
		}
		j += 2
	}
	return dst
}

// number validates the number literal at i (RFC 8259 grammar) and returns
// the offset after it.
func (p *parser) number(i int) (int, error) {
	in := p.in
	j := i
	if in[j] == '-' {
		j++
	}
	switch {
	case j < len(in) && in[j] == '0':
		j++
	case j < len(in) && in[j] >= '1' && in[j] <= '9':
		for j < len(in) && in[j] >= '0' && in[j] <= '9' {
			j++
		}
	default:
		return j, argErr(j, "bad number: expected a digit, found %s", describe(in, j))
	}
	if j < len(in) && in[j] == '.' {
		j++
		d := j
		for j < len(in) && in[j] >= '0' && in[j] <= '9' {
			j++
		}
		if j == d {
			return j, argErr(j, "bad number: expected a digit after '.', found %s", describe(in, j))
		}
	}
	if j < len(in) && (in[j] == 'e' || in[j] == 'E') {
		j++
		if j < len(in) && (in[j] == '+' || in[j] == '-') {
			j++
		}
		d := j
		exp := 0
		for j < len(in) && in[j] >= '0' && in[j] <= '9' {
			if exp <= maxExponent {
				exp = exp*10 + int(in[j]-'0')
			}
			j++
		}
		if j == d {
			return j, argErr(j, "bad number: expected a digit in exponent, found %s", describe(in, j))
		}
		if exp > maxExponent {
			return i, argErr(i, "number exponent beyond ±%d", maxExponent)
		}
	}
	return j, nil
}
