package webview

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/offline"
)

// TestFold: what a page shows of a value, and what it says about the rest.
func TestFold(t *testing.T) {
	big := strings.Repeat("é", maxShown) // 2*maxShown bytes, cut mid-rune nowhere
	odd := "x" + big                     // cut at maxShown falls inside an é
	bin := append(bytes.Repeat([]byte{0xff, 0}, maxShown), 'z')
	for _, c := range []struct {
		name  string
		b     []byte
		whole int
		want  value
	}{
		{name: "empty", want: value{Empty: true}},
		{name: "cut to nothing by the reader", whole: 9, want: value{Size: 9, Cut: true}},
		{name: "short", b: []byte("a b"), want: value{Text: "a b", Size: 3}},
		{name: "json indented", b: []byte(`{"a":[1,2]}`), want: value{Text: "{\n  \"a\": [\n    1,\n    2\n  ]\n}", Size: 11, Long: true, Preview: `{ "a": [ 1, 2 ] }`}},
		{name: "not utf-8", b: []byte("a\xffb"), want: value{Text: base64.StdEncoding.EncodeToString([]byte("a\xffb")), Size: 3, Binary: true}},
		{name: "cut by the reader, json left as is", b: []byte(`{"a":1}`), whole: 100, want: value{Text: `{"a":1}`, Size: 100, Cut: true}},
		{name: "cut by the reader mid-rune", b: []byte("ab\xc3"), whole: 10, want: value{Text: "ab", Size: 10, Cut: true}},
		{name: "four lines", b: []byte("1\n2\n3\n4\n5"), want: value{Text: "1\n2\n3\n4\n5", Size: 9, Long: true, Preview: "1 2 3 4 5"}},
		{name: "cut at maxShown", b: []byte(big), want: value{Text: big[:maxShown], Size: 2 * maxShown, Long: true, Cut: true, Preview: strings.Repeat("é", preview-1) + "…"}},
		{name: "cut at maxShown mid-rune", b: []byte(odd), want: value{Text: odd[:maxShown-1], Size: len(odd), Long: true, Cut: true, Preview: "x" + strings.Repeat("é", preview-2) + "…"}},
		{name: "utf-8 past what is shown is not looked at", b: append([]byte(big), 0xff), want: value{Text: big[:maxShown], Size: 2*maxShown + 1, Long: true, Cut: true, Preview: strings.Repeat("é", preview-1) + "…"}},
		{name: "binary cut at maxShown", b: bin, want: value{Text: base64.StdEncoding.EncodeToString(bin[:maxShown]), Size: len(bin), Long: true, Cut: true, Binary: true,
			Preview: base64.StdEncoding.EncodeToString(bin[:maxShown])[:preview-1] + "…"}},
	} {
		got := fold(c.b, c.whole)
		if got != c.want {
			t.Errorf("%s: fold =\n%+v\nwant\n%+v", c.name, abbrev(got), abbrev(c.want))
		}
		if !got.Binary && !utf8.ValidString(got.Text) {
			t.Errorf("%s: text is not UTF-8", c.name)
		}
		if len(got.Text) > 2*maxShown {
			t.Errorf("%s: %d bytes shown", c.name, len(got.Text))
		}
		if s := string(c.b); c.whole == 0 && foldString(s) != got {
			t.Errorf("%s: foldString differs from fold", c.name)
		}
	}
}

func abbrev(v value) value {
	for _, s := range []*string{&v.Text, &v.Preview} {
		if len(*s) > 60 {
			*s = (*s)[:60] + "..."
		}
	}
	return v
}

func TestRetryText(t *testing.T) {
	next := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		r    *offline.RetryInfo
		want string
	}{
		{nil, ""},
		{&offline.RetryInfo{Policy: ledger.RetryPolicy{MaxAttempts: 3}, Attempts: 1, NextAttempt: next}, "attempt 1 of 3, next not before 2026-12-06T12:00:00Z"},
		{&offline.RetryInfo{Policy: ledger.RetryPolicy{Deadline: time.Minute}, Attempts: 4, GaveUp: ledger.GaveUpDeadline}, "attempt 4, given up: deadline passed"},
	} {
		if got := retryText(c.r); got != c.want {
			t.Errorf("retryText(%+v) = %q, want %q", c.r, got, c.want)
		}
	}
}
