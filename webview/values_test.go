package webview

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
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

// TestClip: a name of the store as a page shows it: whole up to the
// bound, else cut where a rune starts and marked with its whole size.
func TestClip(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 4, ""},
		{"abcd", 4, "abcd"},
		{"abcde", 4, "abcd… (5 bytes)"},
		{"abcé", 4, "abc… (5 bytes)"},                      // é is 2 bytes: not cut in the middle
		{"ab€d", 4, "ab… (6 bytes)"},                       // € is 3 bytes
		{"\x80\x80\x80\x80\x80\x80", 4, "\x80… (6 bytes)"}, // no rune start: at most 3 bytes go back
		{"a\u202eb" + strings.Repeat("x", 300), maxName, "a\u202eb" + strings.Repeat("x", maxName-5) + "… (305 bytes)"},
	} {
		if got := clip(c.s, c.n); got != c.want {
			t.Errorf("clip(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
	huge := strings.Repeat("<", 8<<20)
	if got := clip(huge, maxName); len(got) > maxName+32 || !strings.HasSuffix(got, "… (8388608 bytes)") {
		t.Errorf("clip of 8 MiB: %d bytes, %q", len(got), got[len(got)-20:])
	}
}

// TestPageTooLarge: a page whose HTML would pass maxPage (values of 16
// KiB of quotes, six bytes each in HTML, on every op of every atom) is
// not sent; a short page says why.
func TestPageTooLarge(t *testing.T) {
	big := foldString(strings.Repeat(`"`, maxShown))
	d := &timelineData{}
	for seq := range uint64(atomsPerPage) {
		a := atomView{Seq: seq + 1}
		for range maxAtomOps {
			a.Ops = append(a.Ops, opView{Kind: "set", Fields: []field{{Name: "value", Value: big}}})
		}
		d.Atoms = append(d.Atoms, a)
	}
	v := &View{opts: Options{Log: slog.New(slog.DiscardHandler)}}
	p := &page{v: v, r: httptest.NewRequest("GET", "/run?id=x", nil), Prefix: "/", Title: "run x", Body: "timeline", Data: d,
		Run: &runHeader{runRow: runRow{ID: "x"}}}
	w := httptest.NewRecorder()
	p.render(w, 0)
	body := w.Body.String()
	if w.Code != http.StatusUnprocessableEntity || len(body) > 64<<10 || !strings.Contains(body, fmt.Sprintf("larger than %d MiB", maxPage>>20)) {
		t.Errorf("a page past %d bytes: %d, %d bytes: %.300s", maxPage, w.Code, len(body), body)
	}
}
