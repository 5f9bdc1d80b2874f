package ledger

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// CanonicalArgs returns the canonical form of the JSON document args with the
// values at the RFC 6901 pointers in redact removed (see the package
// documentation for the exact canonical form). A pointer that matches nothing
// is not an error; a malformed one is (ErrBadPointer). Invalid JSON, duplicate
// object keys, invalid UTF-8 and lone surrogates are errors wrapping
// ErrInvalidArgs that give the byte offset. Empty args (nil or zero length)
// stand for JSON null. The returned slice is newly allocated.
func CanonicalArgs(args []byte, redact []string) ([]byte, error) {
	return appendCanonical(nil, args, redact)
}

// maxDepth bounds the nesting of arrays and objects, so that hostile input
// cannot exhaust the stack.
const maxDepth = 512

// maxExponent bounds the magnitude of a number's exponent; beyond it the
// exact decimal arithmetic would need unbounded space.
const maxExponent = 1_000_000_000

type jkind uint8

const (
	jNull jkind = iota
	jFalse
	jTrue
	jNumber
	jString
	jArray
	jObject
)

// jnode is one JSON value in a parsed document. Nodes live in parser.nodes
// and refer to each other by index, so a document costs a few slices, not an
// allocation per value.
type jnode struct {
	kind jkind
	// start, end: for numbers, the literal; for strings, the bytes between
	// the quotes (still escaped). Offsets into the input.
	start, end int
	// kidLo, kidHi: for arrays and objects, the children in parser.kids.
	// Object children are sorted by key.
	kidLo, kidHi int
	// keyOff is the input offset of the member's key (objects only), for
	// error messages; keyBuf says whether the decoded key lives in
	// parser.keys[keyLo:keyHi] (it had escapes) or in the input.
	keyOff       int
	keyLo, keyHi int
	keyBuf       bool
	removed      bool
}

type parser struct {
	in    []byte
	nodes []jnode
	kids  []int
	stack []int // children of the open containers, moved to kids on close
	keys  []byte
}

// parserPool recycles parsers so that canonicalising a small document
// allocates almost nothing.
var parserPool = sync.Pool{New: func() any { return &parser{nodes: make([]jnode, 0, 32)} }}

// release returns p to the pool unless a huge document made it large.
func (p *parser) release() {
	if cap(p.nodes) > 1<<12 || cap(p.kids) > 1<<12 || cap(p.keys) > 1<<16 {
		return
	}
	p.in = nil
	p.nodes, p.kids, p.stack, p.keys = p.nodes[:0], p.kids[:0], p.stack[:0], p.keys[:0]
	parserPool.Put(p)
}

func argErr(off int, format string, args ...any) error {
	return fmt.Errorf("%w: offset %d: %s", ErrInvalidArgs, off, fmt.Sprintf(format, args...))
}

func appendCanonical(dst, args []byte, redact []string) ([]byte, error) {
	ptrs := make([][]string, 0, len(redact))
	for i, r := range redact {
		toks, err := parsePointer(r)
		if err != nil {
			return dst, fmt.Errorf("%w: redact[%d] %q: %v", ErrBadPointer, i, r, err)
		}
		ptrs = append(ptrs, toks)
	}
	if len(args) == 0 {
		return append(dst, "null"...), nil
	}
	p := parserPool.Get().(*parser)
	defer p.release()
	p.in = args
	i, root, err := p.value(p.skipSpace(0), 0)
	if err != nil {
		return dst, err
	}
	if i = p.skipSpace(i); i != len(args) {
		return dst, argErr(i, "unexpected %s after the JSON value", describe(args, i))
	}
	for _, toks := range ptrs {
		if n, ok := p.resolve(root, toks); ok {
			p.nodes[n].removed = true
		}
	}
	if p.nodes[root].removed {
		return append(dst, "null"...), nil
	}
	return p.emit(dst, root), nil
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

// appendNumber appends the canonical form of the validated number literal
// lit: the exact decimal value as ±D×10^E with D free of leading and trailing
// zeros, written plainly when that is short and with an exponent otherwise.
func appendNumber(dst, lit []byte) []byte {
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	var intPart, frac []byte
	exp := 0
	k := 0
	for k < len(lit) && lit[k] >= '0' && lit[k] <= '9' {
		k++
	}
	intPart = lit[:k]
	if k < len(lit) && lit[k] == '.' {
		f := k + 1
		k = f
		for k < len(lit) && lit[k] >= '0' && lit[k] <= '9' {
			k++
		}
		frac = lit[f:k]
	}
	if k < len(lit) { // exponent, validated and bounded by number
		k++
		eneg := false
		if lit[k] == '+' || lit[k] == '-' {
			eneg = lit[k] == '-'
			k++
		}
		for ; k < len(lit); k++ {
			exp = exp*10 + int(lit[k]-'0')
		}
		if eneg {
			exp = -exp
		}
	}
	// The significant digits are intPart||frac with exponent exp-len(frac).
	// Strip leading zeros (from intPart, then frac) and trailing zeros (from
	// frac, then intPart) without copying.
	e := exp - len(frac)
	for len(intPart) > 0 && intPart[0] == '0' {
		intPart = intPart[1:]
	}
	if len(intPart) == 0 {
		for len(frac) > 0 && frac[0] == '0' {
			frac = frac[1:]
		}
	}
	for len(frac) > 0 && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
		e++
	}
	if len(frac) == 0 {
		for len(intPart) > 0 && intPart[len(intPart)-1] == '0' {
			intPart = intPart[:len(intPart)-1]
			e++
		}
	}
	nd := len(intPart) + len(frac)
	if nd == 0 {
		return append(dst, '0') // 0, -0, 0.000e9: all zero
	}
	digit := func(i int) byte {
		if i < len(intPart) {
			return intPart[i]
		}
		return frac[i-len(intPart)]
	}
	if neg {
		dst = append(dst, '-')
	}
	point := nd + e // digits before the decimal point
	switch {
	case e >= 0 && e <= 20:
		dst = append(dst, intPart...)
		dst = append(dst, frac...)
		for range e {
			dst = append(dst, '0')
		}
	case e < 0 && point > 0:
		for i := range nd {
			if i == point {
				dst = append(dst, '.')
			}
			dst = append(dst, digit(i))
		}
	case e < 0 && point > -6:
		dst = append(dst, '0', '.')
		for range -point {
			dst = append(dst, '0')
		}
		dst = append(dst, intPart...)
		dst = append(dst, frac...)
	default:
		dst = append(dst, digit(0))
		if nd > 1 {
			dst = append(dst, '.')
			for i := 1; i < nd; i++ {
				dst = append(dst, digit(i))
			}
		}
		dst = append(dst, 'e')
		dst = strconv.AppendInt(dst, int64(point-1), 10)
	}
	return dst
}

// appendString appends the canonical form of a string literal whose
// validated contents (between the quotes) are raw: RFC 8785 escaping, that
// is \" \\ \b \f \n \r \t, \u00xx (lower-case hex) for the other control
// characters, and every other character as itself in UTF-8.
func appendString(dst, raw []byte) []byte {
	dst = append(dst, '"')
	if bytes.IndexByte(raw, '\\') < 0 {
		// Validated contents without escapes hold no quote and no control
		// character: they are already canonical.
		dst = append(dst, raw...)
		return append(dst, '"')
	}
	var one [4]byte
	for j := 0; j < len(raw); {
		c := raw[j]
		var chunk []byte
		if c == '\\' {
			// Decode this one escape (a surrogate pair counts as one).
			n := 2
			if raw[j+1] == 'u' {
				n = 6
				if r, _ := hex4(raw, j+2); r >= 0xD800 && r <= 0xDBFF {
					n = 12
				}
			}
			chunk = appendUnescaped(one[:0], raw[j:j+n])
			j += n
		} else {
			chunk = raw[j : j+1]
			j++
		}
		for _, b := range chunk {
			switch {
			case b == '"':
				dst = append(dst, '\\', '"')
			case b == '\\':
				dst = append(dst, '\\', '\\')
			case b >= 0x20:
				dst = append(dst, b)
			case b == '\b':
				dst = append(dst, '\\', 'b')
			case b == '\f':
				dst = append(dst, '\\', 'f')
			case b == '\n':
				dst = append(dst, '\\', 'n')
			case b == '\r':
				dst = append(dst, '\\', 'r')
			case b == '\t':
				dst = append(dst, '\\', 't')
			default:
				const hexdig = "0123456789abcdef"
				dst = append(dst, '\\', 'u', '0', '0', hexdig[b>>4], hexdig[b&15])
			}
		}
	}
	return append(dst, '"')
}

func (p *parser) emit(dst []byte, n int) []byte {
	nd := &p.nodes[n]
	switch nd.kind {
	case jNull:
		return append(dst, "null"...)
	case jTrue:
		return append(dst, "true"...)
	case jFalse:
		return append(dst, "false"...)
	case jNumber:
		return appendNumber(dst, p.in[nd.start:nd.end])
	case jString:
		return appendString(dst, p.in[nd.start:nd.end])
	case jArray:
		dst = append(dst, '[')
		first := true
		for _, k := range p.kids[nd.kidLo:nd.kidHi] {
			if p.nodes[k].removed {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = p.emit(dst, k)
		}
		return append(dst, ']')
	default: // jObject
		dst = append(dst, '{')
		first := true
		for _, k := range p.kids[nd.kidLo:nd.kidHi] {
			if p.nodes[k].removed {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			// The decoded key never needs unescaping again: appendString
			// only unescapes at backslashes, which a decoded key may hold
			// literally, so escape it from its decoded form.
			if p.nodes[k].keyBuf {
				dst = appendRawString(dst, p.key(k))
			} else { // an unescaped key in the input is already canonical
				dst = append(dst, '"')
				dst = append(dst, p.key(k)...)
				dst = append(dst, '"')
			}
			dst = append(dst, ':')
			dst = p.emit(dst, k)
		}
		return append(dst, '}')
	}
}

// appendRawString appends the canonical string literal of the decoded
// (unescaped) UTF-8 bytes s.
func appendRawString(dst, s []byte) []byte {
	dst = append(dst, '"')
	for _, b := range s {
		switch {
		case b == '"':
			dst = append(dst, '\\', '"')
		case b == '\\':
			dst = append(dst, '\\', '\\')
		case b >= 0x20:
			dst = append(dst, b)
		case b == '\b':
			dst = append(dst, '\\', 'b')
		case b == '\f':
			dst = append(dst, '\\', 'f')
		case b == '\n':
			dst = append(dst, '\\', 'n')
		case b == '\r':
			dst = append(dst, '\\', 'r')
		case b == '\t':
			dst = append(dst, '\\', 't')
		default:
			const hexdig = "0123456789abcdef"
			dst = append(dst, '\\', 'u', '0', '0', hexdig[b>>4], hexdig[b&15])
		}
	}
	return append(dst, '"')
}

// parsePointer splits an RFC 6901 JSON pointer into its unescaped reference
// tokens. "" (the whole document) yields no tokens.
func parsePointer(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	if s[0] != '/' {
		return nil, fmt.Errorf("a pointer must be empty or start with '/'")
	}
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("invalid UTF-8")
	}
	var toks []string
	var tok []byte
	for i := 1; i <= len(s); i++ {
		if i == len(s) || s[i] == '/' {
			toks = append(toks, string(tok))
			tok = tok[:0]
			continue
		}
		if s[i] != '~' {
			tok = append(tok, s[i])
			continue
		}
		if i+1 >= len(s) || (s[i+1] != '0' && s[i+1] != '1') {
			return nil, fmt.Errorf("'~' at offset %d must be followed by '0' or '1'", i)
		}
		if s[i+1] == '0' {
			tok = append(tok, '~')
		} else {
			tok = append(tok, '/')
		}
		i++
	}
	return toks, nil
}

// resolve returns the node the pointer tokens refer to, if any.
func (p *parser) resolve(n int, toks []string) (int, bool) {
	for _, tok := range toks {
		nd := &p.nodes[n]
		switch nd.kind {
		case jObject:
			kids := p.kids[nd.kidLo:nd.kidHi]
			k, found := slices.BinarySearchFunc(kids, tok, func(m int, t string) int {
				return bytes.Compare(p.key(m), []byte(t))
			})
			if !found {
				return 0, false
			}
			n = kids[k]
		case jArray:
			idx, ok := arrayIndex(tok)
			if !ok || idx >= nd.kidHi-nd.kidLo {
				return 0, false
			}
			n = p.kids[nd.kidLo+idx]
		default:
			return 0, false
		}
	}
	return n, true
}

// arrayIndex parses an RFC 6901 array index: "0" or a decimal without a
// leading zero. "-" and anything else refer to no element.
func arrayIndex(tok string) (int, bool) {
	if tok == "" || len(tok) > 9 || (tok[0] == '0' && len(tok) > 1) {
		return 0, false
	}
	v := 0
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, false
		}
		v = v*10 + int(tok[i]-'0')
	}
	return v, true
}
