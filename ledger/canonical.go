package ledger

import (
	"bytes"
	"fmt"
	"slices"
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
	// The canonical form is about as long as the input (less its white
	// space, sometimes more for escapes): one allocation in the common
	// case instead of the several that growing from nil takes.
	return appendCanonical(make([]byte, 0, len(args)+len(args)/8+8), args, redact)
}

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
	if len(ptrs) == 0 {
		if out, ok := appendFast(dst, args); ok { // canonical_fast.go
			return out, nil
		}
	}
	return appendParsed(dst, args, ptrs)
}

// appendParsed is appendCanonical's way for any document: parsed into
// nodes, redacted, written in the canonical form.
func appendParsed(dst, args []byte, ptrs [][]string) ([]byte, error) {
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
