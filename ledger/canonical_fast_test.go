package ledger

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestCanonicalFastPath: the fast path takes a document that is already
// canonical, every test case's canonical output among them, and leaves to
// the parser what is not (or what it does not check itself).
func TestCanonicalFastPath(t *testing.T) {
	yes := []string{
		`null`, `true`, `false`, `0`, `-1`, `100`, `0.1`, `1e21`, `-1.5e-7`, `""`, `"a"`,
		`[]`, `{}`, `[1,"a",null,{"a":[]}]`, `{"A":1,"a":2,"aa":3,"b":{"x":[true]}}`,
		`"\"\\\b\f\n\r\t\u0000\u001f"`, "\"\x7f é😀\u2028/\"", `{"é":3,"` + "\uffff" + `":1,"😀":2}`,
		strings.Repeat("[", fastMaxDepth) + strings.Repeat("]", fastMaxDepth),
		`123456789012345678901234567890123456789`,
	}
	no := []string{
		``, ` null`, `null `, `[1, 2]`, `{"a": 1}`, `{"b":1,"a":2}`, `{"a":1,"a":2}`,
		`1.0`, `1e0`, `-0`, `1E+2`, `0.000`, `100e-2`, `01`, `1.`, `.5`, `+1`,
		`"\/"`, `"\u0041"`, `"\u001F"`, `"\u000a"`, `"\u007f"`, `"\ud83d\ude00"`, `"\x"`,
		"\"\x01\"", "\"\xff\"", "\"\xed\xa0\x80\"", `"abc`, `[1,]`, `{"a":1,}`, `{"a"}`, `{"a":}`,
		`{"a\"b":1}`, `tru`, `nul`, `[1]x`, `{"a":1}}`,
		strings.Repeat("[", fastMaxDepth+1) + strings.Repeat("]", fastMaxDepth+1),
		strings.Repeat("1", fastMaxNumber+1),
	}
	for _, s := range yes {
		if !isCanonical([]byte(s)) {
			t.Errorf("isCanonical(%q) = false, want true", s)
		}
		checkFast(t, []byte(s))
	}
	for _, s := range no {
		if isCanonical([]byte(s)) {
			t.Errorf("isCanonical(%q) = true, want false", s)
		}
		checkFast(t, []byte(s))
	}
	// Canonical but for the order of the top-level members: the fast
	// path puts them in order; out of order below the top, or with equal
	// keys, the parser decides.
	reordered := []string{`{"b":1,"a":2}`, `{"z":{"a":[1]},"b":"x","a":null}`, `{"b":1,"a":2,"c":3,"aa":4}`}
	for _, s := range reordered {
		if _, ok := appendFast(nil, []byte(s)); !ok {
			t.Errorf("appendFast(%q) refuses it", s)
		}
		checkFast(t, []byte(s))
	}
	members := make([]string, fastMaxMembers+1)
	for i := range members {
		members[i] = fmt.Sprintf(`"k%02d":%d`, len(members)-i, i)
	}
	for _, s := range []string{`{"b":1,"a":2,"b":3}`, `{"b":{"d":1,"c":2},"a":2}`, `{"b":1 ,"a":2}`, `{"b":1,"a":2} `,
		"{" + strings.Join(members, ",") + "}"} {
		if _, ok := appendFast(nil, []byte(s)); ok {
			t.Errorf("appendFast(%q) takes it", s)
		}
		checkFast(t, []byte(s))
	}
}

// checkFast holds the fast path to the parser on in: a document it takes
// is one the parser accepts and writes back byte for byte; and the
// parser's canonical output of a short document without escapes is one
// the fast path takes (short: no deeper nor longer number than it
// follows).
func checkFast(t *testing.T, in []byte) {
	t.Helper()
	if len(in) == 0 { // null, before either path
		if isCanonical(in) {
			t.Fatal("the fast path takes empty args")
		}
		return
	}
	out, err := appendParsed(nil, in, nil)
	if isCanonical(in) && (err != nil || !bytes.Equal(out, in)) {
		t.Fatalf("the fast path takes %q as canonical; the parser gives %q, %v", in, out, err)
	}
	if fast, ok := appendFast([]byte("x"), in); ok && (err != nil || !bytes.Equal(fast[1:], out) || fast[0] != 'x') {
		t.Fatalf("the fast path gives %q for %q; the parser %q, %v", fast, in, out, err)
	} else if !ok && len(fast) != 1 {
		t.Fatalf("the fast path refuses %q but appended %q", in, fast)
	}
	if err == nil && len(out) <= 32 && bytes.IndexByte(out, '\\') < 0 && !isCanonical(out) {
		t.Fatalf("the fast path refuses the parser's canonical output %q (of %q)", out, in)
	}
	if got, gerr := CanonicalArgs(in, nil); (gerr == nil) != (err == nil) || !bytes.Equal(got, out) {
		t.Fatalf("CanonicalArgs(%q) = %q, %v; the parser: %q, %v", in, got, gerr, out, err)
	}
}

// FuzzCanonicalFastPath: on any input, what the fast path takes the parser
// writes as the fast path does, and CanonicalArgs answers as the parser
// does.
func FuzzCanonicalFastPath(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x\n"],"b":{"c":null}}`, `{"b":1,"a":2}`, `"\u001f"`, `1e21`, `[[[]]]`, `{"é":"😀"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkFast(t, in) })
}

// BenchmarkCanonicalArgs: an agent's tool arguments (internal/workload's
// shape: compact, keys in the model's order; then the same sorted) through
// CanonicalArgs, and through the parser alone (appendParsed, with the
// allocation CanonicalArgs makes: what CanonicalArgs was without the fast
// path). With -count, the two alternate.
//
//	go test -run '^$' -bench CanonicalArgs -count 5 ./ledger
func BenchmarkCanonicalArgs(b *testing.B) {
	const model = `{"action":"archive","service":"api-gateway","region":"us-east-1","recipient_0":"bob@example.com","reason_1":"Step 221: disable the report, then upload the auth webhook.","description_2":"The migration 20260278_drop_legacy_sessions added an index on subscription_id and it took 114 ms.","replicas_3":1942,"tags_4":["qa","read-only"]}`
	sorted, err := appendParsed(nil, []byte(model), nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		in   []byte
	}{{"model-order", []byte(model)}, {"sorted", sorted}} {
		b.Run(c.name+"/parser", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := appendParsed(make([]byte, 0, len(c.in)+len(c.in)/8+8), c.in, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/CanonicalArgs", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := CanonicalArgs(c.in, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
