package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGolden runs each read-only subcommand on the fixtures, in text and
// JSON, and compares its output with testdata/*.golden. It also checks
// that none of them changed a byte of the stores.
func TestGolden(t *testing.T) {
	clean, inflight := fixture(t, "clean"), fixture(t, "inflight")
	dirs := map[string]string{clean: "$CLEAN", inflight: "$INFLIGHT"}
	ids := map[string]string{storeID(t, clean): "<store-id>", storeID(t, inflight): "<store-id>"}
	before := map[string]map[string]string{clean: treeHash(t, clean), inflight: treeHash(t, inflight)}

	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"verify", []string{"verify", clean}, exitOK},
		{"verify_json", []string{"verify", "--json", clean}, exitOK},
		{"verify_strict", []string{"verify", clean, "--strict"}, exitCorrupt},
		{"verify_inflight", []string{"verify", inflight, "--json"}, exitOK},
		{"inspect", []string{"inspect", clean}, exitOK},
		{"inspect_json", []string{"inspect", clean, "--json"}, exitOK},
		{"inspect_inflight", []string{"inspect", inflight}, exitOK},
		{"inspect_run", []string{"inspect", inflight, "beta"}, exitOK},
		{"inspect_run_json", []string{"inspect", "--json", inflight, "beta"}, exitOK},
		{"inspect_atom", []string{"inspect", clean, "alpha", "--seq", "3"}, exitOK},
		{"inspect_atom_json", []string{"inspect", clean, "alpha", "--seq=3", "--json"}, exitOK},
		{"stats", []string{"stats", clean}, exitOK},
		{"stats_json", []string{"stats", "--json", clean}, exitOK},
		{"export", []string{"export", clean, "--run", "beta", "--from", "2", "--to", "3"}, exitOK},
		{"export_all", []string{"export", "--run=alpha", clean}, exitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, errOut)
			}
			if errOut != "" {
				t.Errorf("stderr: %s", errOut)
			}
			out = normalize(t, out, dirs)
			if strings.HasPrefix(tc.name, "stats") {
				// Pebble's files (snapshots/) vary with its background
				// work, and the sizes of log segment files (preallocation,
				// seals) are the log's business, not this command's.
				for _, re := range reFileSizes {
					out = re.ReplaceAllString(out, "${1}<size>")
				}
			}
			for id, mask := range ids {
				out = strings.ReplaceAll(out, id, mask)
			}
			golden(t, tc.name, out)
		})
	}
	for dir, h := range before {
		if diff := cmp.Diff(h, treeHash(t, dir)); diff != "" {
			t.Errorf("the commands changed the store %s (-before +after):\n%s", dirs[dir], diff)
		}
	}
}

var reFileSizes = []*regexp.Regexp{
	regexp.MustCompile(`((?:"snapshots"|"wal"|"total_bytes"|"segment_bytes"|files|snapshots  |wal  |\.wal) *:? *)[0-9][0-9.]*( [KMG]?i?B)?`),
	regexp.MustCompile(`(segments: [0-9]+, )[0-9.]+ [KMG]?i?B`),
	regexp.MustCompile(`("id": [0-9]+,\s+"bytes": )[0-9]+`),
}
