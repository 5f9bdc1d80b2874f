// The canonical writer behind CanonicalArgs: numbers as exact decimals,
// strings with RFC 8785 escaping, and the document with its redacted
// values left out.

package ledger

import (
	"bytes"
	"strconv"
)

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
