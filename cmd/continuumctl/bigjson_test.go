package main

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/continuumdb/continuum/frame"
)

// TestStreamedFrameJSONIsWriteJSON: inspect --json's streamed frame is
// byte for byte what writeJSON writes of the whole view, for large values
// of every kind: text with characters JSON escapes, multi-byte runes
// across chunk boundaries, invalid UTF-8 (base64 in memory, U+FFFD in a
// message), and a small value holding the placeholder's text.
func TestStreamedFrameJSONIsWriteJSON(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 3))
	pieces := []string{"a", " ", "\n", "\"", "<", ">", "&", "\\", "\u2028", "é", "✓", "𝄞", "\x00", "\x7f", "\xff", "\xe2\x9c", "\t\t"}
	gen := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	valid := func(n int) string { return strings.ToValidUTF8(gen(n), "?") }
	for round := range 20 {
		f := &frame.Frame{Objective: gen(100), Memory: map[string][]byte{
			"b": []byte(gen(chunkBytes*2 + rng.IntN(9))), "a": []byte(valid(chunkBytes + rng.IntN(9))),
			"small": []byte(gen(10)), "z": bytes.Repeat([]byte("é"), chunkBytes/2+rng.IntN(3)),
		}, Scratchpad: []byte(valid(bigValueBytes + rng.IntN(100)))}
		f.Messages = append(f.Messages, frame.Message{Role: frame.RoleAssistant, Content: gen(3*chunkBytes + rng.IntN(7)), Tool: "t"},
			frame.Message{Role: frame.RoleUser, Content: "short"})
		big := newBigJSON()
		if round == 0 {
			f.Objective = big.placeholder // the fallback
		}
		var got, want bytes.Buffer
		if err := writeJSONStreamed(&got, struct {
			Frame frameView `json:"frame"`
		}{viewFrameStreamed(f, []string{"gone"}, big)}, big, func() any {
			return struct {
				Frame frameView `json:"frame"`
			}{viewFrame(f, []string{"gone"})}
		}); err != nil {
			t.Fatal(err)
		}
		if err := writeJSON(&want, struct {
			Frame frameView `json:"frame"`
		}{viewFrame(f, []string{"gone"})}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			i := 0
			for i < min(got.Len(), want.Len()) && got.Bytes()[i] == want.Bytes()[i] {
				i++
			}
			t.Fatalf("round %d: streamed JSON differs at byte %d of %d/%d: %q vs %q", round, i, got.Len(), want.Len(),
				got.Bytes()[max(0, i-20):min(got.Len(), i+20)], want.Bytes()[max(0, i-20):min(want.Len(), i+20)])
		}
	}
}

// TestClipIsJoinFields: clip reads only what it needs and says what the
// whole-string rule says.
func TestClipIsJoinFields(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 4))
	ref := func(s string, n int) string {
		s = strings.Join(strings.Fields(s), " ")
		if utf8.RuneCountInString(s) <= n {
			return s
		}
		r := []rune(s)
		return string(r[:n-1]) + "…"
	}
	pieces := []string{"a", "bc", " ", "\n", "\u00a0", "\u2028", "é", "✓", "\xff", "\xe2\x9c"}
	for range 5000 {
		var b strings.Builder
		for range rng.IntN(30) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s, n := b.String(), 1+rng.IntN(12)
		if got, want := clip(s, n), ref(s, n); got != want {
			t.Fatalf("clip(%q, %d) = %q, want %q", s, n, got, want)
		}
		if got, want := clipBytes([]byte(s), n), ref(s, n); got != want {
			t.Fatalf("clipBytes(%q, %d) = %q, want %q", s, n, got, want)
		}
	}
}
