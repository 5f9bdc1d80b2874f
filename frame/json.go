package frame

import (
	"encoding/binary"
	"math/bits"
)

// validJSON reports whether b is exactly one JSON value with optional white
// space around it: the same answer as encoding/json.Valid for every input
// (FuzzValidJSON checks it), including its limit of 10000 nested arrays and
// objects and its acceptance of any byte above 0x7f inside strings, but
// several times faster (BenchmarkValidJSON; figures in bench/RESULTS-frame.md)
// and without allocating below 64 levels of nesting.
// Apply checks the JSON of every tool call and part, and DecodeFrame that
// of every message of a snapshot, so this is on the commit and restart
// paths.
func validJSON(b []byte) bool {
	var buf [64]byte
	stack := buf[:0] // the open containers, '{' or '['
	i := 0
	for {
		// A value must start at i.
		i = skipSpace(b, i)
		if i == len(b) {
			return false
		}
		switch c := b[i]; c {
		case '{', '[':
			if len(stack) == maxJSONDepth {
				return false
			}
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == c+2 { // '{'+2 is '}', '['+2 is ']'
				i++
				break // an empty container is a whole value
			}
			stack = append(stack, c)
			if c == '{' {
				if i = jsonKey(b, i); i < 0 {
					return false
				}
			}
			continue
		case '"':
			if i = jsonString(b, i); i < 0 {
				return false
			}
		case 't':
			if i = jsonLiteral(b, i, "true"); i < 0 {
				return false
			}
		case 'f':
			if i = jsonLiteral(b, i, "false"); i < 0 {
				return false
			}
		case 'n':
			if i = jsonLiteral(b, i, "null"); i < 0 {
				return false
			}
		default:
			if i = jsonNumber(b, i); i < 0 {
				return false
			}
		}
		// A value ended at i: close containers, or go on to the next element.
	next:
		for {
			i = skipSpace(b, i)
			if len(stack) == 0 {
				return i == len(b)
			}
			if i == len(b) {
				return false
			}
			top := stack[len(stack)-1]
			switch b[i] {
			case ',':
				i++
				if top == '{' {
					if i = jsonKey(b, skipSpace(b, i)); i < 0 {
						return false
					}
				}
				break next
			case top + 2:
				i++
				stack = stack[:len(stack)-1]
			default:
				return false
			}
		}
	}
}

// maxJSONDepth is encoding/json's limit of nesting.
const maxJSONDepth = 10000

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// jsonKey reads an object's key and its colon at i, and returns the
// offset after the colon, or -1.
func jsonKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = jsonString(b, i); i < 0 {
		return -1
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return i + 1
}

// jsonString reads the string that starts at b[i] == '"' and returns the
// offset after it, or -1. It skips eight bytes at a time while none of them
// is a quote, a backslash or a control character.
func jsonString(b []byte, i int) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	for i++; ; {
		for i+8 <= len(b) {
			w := binary.LittleEndian.Uint64(b[i:])
			q, s := w^(ones*'"'), w^(ones*'\\')
			// A byte of q or s is zero where w has a quote or a backslash,
			// and a byte of w below 0x20 is a control character: each test
			// sets a high bit when such a byte is in w, and none otherwise.
			// The lowest byte so flagged is such a byte (a false flag needs
			// a borrow from a lower, true one): go straight to it.
			if m := ((q-ones)&^q | (s-ones)&^s | (w-ones*0x20)&^w) & highs; m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			return -1
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return -1
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return -1
					}
				}
				i += 6
			default:
				return -1
			}
		case c < 0x20:
			return -1
		default:
			i++
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func jsonLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// jsonNumber reads the number at i (RFC 8259: -? int frac? exp?) and
// returns the offset after it, or -1.
func jsonNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
