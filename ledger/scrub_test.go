package ledger

import (
	"errors"
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
