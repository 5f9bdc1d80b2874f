package main

// Streaming the large values of a frame view (inspect --json). A frame may
// be as large as engine.MaxSize (63 MiB); encoding/json would hold its
// rendering whole, twice when indented (the encoding, then the indented
// copy), beside the frame: about 500 MB for one 63 MiB value. Instead, the
// view is marshaled with each large value replaced by a placeholder, and
// the values are written where their placeholders are, in chunks: what
// this holds beyond the frame is the small rendering and one chunk.

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"unicode/utf8"

	"github.com/continuumdb/continuum/frame"
)

// bigValueBytes: values at least this large are streamed.
const bigValueBytes = 4 << 10

// chunkBytes is how much of a value one json.Marshal call encodes.
const chunkBytes = 64 << 10

// bigValue is a large value of a view, written in place of its
// placeholder: a JSON string, or (a text that is not valid UTF-8)
// {"base64": ...} as text.MarshalJSON writes it.
type bigValue struct {
	s    string
	b    []byte
	text bool // b is a text
}

// bigJSON collects the large values of a view, each replaced by the
// placeholder, in the order encoding/json writes them.
type bigJSON struct {
	placeholder string
	values      []bigValue
}

func newBigJSON() *bigJSON {
	var nonce [16]byte
	rand.Read(nonce[:])
	return &bigJSON{placeholder: "\x00continuumctl-value-" + hex.EncodeToString(nonce[:])}
}

// viewFrameStreamed is viewFrame with the large memory values, scratchpad
// and message contents left to big.
func viewFrameStreamed(f *frame.Frame, erased []string, big *bigJSON) frameView {
	v := viewFrame(f, erased)
	for _, k := range sortedKeys(v.Memory) { // the order json writes a map in
		if m := v.Memory[k]; len(m) >= bigValueBytes {
			big.values = append(big.values, bigValue{b: m, text: true})
			v.Memory[k] = text(big.placeholder)
		}
	}
	if len(v.Scratchpad) >= bigValueBytes {
		big.values = append(big.values, bigValue{b: v.Scratchpad, text: true})
		v.Scratchpad = text(big.placeholder)
	}
	for i := range v.Messages {
		if m := &v.Messages[i]; len(m.Content) >= bigValueBytes {
			big.values = append(big.values, bigValue{s: m.Content})
			m.Content = big.placeholder
		}
	}
	return v
}

// writeJSONStreamed writes v as writeJSON does, with big's values where
// their placeholders are. If the placeholders are not found as many times
// as there are values (a small value of v holds the placeholder's random
// text), it writes whole() through writeJSON instead: the same view with
// its values in place.
func writeJSONStreamed(w io.Writer, v any, big *bigJSON, whole func() any) error {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	ph, err := json.Marshal(big.placeholder)
	if err != nil {
		return err
	}
	if bytes.Count(out, ph) != len(big.values) {
		return writeJSON(w, whole())
	}
	for _, bv := range big.values {
		i := bytes.Index(out, ph)
		if _, err := w.Write(out[:i]); err != nil {
			return err
		}
		line := out[bytes.LastIndexByte(out[:i], '\n')+1 : i]
		indent := line[:len(line)-len(bytes.TrimLeft(line, " "))]
		if err := writeBigValue(w, bv, indent); err != nil {
			return err
		}
		out = out[i+len(ph):]
	}
	if _, err := w.Write(out); err != nil {
		return err
	}
	_, err = w.Write([]byte{'\n'})
	return err
}

// writeBigValue writes one value as encoding/json would, indented as
// writeJSON does on a line that starts with indent.
func writeBigValue(w io.Writer, bv bigValue, indent []byte) error {
	if bv.text && !utf8.Valid(bv.b) {
		if _, err := io.WriteString(w, "{\n"+string(indent)+"  \"base64\": \""); err != nil {
			return err
		}
		enc := base64.NewEncoder(base64.StdEncoding, w)
		if _, err := enc.Write(bv.b); err != nil {
			return err
		}
		if err := enc.Close(); err != nil {
			return err
		}
		_, err := io.WriteString(w, "\"\n"+string(indent)+"}")
		return err
	}
	s := bv.s
	if bv.text {
		s = "" // the chunks are of b
	}
	n := max(len(s), len(bv.b))
	chunk := func(i, j int) string {
		if bv.text {
			return string(bv.b[i:j])
		}
		return s[i:j]
	}
	at := func(i int) byte {
		if bv.text {
			return bv.b[i]
		}
		return s[i]
	}
	if _, err := io.WriteString(w, `"`); err != nil {
		return err
	}
	for i := 0; i < n; {
		j := min(i+chunkBytes, n)
		// Cut before a byte that starts a rune (or after three that do
		// not): encoding/json then decodes each side as it decodes the
		// whole, invalid bytes included.
		for k := 0; k < 3 && j < n && j > i+1 && !utf8.RuneStart(at(j)); k++ {
			j--
		}
		e, err := json.Marshal(chunk(i, j))
		if err != nil {
			return err
		}
		if _, err := w.Write(e[1 : len(e)-1]); err != nil {
			return err
		}
		i = j
	}
	_, err := io.WriteString(w, `"`)
	return err
}
