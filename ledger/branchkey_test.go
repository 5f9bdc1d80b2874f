package ledger

import (
	"fmt"
	"testing"
)

// TestBranchKey: branch keys are deterministic, distinct across (run,
// branch, index) however the names are made to look like one another, and
// never equal a DefaultKey.
func TestBranchKey(t *testing.T) {
	if got, want := BranchKey("run-1", "fetch", 3), "ck1b-5:run-1:5:fetch:3"; got != want {
		t.Fatalf("BranchKey = %q, want %q", got, want)
	}
	keys := map[string]string{}
	names := []string{"", "a", "a:1", "1:a", "ck1b-1:a", "a:1:b", ":", "::", "1"}
	for _, r := range names {
		for seq := uint64(0); seq < 4; seq++ {
			for idx := range 4 {
				keys[DefaultKey(r, seq, idx)] = fmt.Sprintf("default %q/%d/%d", r, seq, idx)
			}
		}
	}
	for _, r := range names {
		for _, b := range names {
			for idx := range 6 {
				k := BranchKey(r, b, idx)
				id := fmt.Sprintf("branch %q/%q/%d", r, b, idx)
				if prev, ok := keys[k]; ok {
					t.Fatalf("key collision %q: %s and %s", k, prev, id)
				}
				keys[k] = id
				if BranchKey(r, b, idx) != k {
					t.Fatalf("BranchKey not deterministic for %s", id)
				}
			}
		}
	}
}

// TestWithKey: an intent given another key is the intent NewIntent builds
// with that key.
func TestWithKey(t *testing.T) {
	a := Action{Tool: "pay", Args: []byte(`{"b": 1, "a": [2]}`)}
	in, err := NewIntent(a, "r", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	key := BranchKey("r", "pay-1", 2)
	got := in.WithKey(key, 2)
	a.Key = key
	want, err := NewIntent(a, "r", 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got.Fingerprint != want.Fingerprint || got.Key != key || got.Index != 2 || in.Key == key {
		t.Fatalf("WithKey = %+v, want %+v (and the original unchanged: %+v)", got, want, in)
	}
}
