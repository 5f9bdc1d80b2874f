package ledger

import (
	"bytes"
	"testing"
)

// FuzzScrub: for any args, pointers and result, scrubbing never panics,
// and what it returns holds none of the secrets it collected.
func FuzzScrub(f *testing.F) {
	f.Add([]byte(`{"token":"s3cr3t","n":12345}`), "/token", "/session", []byte(`{"echo":"s3cr3t","session":"x"}`))
	f.Add([]byte(`{"a":["x\"y",{"b":"zz-top"}]}`), "/a/1/b", "", []byte(`zz-top plain`))
	f.Add([]byte(`[1,2,3]`), "/0", "/0", []byte(`[1, 2, 3]`))
	f.Fuzz(func(t *testing.T, args []byte, redact, redactResult string, result []byte) {
		if _, err := CanonicalArgs(args, []string{redact}); err != nil {
			return // NewIntent refuses these args
		}
		var rr []string
		if redactResult != "" {
			rr = []string{redactResult}
		}
		s, err := newScrubber(args, []string{redact}, rr)
		if err != nil || s == nil {
			return
		}
		out := s.result(result)
		msg := s.text(string(result))
		for _, sec := range s.secrets {
			if bytes.Contains(sec, []byte(Redacted)) || bytes.Contains([]byte(Redacted), sec) {
				continue // the marker itself holds the secret's text
			}
			if bytes.Contains(out, sec) {
				t.Fatalf("result %q scrubbed to %q still holds %q", result, out, sec)
			}
			if bytes.Contains([]byte(msg), sec) {
				t.Fatalf("text %q scrubbed to %q still holds %q", result, msg, sec)
			}
		}
	})
}
