package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func TestScrubber(t *testing.T) {
	args := []byte(`{"token":"s3cr3t-tok","pin":98765,"q":"a\"b\\c-quoted","keep":"visible"}`)
	s, err := newScrubber(args, []string{"/token", "/pin", "/q", "/absent"}, []string{"/session", "/list/1"})
	if err != nil {
		t.Fatal(err)
	}
	texts := []struct{ in, want string }{
		{"401 for s3cr3t-tok", "401 for [redacted]"},
		{"pin 98765 refused", "pin [redacted] refused"},
		{`body {"q":"a\"b\\c-quoted"}`, `body {"q":"[redacted]"}`},
		{"nothing secret, visible", "nothing secret, visible"},
	}
	for _, c := range texts {
		if got := s.text(c.in); got != c.want {
			t.Errorf("text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	results := []struct{ in, want string }{
		{`{"ok":true}`, `{"ok":true}`}, // nothing to scrub, RedactResult names nothing: kept as is
		{`{"session":"abc","n":1}`, `{"n":1,"session":"[redacted]"}`},
		{`{"list":[1,2,3],"auth":"Bearer s3cr3t-tok"}`, `{"auth":"Bearer [redacted]","list":[1,"[redacted]",3]}`},
		{`{"pin":98765,"s3cr3t-tok":1}`, `{"[redacted]":1,"pin":"[redacted]"}`},
		{`plain text with s3cr3t-tok`, `"[redacted]"`}, // not JSON, and RedactResult needs JSON
	}
	for _, c := range results {
		if got := string(s.result([]byte(c.in))); got != c.want {
			t.Errorf("result(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	// Without RedactResult, a result that is not JSON is scrubbed in place.
	s2, _ := newScrubber(args, []string{"/token"}, nil)
	if got := string(s2.result([]byte("plain s3cr3t-tok text"))); got != "plain [redacted] text" {
		t.Errorf("plain result = %q", got)
	}
	if s3, err := newScrubber(args, nil, nil); s3 != nil || err != nil {
		t.Errorf("no pointers: %v, %v; want no scrubber", s3, err)
	}
	if _, err := newScrubber(args, nil, []string{"session"}); !errors.Is(err, ErrBadPointer) {
		t.Errorf("a malformed RedactResult pointer: %v", err)
	}
	var none *scrubber
	if none.text("x") != "x" || string(none.result([]byte("y"))) != "y" {
		t.Error("a nil scrubber changed its input")
	}
}

// TestRedactEscapedEchoes: a redacted secret that exec echoes in a JSON
// result or error as Go's json.Marshal writes it (<, > and & as \u003c,
// \u003e, \u0026) or as Python's json.dumps writes it (every non-ASCII
// character as \uXXXX, a surrogate pair past U+FFFF) is not stored in any
// form: it is found in the decoded value.
func TestRedactEscapedEchoes(t *testing.T) {
	const secret = "pä<ss>&wörd😀"
	goJSON, err := json.Marshal(map[string]any{"echo": "login " + secret, "ok": false})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(goJSON, []byte(`\u003css\u003e\u0026`)) {
		t.Fatalf("json.Marshal wrote %s: the test needs its escapes", goJSON)
	}
	// What Python's json.dumps({"echo": "login " + secret, "ok": False})
	// writes, byte for byte.
	pyJSON := []byte(`{"echo": "login p\u00e4<ss>&w\u00f6rd\ud83d\ude00", "ok": false}`)
	forms := [][]byte{
		[]byte(secret),
		[]byte(`p\u00e4<ss>&w\u00f6rd\ud83d\ude00`),
		[]byte(`pä\u003css\u003e\u0026wörd😀`),
		[]byte(`\u003css\u003e\u0026`),
		[]byte(`\u00e4<ss>&w\u00f6rd`),
	}
	cases := []struct {
		name string
		exec func(context.Context, string) ([]byte, error)
	}{
		{"go result", func(context.Context, string) ([]byte, error) { return goJSON, nil }},
		{"python result", func(context.Context, string) ([]byte, error) { return pyJSON, nil }},
		{"go error", func(context.Context, string) ([]byte, error) { return nil, errors.New(string(goJSON)) }},
		{"python error", func(context.Context, string) ([]byte, error) { return nil, errors.New(string(pyJSON)) }},
		{"go error quoting a body", func(context.Context, string) ([]byte, error) {
			return nil, fmt.Errorf(`it's 5" wide; HTTP 401: %s`, goJSON)
		}},
		{"python error quoting a body", func(context.Context, string) ([]byte, error) {
			return nil, fmt.Errorf(`HTTP 401 "denied": %s`, pyJSON)
		}},
	}
	args, err := json.Marshal(map[string]any{"user": "ops", "password": secret})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			j := newMemJournal()
			in, err := NewIntent(Action{Tool: "login", Args: args, Redact: []string{"/password"}}, "run", 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			New().Do(ctx, j, in, c.exec)
			records := j.records()
			if len(records) < 2 {
				t.Fatalf("%d records: no certificate", len(records))
			}
			for i, r := range records {
				for _, f := range forms {
					if bytes.Contains(r, f) {
						t.Fatalf("record %d holds %q: %q", i, f, r)
					}
				}
			}
			if !bytes.Contains(records[len(records)-1], []byte("login "+Redacted)) {
				t.Fatalf("the certificate lost the result's other text: %q", records[len(records)-1])
			}
		})
	}
}

// TestScrubSecretValues: a redacted object is found in a JSON result
// whatever spacing and key order its encoder used.
func TestScrubSecretValues(t *testing.T) {
	s, err := newScrubber([]byte(`{"cred":{"user":"ä","pin":1234}}`), []string{"/cred"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := string(s.result([]byte(`{"echo": {"pin": 1234, "user": "\u00e4"}, "n": 1}`)))
	if want := `{"echo":"[redacted]","n":1}`; got != want {
		t.Fatalf("result = %s, want %s", got, want)
	}
	if got := string(s.result([]byte(`{"n": 1}`))); got != `{"n": 1}` {
		t.Fatalf("a result without the secret was changed: %s", got)
	}
}
