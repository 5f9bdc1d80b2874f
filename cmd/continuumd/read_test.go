package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

// readBody decodes a GET .../read answer.
type readBody struct {
	Run      string            `json:"run"`
	Seq      uint64            `json:"seq"`
	Memory   map[string]string `json:"memory"`
	Mem64    map[string]string `json:"memory_base64"`
	Atoms    []json.RawMessage `json:"atoms"`
	NextFrom *uint64           `json:"next_from"`
}

func (ts *testServer) read(run, query string) readBody {
	ts.t.Helper()
	r := ts.must(200, "GET", "/v1/runs/"+run+"/read?"+query, nil)
	var b readBody
	if err := json.Unmarshal(r.raw, &b); err != nil {
		ts.t.Fatalf("read %s?%s: %v: %s", run, query, err, r)
	}
	return b
}

func TestReadChosenKeysAndAtoms(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	// seq 1: i/a, i/b, w/a/0; seq 2: i/c, deletes w/a/0, sets x; seq 3: sets w/c/0
	p, _ := ts.begin("r", nil)
	ts.commit(p, map[string]any{"op": "set", "key": "i/a", "value": "A"},
		map[string]any{"op": "set", "key": "i/b", "value": "B"},
		map[string]any{"op": "set", "key": "w/a/0", "value": "WA"})
	p, _ = ts.begin("r", nil)
	ts.commit(p, map[string]any{"op": "set", "key": "i/c", "value": "C"},
		map[string]any{"op": "delete", "key": "w/a/0"},
		map[string]any{"op": "set", "key": "x", "value": "X"})
	p, _ = ts.begin("r", nil)
	ts.commit(p, map[string]any{"op": "set", "key": "w/c/0", "value": "WC"},
		map[string]any{"op": "set", "key": "bin", "value_base64": "/w=="})

	cases := []struct {
		query string
		want  map[string]string
	}{
		{"key=i/b", map[string]string{"i/b": "B"}},
		{"key=i/b&key=missing&key=x", map[string]string{"i/b": "B", "x": "X"}},
		{"prefix=i/", map[string]string{"i/a": "A", "i/b": "B", "i/c": "C"}},
		{"prefix=w/&key=x", map[string]string{"w/c/0": "WC", "x": "X"}},
		{"seq=1&prefix=w/", map[string]string{"w/a/0": "WA"}},
		{"seq=1&key=x&prefix=i/", map[string]string{"i/a": "A", "i/b": "B"}},
		{"seq=0&prefix=", map[string]string{}},
		{"prefix=i/&prefix=i/a", map[string]string{"i/a": "A", "i/b": "B", "i/c": "C"}},
		{"key=" + url.QueryEscape("i/a"), map[string]string{"i/a": "A"}},
	}
	for _, c := range cases {
		b := ts.read("r", c.query)
		if b.Run != "r" || !reflect.DeepEqual(b.Memory, c.want) || b.Atoms != nil {
			t.Errorf("read ?%s: got run %q memory %v atoms %d, want memory %v", c.query, b.Run, b.Memory, len(b.Atoms), c.want)
		}
	}
	if b := ts.read("r", "key=bin"); len(b.Memory) != 0 || b.Mem64["bin"] != "/w==" {
		t.Errorf("a value that is not UTF-8: got %v / %v, want it in memory_base64", b.Memory, b.Mem64)
	}
	if b := ts.read("r", "seq=2"); b.Memory != nil || b.Seq != 2 {
		t.Errorf("no key, no prefix: got %+v, want no memory", b)
	}

	// the atoms of a range are GET .../atoms/{seq}'s answers, in order
	b := ts.read("r", "from=2&key=x")
	if b.Seq != 3 || len(b.Atoms) != 2 || b.Memory["x"] != "X" || b.NextFrom != nil {
		t.Fatalf("from=2: got %+v", b)
	}
	for i, raw := range b.Atoms {
		one := ts.must(200, "GET", fmt.Sprintf("/v1/runs/r/atoms/%d", i+2), nil)
		var x, y any
		if err := json.Unmarshal(raw, &x); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(one.raw, &y); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(x, y) {
			t.Errorf("atom %d: read answers %s, atoms/%d answers %s", i+2, raw, i+2, one.raw)
		}
	}
	if b := ts.read("r", "seq=1&from=1"); len(b.Atoms) != 1 || b.Seq != 1 {
		t.Errorf("seq=1&from=1: got %+v, want atom 1 alone", b)
	}

	for _, c := range []struct{ query, field string }{
		{"seq=x&key=a", "seq"}, {"seq=-1", "seq"}, {"from=0", "from"}, {"from=x", "from"},
		{"from=3&seq=2", "from"}, {"keys=a", "keys"},
	} {
		wantError(t, ts.do("GET", "/v1/runs/r/read?"+c.query, nil), 400, codeBadRequest, c.field)
	}
	wantError(t, ts.do("GET", "/v1/runs/r/read?seq=9&key=a", nil), 404, codeAtomNotFound, "seq")
	wantError(t, ts.do("GET", "/v1/runs/r/read?seq=9", nil), 404, codeAtomNotFound, "seq")
	wantError(t, ts.do("GET", "/v1/runs/nope/read?key=a", nil), 404, codeRunNotFound, "-")
	wantError(t, ts.do("POST", "/v1/runs/r/read", nil), 405, codeMethodNotAllowed, "-")
}

func TestReadPagesALongRange(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	n := maxReadAtoms + 3
	for i := 1; i <= n; i++ {
		p, _ := ts.begin("r", nil)
		ts.commit(p, map[string]any{"op": "set", "key": "k", "value": fmt.Sprint(i)})
	}
	b := ts.read("r", "from=1")
	if len(b.Atoms) != maxReadAtoms || b.NextFrom == nil || *b.NextFrom != uint64(maxReadAtoms+1) {
		t.Fatalf("from=1 over %d atoms: got %d atoms, next_from %v", n, len(b.Atoms), b.NextFrom)
	}
	b = ts.read("r", fmt.Sprintf("from=%d", *b.NextFrom))
	if len(b.Atoms) != 3 || b.NextFrom != nil {
		t.Fatalf("the last page: got %d atoms, next_from %v", len(b.Atoms), b.NextFrom)
	}
	var last struct {
		Seq   uint64           `json:"seq"`
		Delta []map[string]any `json:"delta"`
	}
	if err := json.Unmarshal(b.Atoms[2], &last); err != nil {
		t.Fatal(err)
	}
	if last.Seq != uint64(n) || len(last.Delta) != 1 || last.Delta[0]["value"] != fmt.Sprint(n) {
		t.Fatalf("the last atom: got %+v", last)
	}
}

// TestReadPagesLargeAtoms: a page stops once its atoms' JSON reaches
// maxReadBytes, whatever their number, so that one answer's memory is
// bounded; the pages together hold every atom once.
func TestReadPagesLargeAtoms(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	const size = 900 << 10
	n := maxReadBytes/size + 3
	for i := 1; i <= n; i++ {
		p, _ := ts.begin("r", nil)
		ts.commit(p, map[string]any{"op": "set", "key": "k", "value": fmt.Sprintf("%0*d", size, i)})
	}
	b := ts.read("r", "from=1")
	if len(b.Atoms) != maxReadBytes/size+1 || b.NextFrom == nil || *b.NextFrom != uint64(len(b.Atoms)+1) {
		t.Fatalf("from=1 over %d atoms of %d bytes: got %d atoms, next_from %v", n, size, len(b.Atoms), b.NextFrom)
	}
	got := len(b.Atoms)
	for b.NextFrom != nil {
		b = ts.read("r", fmt.Sprintf("from=%d", *b.NextFrom))
		got += len(b.Atoms)
	}
	if got != n {
		t.Fatalf("the pages hold %d atoms, the run %d", got, n)
	}
}

// TestHasPrefixIn: the prefix set tells the keys with one of the prefixes
// as trying each prefix does, on random keys and prefixes over a small
// alphabet (so that prefixes nest and repeat).
func TestHasPrefixIn(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	word := func(max int) string {
		b := make([]byte, rng.IntN(max+1))
		for i := range b {
			b[i] = "ab\xff"[rng.IntN(3)]
		}
		return string(b)
	}
	for range 2000 {
		ps := make([]string, 1+rng.IntN(6))
		for i := range ps {
			ps[i] = word(3)
		}
		set := prefixFree(ps)
		for range 20 {
			k := word(5)
			want := false
			for _, p := range ps {
				want = want || strings.HasPrefix(k, p)
			}
			if got := hasPrefixIn(set, k); got != want {
				t.Fatalf("prefixes %q (set %q), key %q: got %v, want %v", ps, set, k, got, want)
			}
		}
	}
}
