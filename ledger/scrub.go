package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Redacted is what the ledger stores in place of a secret it scrubs from an
// exec's error message or result, and in place of a value an Action names
// in RedactResult.
const Redacted = "[redacted]"

// scrubber removes an action's secrets from what is stored about it: the
// values its Redact pointers name in Args (which may come back echoed in
// an error message or a result) and the parts of the result its
// RedactResult pointers name. It lives in an Intent in memory only; a
// decoded Intent has none (nil scrubs nothing).
type scrubber struct {
	// secrets are the forms in which a secret may be echoed, longest
	// first: a string value as it is and as escaped inside a JSON string;
	// any other value as its JSON text.
	secrets [][]byte
	// values are the secrets that are not strings, decoded: a JSON
	// result is scrubbed value by value, so a subtree equal to one is a
	// secret whatever spacing or escaping its encoder used.
	values []any
	// results are the parsed RedactResult pointers.
	results [][]string
}

// newScrubber collects the secrets of args (valid JSON, as CanonicalArgs
// checked) named by redact, and parses resultPtrs. It fails only for a
// malformed result pointer (ErrBadPointer).
func newScrubber(args []byte, redact, resultPtrs []string) (*scrubber, error) {
	if len(redact) == 0 && len(resultPtrs) == 0 {
		return nil, nil // nothing to scrub, as below, without the allocation
	}
	s := &scrubber{}
	for _, p := range resultPtrs {
		toks, err := parsePointer(p)
		if err != nil {
			return nil, fmt.Errorf("%w: RedactResult %q: %v", ErrBadPointer, p, err)
		}
		s.results = append(s.results, toks)
	}
	if len(redact) > 0 && len(args) > 0 {
		var doc any
		d := json.NewDecoder(bytes.NewReader(args))
		d.UseNumber()
		if d.Decode(&doc) == nil {
			seen := map[string]bool{}
			add := func(b []byte) {
				if len(b) > 0 && !seen[string(b)] {
					seen[string(b)] = true
					s.secrets = append(s.secrets, b)
				}
			}
			for _, p := range redact {
				toks, err := parsePointer(p)
				if err != nil {
					continue // CanonicalArgs refused it already
				}
				v, ok := lookup(doc, toks)
				if !ok {
					continue
				}
				if str, isStr := v.(string); isStr {
					add([]byte(str))
					q, _ := marshalNoHTML(str)
					add(q[1 : len(q)-1]) // as escaped inside a JSON string
				} else {
					b, _ := marshalNoHTML(v)
					add(b)
					switch v := v.(type) {
					case map[string]any:
						if len(v) > 0 {
							s.values = append(s.values, v)
						}
					case []any:
						if len(v) > 0 {
							s.values = append(s.values, v)
						}
					}
				}
			}
		}
	}
	sort.SliceStable(s.secrets, func(i, j int) bool { return len(s.secrets[i]) > len(s.secrets[j]) })
	if len(s.secrets) == 0 && len(s.results) == 0 {
		return nil, nil
	}
	return s, nil
}

// text returns msg with every secret replaced by Redacted: as it is, as
// it is escaped inside a JSON string, and inside any JSON string literal
// of msg whatever escapes it uses (an error message that quotes a JSON
// body written by Go's encoder, \u003c, or Python's, \u00e4). A message
// that is JSON whole is scrubbed value by value, as a result is.
func (s *scrubber) text(msg string) string {
	if s == nil {
		return msg
	}
	if len(s.secrets) == 0 {
		return msg
	}
	if doc, ok := decodeJSON([]byte(msg)); ok {
		if !s.holds(doc) && !s.echoed([]byte(msg)) {
			return msg
		}
		if out, err := marshalNoHTML(s.walk(doc)); err == nil {
			msg = string(out)
		}
	}
	return s.plain(s.literals(msg))
}

// plain replaces every secret of msg, byte for byte.
func (s *scrubber) plain(msg string) string {
	for _, sec := range s.secrets {
		msg = strings.ReplaceAll(msg, string(sec), Redacted)
	}
	return msg
}

// literals returns msg with every JSON string literal that holds an escape
// and decodes to text holding a secret replaced by the scrubbed literal.
// Each quote is tried as the start of a literal that ends at the next
// unescaped quote, so a stray quote before a JSON body does not hide its
// literals; the scan is linear in msg.
func (s *scrubber) literals(msg string) string {
	var out strings.Builder
	done := 0 // msg[:done] is in out
	for i := 0; i < len(msg); i++ {
		if msg[i] != '"' || i < done {
			continue
		}
		end, escaped := -1, false
		for j := i + 1; j < len(msg); j++ {
			if msg[j] == '\\' {
				escaped = true
				j++
				continue
			}
			if msg[j] == '"' {
				end = j
				break
			}
		}
		if end < 0 {
			break
		}
		if !escaped {
			continue
		}
		var str string
		if json.Unmarshal([]byte(msg[i:end+1]), &str) != nil {
			continue
		}
		if t := s.plain(str); t != str {
			q, _ := marshalNoHTML(t)
			out.WriteString(msg[done:i])
			out.Write(q)
			done = end + 1
		}
	}
	if done == 0 {
		return msg
	}
	out.WriteString(msg[done:])
	return out.String()
}

// result returns what the certificate stores of res: res itself if there
// is nothing to scrub, else a copy with the RedactResult values replaced
// by Redacted and every secret echoed in it replaced too. A JSON result is
// scrubbed value by value and re-encoded (keys sorted), so it stays JSON;
// any other result byte by byte (with RedactResult pointers, which need
// JSON, the whole of it becomes Redacted).
//
// A JSON result is decoded before it is searched: a secret that the exec's
// encoder escaped (Go's json.Marshal writes < as \u003c, Python's
// json.dumps writes ä as \u00e4) is found in the decoded value, and the
// result is then stored re-encoded without it.
func (s *scrubber) result(res []byte) []byte {
	if s == nil {
		return res
	}
	doc, ok := decodeJSON(res)
	if !ok {
		if len(s.results) > 0 {
			return []byte(`"` + Redacted + `"`)
		}
		if !s.echoed(res) {
			return res
		}
		return s.bytes(res)
	}
	if len(s.results) == 0 && !s.echoed(res) && !s.holds(doc) {
		return res
	}
	for _, toks := range s.results {
		doc = replaceAt(doc, toks)
	}
	doc = s.walk(doc)
	out, err := marshalNoHTML(doc)
	if err != nil {
		return []byte(`"` + Redacted + `"`)
	}
	if s.echoed(out) { // a secret split across escapes, say
		out = s.bytes(out)
	}
	return out
}

// decodeJSON decodes b if it is one JSON value, numbers kept as text.
func decodeJSON(b []byte) (any, bool) {
	var doc any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil || d.More() {
		return nil, false
	}
	// Decode stops after the value: anything but space after it is not
	// JSON (d.More sees only a next value's start).
	if len(bytes.TrimSpace(b[d.InputOffset():])) > 0 {
		return nil, false
	}
	return doc, true
}

// holds reports whether a secret is in a decoded JSON value: in a string,
// a key or a number's text, or a subtree equal to a secret that is not a
// string.
func (s *scrubber) holds(v any) bool {
	if s.isValue(v) {
		return true
	}
	switch v := v.(type) {
	case string:
		return s.echoed([]byte(v))
	case json.Number:
		return s.echoed([]byte(v.String()))
	case []any:
		for _, e := range v {
			if s.holds(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if s.echoed([]byte(k)) || s.holds(e) {
				return true
			}
		}
	}
	return false
}

// isValue reports whether v equals a secret that is an object or an array.
func (s *scrubber) isValue(v any) bool {
	switch v.(type) {
	case []any, map[string]any:
	default:
		return false
	}
	for _, sec := range s.values {
		if reflect.DeepEqual(v, sec) {
			return true
		}
	}
	return false
}

func (s *scrubber) echoed(b []byte) bool {
	for _, sec := range s.secrets {
		if bytes.Contains(b, sec) {
			return true
		}
	}
	return false
}

func (s *scrubber) bytes(b []byte) []byte {
	out := bytes.Clone(b)
	for _, sec := range s.secrets {
		out = bytes.ReplaceAll(out, sec, []byte(Redacted))
	}
	return out
}

// walk scrubs the secrets out of every string, key and number of v.
func (s *scrubber) walk(v any) any {
	if s.isValue(v) {
		return Redacted
	}
	switch v := v.(type) {
	case string:
		return s.plain(v)
	case json.Number:
		if t := s.plain(v.String()); t != v.String() {
			return t
		}
		return v
	case []any:
		for i := range v {
			v[i] = s.walk(v[i])
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[s.plain(k)] = s.walk(e)
		}
		return out
	}
	return v
}

// lookup resolves RFC 6901 tokens in a decoded JSON document.
func lookup(doc any, toks []string) (any, bool) {
	for _, tok := range toks {
		switch d := doc.(type) {
		case map[string]any:
			v, ok := d[tok]
			if !ok {
				return nil, false
			}
			doc = v
		case []any:
			i, ok := arrayIndex(tok)
			if !ok || i >= len(d) {
				return nil, false
			}
			doc = d[i]
		default:
			return nil, false
		}
	}
	return doc, true
}

// replaceAt returns doc with the value toks name replaced by Redacted (doc
// unchanged if they name nothing; the whole document if there are none).
func replaceAt(doc any, toks []string) any {
	if len(toks) == 0 {
		return Redacted
	}
	parent, ok := lookup(doc, toks[:len(toks)-1])
	if !ok {
		return doc
	}
	last := toks[len(toks)-1]
	switch p := parent.(type) {
	case map[string]any:
		if _, ok := p[last]; ok {
			p[last] = Redacted
		}
	case []any:
		if i, ok := arrayIndex(last); ok && i < len(p) {
			p[i] = Redacted
		}
	}
	return doc
}

func marshalNoHTML(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
