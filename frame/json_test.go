package frame

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/internal/agenttext"
)

var jsonCases = []string{
	``, ` `, `1`, ` 1 `, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-01`, `2.0e10`,
	`true`, `false`, `null`, `nul`, `nullx`, `truee`, `t`,
	`""`, `"a"`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9"`, `"\u00g9"`, `"\u12"`, `"\x"`, `"a` + "\t" + `b"`, "\"\x7f\"", "\"\xff\xfe\"", `"`, `"\`, `"\"`,
	`[]`, `[ ]`, `[1]`, `[1,]`, `[,1]`, `[1 2]`, `[1,[2,[3]]]`, `[`, `]`, `[[]`, `[]]`,
	`{}`, `{ }`, `{"a":1}`, `{"a" : 1 , "b":[true,null]}`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a":1 "b":2}`, `{,}`, `{"a":1}}`,
	"\ufeff{}", "{}\x00", "\n{\r\n\t}\n", `{"a":{"b":{"c":[1,2,{"d":"e"}]}}}`, `[1]x`, `1 2`,
}

func TestValidJSONCases(t *testing.T) {
	for _, s := range jsonCases {
		if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("validJSON(%q) = %v, encoding/json says %v", s, got, want)
		}
	}
	for _, depth := range []int{63, 64, 65, 9999, 10000, 10001} {
		for _, s := range []string{
			strings.Repeat("[", depth) + strings.Repeat("]", depth),
			strings.Repeat(`{"k":`, depth-1) + "{}" + strings.Repeat("}", depth-1),
			strings.Repeat("[", depth-1) + "{}" + strings.Repeat("]", depth-1),
		} {
			if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
				t.Errorf("depth %d: validJSON = %v, encoding/json says %v", depth, got, want)
			}
		}
	}
	// Strings of every length to 24 with a special byte (or a byte just
	// beside one in value) at every position: the eight-byte scan must find
	// each where a byte-by-byte scan would.
	for n := 0; n <= 24; n++ {
		for pos := 0; pos < n; pos++ {
			for _, c := range []byte{'"', '\\', 0x00, 0x1f, 0x20, 0x21, 0x5b, 0x5d, 0x7f, 0x80, 0xff, '\n'} {
				body := []byte(strings.Repeat("a", n))
				body[pos] = c
				for _, in := range [][]byte{
					append(append([]byte{'"'}, body...), '"'),
					append(append([]byte(`["`), body...), `\n"]`...),
				} {
					if got, want := validJSON(in), json.Valid(in); got != want {
						t.Fatalf("validJSON(%q) = %v, encoding/json says %v", in, got, want)
					}
				}
			}
		}
	}
	g := agenttext.New(testSeed(t))
	for i := 0; i < 200; i++ {
		for _, b := range [][]byte{g.ToolArgs(40 + i*10), g.ToolResult(60 + i*20)} {
			if !validJSON(b) {
				t.Fatalf("validJSON refuses %s", b)
			}
			if validJSON(b[:len(b)-1]) {
				t.Fatalf("validJSON accepts a truncated %s", b)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { validJSON([]byte(`{"a":[1,{"b":null}],"c":"d"}`)) }); n != 0 {
		t.Fatalf("validJSON allocates %.0f times", n)
	}
}

// FuzzValidJSON: validJSON and encoding/json.Valid agree on every input.
func FuzzValidJSON(f *testing.F) {
	for _, s := range jsonCases {
		f.Add([]byte(s))
	}
	g := agenttext.New(1)
	f.Add(g.ToolArgs(200))
	f.Add(g.ToolResult(300))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

// BenchmarkValidJSON: validJSON against encoding/json.Valid on tool
// arguments (short keys and values) and on a longer tool result.
func BenchmarkValidJSON(b *testing.B) {
	g := agenttext.New(1)
	for _, in := range []struct {
		name string
		b    []byte
	}{{"args", g.ToolArgs(120)}, {"result", g.ToolResult(2000)}} {
		for _, v := range []struct {
			name  string
			valid func([]byte) bool
		}{{"frame", validJSON}, {"encoding_json", json.Valid}} {
			b.Run(in.name+"/"+v.name, func(b *testing.B) {
				b.SetBytes(int64(len(in.b)))
				for b.Loop() {
					if !v.valid(in.b) {
						b.Fatal("invalid")
					}
				}
			})
		}
	}
}
