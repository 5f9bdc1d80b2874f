package ledger

import (
	"errors"
	"strings"
	"testing"
)

func TestCanonicalArgs(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		redact []string
		want   string
	}{
		{"empty is null", "", nil, `null`},
		{"literals", ` [ true , false , null ] `, nil, `[true,false,null]`},
		{"key order", `{"b":1,"a":2,"aa":3,"A":4}`, nil, `{"A":4,"a":2,"aa":3,"b":1}`},
		{"key order is UTF-8 bytes", `{"\uffff":1,"😀":2,"é":3}`, nil, `{"é":3,"￿":1,"😀":2}`},
		{"nested order", `{"z":{"y":1,"x":[{"b":1,"a":2}]},"a":null}`, nil, `{"a":null,"z":{"x":[{"a":2,"b":1}],"y":1}}`},
		{"whitespace", "\t{ \"a\" :\r\n [ 1 ,2 ] }\n", nil, `{"a":[1,2]}`},
		{"empty containers", `{"a":{},"b":[]}`, nil, `{"a":{},"b":[]}`},
		{"int", `1`, nil, `1`},
		{"one point zero", `1.0`, nil, `1`},
		{"one e zero", `1e0`, nil, `1`},
		{"ten e minus one", `10e-1`, nil, `1`},
		{"upper E and plus", `1E+2`, nil, `100`},
		{"1e2", `1e2`, nil, `100`},
		{"minus zero", `-0`, nil, `0`},
		{"minus zero float", `-0.0e7`, nil, `0`},
		{"zero", `0.000`, nil, `0`},
		{"point one", `0.1`, nil, `0.1`},
		{"trailing zeros", `12.3400`, nil, `12.34`},
		{"negative", `-12.5`, nil, `-12.5`},
		{"small plain", `0.000015`, nil, `0.000015`},
		{"1e-6", `1e-6`, nil, `0.000001`},
		{"1e-7", `1e-7`, nil, `1e-7`},
		{"1.5e-7", `0.00000015`, nil, `1.5e-7`},
		{"1e20", `1e20`, nil, `100000000000000000000`},
		{"1e21", `1e21`, nil, `1e21`},
		{"big mantissa e21", `1.25e23`, nil, `1.25e23`},
		{"huge exponent", `-3e999999999`, nil, `-3e999999999`},
		{"huge negative exponent", `3e-999999999`, nil, `3e-999999999`},
		{"2^53+1 exact", `9007199254740993`, nil, `9007199254740993`},
		{"huge integer exact", `123456789012345678901234567890123456789`, nil, `123456789012345678901234567890123456789`},
		{"huge integer as float", `123456789012345678901234567890.000`, nil, `123456789012345678901234567890`},
		{"many digits fraction", `3.14159265358979323846264338327950288`, nil, `3.14159265358979323846264338327950288`},
		{"string plain", `"hello"`, nil, `"hello"`},
		{"escapes normalised", `"\u0041\/\"\\\b\f\n\r\t"`, nil, `"A/\"\\\b\f\n\r\t"`},
		{"control escapes lower hex", `"\u001F\u0000\u007f"`, nil, "\"\\u001f\\u0000\x7f\""},
		{"unicode unescaped", `"\u00e9\u4e2d"`, nil, `"é中"`},
		{"surrogate pair", `"\ud83d\ude00"`, nil, `"😀"`},
		{"raw utf8 kept", `"é😀"`, nil, `"é😀"`},
		{"line separator literal", `"\u2028"`, nil, "\"\u2028\""},
		{"escaped key", `{"a\u0062":1,"a":2}`, nil, `{"a":2,"ab":1}`},
		{"key needing escape", `{"a\"b\n":1}`, nil, `{"a\"b\n":1}`},
		{"redact top key", `{"a":1,"token":"s3cr3t"}`, []string{"/token"}, `{"a":1}`},
		{"redact nested", `{"auth":{"user":"u","pass":"p"},"x":1}`, []string{"/auth/pass"}, `{"auth":{"user":"u"},"x":1}`},
		{"redact array element", `{"a":[10,20,30]}`, []string{"/a/1"}, `{"a":[10,30]}`},
		{"redact elements by original index", `[0,1,2,3]`, []string{"/1", "/2"}, `[0,3]`},
		{"redact elements order independent", `[0,1,2,3]`, []string{"/2", "/1"}, `[0,3]`},
		{"redact inside array element", `[{"k":1,"s":2}]`, []string{"/0/s"}, `[{"k":1}]`},
		{"redact tilde1", `{"a/b":1,"c":2}`, []string{"/a~1b"}, `{"c":2}`},
		{"redact tilde0", `{"a~b":1,"c":2}`, []string{"/a~0b"}, `{"c":2}`},
		{"redact tilde01", `{"~1":1,"/":2}`, []string{"/~01"}, `{"/":2}`},
		{"redact escaped key", `{"s\u0065cret":1,"x":2}`, []string{"/secret"}, `{"x":2}`},
		{"redact empty key", `{"":1,"x":2}`, []string{"/"}, `{"x":2}`},
		{"redact missing is fine", `{"a":1}`, []string{"/b", "/a/b", "/a/0"}, `{"a":1}`},
		{"redact dash matches nothing", `[1,2]`, []string{"/-"}, `[1,2]`},
		{"redact leading zero index matches nothing", `[1,2]`, []string{"/01"}, `[1,2]`},
		{"redact out of range", `[1,2]`, []string{"/2", "/99999999999"}, `[1,2]`},
		{"redact whole document", `{"a":1}`, []string{""}, `null`},
		{"redact twice", `{"a":1,"b":2}`, []string{"/a", "/a"}, `{"b":2}`},
		{"redact parent and child", `{"a":{"b":1},"c":2}`, []string{"/a/b", "/a"}, `{"c":2}`},
		{"redact through scalar", `{"a":1}`, []string{"/a/b"}, `{"a":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CanonicalArgs([]byte(tc.in), tc.redact)
			if err != nil {
				t.Fatalf("CanonicalArgs(%q, %q): %v", tc.in, tc.redact, err)
			}
			if string(got) != tc.want {
				t.Fatalf("CanonicalArgs(%q, %q) = %s, want %s", tc.in, tc.redact, got, tc.want)
			}
			// Canonical form is a fixed point.
			again, err := CanonicalArgs(got, nil)
			if err != nil || string(again) != string(got) {
				t.Fatalf("not a fixed point: %s -> %s, %v", got, again, err)
			}
		})
	}
}

func TestCanonicalArgsErrors(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		redact []string
		want   error
		where  string // substring of the message, usually the offset
	}{
		{"whitespace only", "  ", nil, ErrInvalidArgs, "offset 2"},
		{"trailing garbage", `{} x`, nil, ErrInvalidArgs, "offset 3"},
		{"two values", `1 2`, nil, ErrInvalidArgs, "offset 2"},
		{"duplicate key", `{"a":1,"b":2,"a":3}`, nil, ErrInvalidArgs, "duplicate object key \"a\""},
		{"duplicate key after unescape", `{"a":1,"\u0061":2}`, nil, ErrInvalidArgs, "duplicate"},
		{"nested duplicate", `[{"x":{"k":1,"k":1}}]`, nil, ErrInvalidArgs, "offset 13"},
		{"invalid utf8", "\"a\xffb\"", nil, ErrInvalidArgs, "invalid UTF-8"},
		{"invalid utf8 key", "{\"\xc3\":1}", nil, ErrInvalidArgs, "offset 2"},
		{"overlong utf8", "\"\xc0\xaf\"", nil, ErrInvalidArgs, "invalid UTF-8"},
		{"lone high surrogate", `"\ud800"`, nil, ErrInvalidArgs, "high surrogate"},
		{"high then non-low", `"\ud800\u0041"`, nil, ErrInvalidArgs, "high surrogate"},
		{"lone low surrogate", `"\udc00"`, nil, ErrInvalidArgs, "low surrogate"},
		{"bad escape", `"\x"`, nil, ErrInvalidArgs, "bad escape"},
		{"short unicode escape", `"\u12"`, nil, ErrInvalidArgs, "four hex digits"},
		{"raw control char", "\"a\nb\"", nil, ErrInvalidArgs, "control character"},
		{"unterminated string", `"abc`, nil, ErrInvalidArgs, "unterminated"},
		{"unterminated object", `{"a":1`, nil, ErrInvalidArgs, "end of input"},
		{"unterminated array", `[1,`, nil, ErrInvalidArgs, "end of input"},
		{"trailing comma", `[1,]`, nil, ErrInvalidArgs, "offset 3"},
		{"object trailing comma", `{"a":1,}`, nil, ErrInvalidArgs, "offset 7"},
		{"missing colon", `{"a" 1}`, nil, ErrInvalidArgs, "expected ':'"},
		{"non-string key", `{1:2}`, nil, ErrInvalidArgs, "string key"},
		{"leading zero", `01`, nil, ErrInvalidArgs, "offset 1"},
		{"plus sign", `+1`, nil, ErrInvalidArgs, "offset 0"},
		{"bare minus", `-`, nil, ErrInvalidArgs, "expected a digit"},
		{"dot without digits", `1.`, nil, ErrInvalidArgs, "after '.'"},
		{"leading dot", `.5`, nil, ErrInvalidArgs, "offset 0"},
		{"exponent without digits", `1e+`, nil, ErrInvalidArgs, "exponent"},
		{"exponent too big", `1e1000000001`, nil, ErrInvalidArgs, "exponent beyond"},
		{"NaN", `NaN`, nil, ErrInvalidArgs, "offset 0"},
		{"single quotes", `{'a':1}`, nil, ErrInvalidArgs, "offset 1"},
		{"truncated literal", `tru`, nil, ErrInvalidArgs, "offset 0"},
		{"BOM", "\xef\xbb\xbf{}", nil, ErrInvalidArgs, "offset 0"},
		{"too deep", strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1), nil, ErrInvalidArgs, "nesting"},
		{"pointer without slash", `{"a":1}`, []string{"a"}, ErrBadPointer, "redact[0]"},
		{"pointer bad tilde", `{"a":1}`, []string{"/a", "/a~2"}, ErrBadPointer, "redact[1]"},
		{"pointer trailing tilde", `{"a":1}`, []string{"/a~"}, ErrBadPointer, "'~'"},
		{"pointer invalid utf8", `{"a":1}`, []string{"/\xff"}, ErrBadPointer, "UTF-8"},
		{"bad pointer beats bad json", `{`, []string{"x"}, ErrBadPointer, "redact[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CanonicalArgs([]byte(tc.in), tc.redact)
			if !errors.Is(err, tc.want) {
				t.Fatalf("CanonicalArgs(%q) = %q, %v; want error %v", tc.in, got, err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.where) {
				t.Fatalf("error %q does not mention %q", err, tc.where)
			}
		})
	}
}

// TestCanonicalDeepButAllowed checks the depth limit is exactly maxDepth.
func TestCanonicalDeepButAllowed(t *testing.T) {
	in := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	got, err := CanonicalArgs([]byte(in), nil)
	if err != nil || string(got) != in {
		t.Fatalf("depth %d: %v", maxDepth, err)
	}
}

// TestCanonicalEqualValues checks that equal documents written differently
// canonicalise to the same bytes and unequal ones do not.
func TestCanonicalEqualValues(t *testing.T) {
	groups := [][]string{
		{`{"a":1,"b":[1,2]}`, `{ "b" : [ 1.0, 2e0 ], "a" : 10E-1 }`, `{"b":[0.1e1,20e-1],"\u0061":1}`},
		{`"é"`, `"\u00e9"`, `"\u00E9"`},
		{`100`, `1e2`, `1E2`, `100.000`, `0.001e5`},
		{`9007199254740993`, `9007199254740993.0`, `9.007199254740993e15`},
	}
	seen := map[string]int{}
	for g, docs := range groups {
		var first string
		for i, d := range docs {
			c, err := CanonicalArgs([]byte(d), nil)
			if err != nil {
				t.Fatalf("%s: %v", d, err)
			}
			if i == 0 {
				first = string(c)
				if prev, ok := seen[first]; ok {
					t.Fatalf("groups %d and %d collide on %s", prev, g, first)
				}
				seen[first] = g
			} else if string(c) != first {
				t.Fatalf("%s -> %s, want %s (as %s)", d, c, first, docs[0])
			}
		}
	}
	// Integers around 2^53 must stay distinct (no float64 round trip).
	a, _ := CanonicalArgs([]byte(`9007199254740993`), nil)
	b, _ := CanonicalArgs([]byte(`9007199254740992`), nil)
	if string(a) == string(b) {
		t.Fatalf("2^53 and 2^53+1 canonicalise to the same %s", a)
	}
}
