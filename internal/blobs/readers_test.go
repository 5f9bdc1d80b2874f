package blobs

import (
	"slices"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/blob"
)

// keySealer is a blob.Sealer known by its name; only its identity is used.
type keySealer struct{ blob.Sealer }

// lineageCore is an encrypted store's Core: each run's data keys and its
// parent, among the runs it holds.
type lineageCore struct {
	fakeCore
	keys    map[string][]blob.Sealer
	parents map[string]string // the held runs
}

func (c *lineageCore) Sealers(run string) ([]blob.Sealer, bool) { return c.keys[run], true }
func (c *lineageCore) Parent(run string) (string, bool) {
	p, ok := c.parents[run]
	return p, ok
}

// TestSealerReaders: a run's new blobs take its first key, and none left
// (erased) is an error; a blob it references may be under each of its
// keys, then its ancestors' up the held lineage (a cycle walked once); a
// plaintext store has the one nil sealer.
func TestSealerReaders(t *testing.T) {
	k := func() blob.Sealer { return &keySealer{} }
	a1, a2, b1, c1 := k(), k(), k(), k()
	c := &lineageCore{
		keys:    map[string][]blob.Sealer{"a": {a1, a2}, "b": {b1}, "c": {c1}, "x": {k()}},
		parents: map[string]string{"a": "", "b": "a", "c": "b", "loop1": "loop2", "loop2": "loop1"},
	}
	s := New(c, Config{})
	for _, tc := range []struct {
		run  string
		want []blob.Sealer
	}{
		{"a", []blob.Sealer{a1, a2}},
		{"c", []blob.Sealer{c1, b1, a1, a2}},
		{"x", c.keys["x"]}, // a run the store does not hold: its own keys only
		{"loop1", nil},
	} {
		if got := s.readers(tc.run); !slices.Equal(got, tc.want) {
			t.Errorf("readers(%q) = %v, want %v", tc.run, got, tc.want)
		}
	}
	if sl, err := s.sealer("a"); err != nil || sl != a1 {
		t.Errorf("sealer(a) = %v, %v; want its first key", sl, err)
	}
	if _, err := s.sealer("erased"); err == nil || !strings.Contains(err.Error(), `run "erased" has no data key`) {
		t.Errorf("sealer of a run without keys = %v", err)
	}
	plain := New(&fakeCore{}, Config{})
	if got := plain.readers("a"); len(got) != 1 || got[0] != nil {
		t.Errorf("plaintext readers = %v, want one nil sealer", got)
	}
	if sl, err := plain.sealer("a"); sl != nil || err != nil {
		t.Errorf("plaintext sealer = %v, %v", sl, err)
	}
}
