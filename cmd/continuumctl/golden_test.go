package main

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/google/go-cmp/cmp"
)

// TestGolden runs each read-only subcommand on the fixtures, in text and
// JSON, and compares its output with testdata/*.golden. It also checks
// that none of them changed a byte of the stores.
func TestGolden(t *testing.T) {
	clean, inflight, ended, forked := fixture(t, "clean"), fixture(t, "inflight"), fixture(t, "ended"), fixture(t, "forked")
	dirs := map[string]string{clean: "$CLEAN", inflight: "$INFLIGHT", ended: "$ENDED", forked: "$FORKED"}
	ids := map[string]string{}
	before := map[string]map[string]string{}
	for dir := range dirs {
		ids[storeID(t, dir)] = "<store-id>"
		before[dir] = treeHash(t, dir)
	}
	endedKey := publicKeyFile(t, ended, ed25519.NewKeyFromSeed(testSigningSeed).Public().(ed25519.PublicKey))
	// An end's link covers the time the run ended, so it changes from one
	// build of the fixture to the next: masked, whole and abbreviated.
	var endHeads []string // old, new, ...: the whole hash before its prefix
	for _, r := range runSummaries(t, ended) {
		if r.Status != "active" {
			h := r.EndHead.String()
			endHeads = append(endHeads, h, "<end-head "+r.ID+">", h[:16], "<end-head "+r.ID+">")
		}
	}
	maskEnds := strings.NewReplacer(endHeads...)

	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"verify", []string{"verify", clean}, cli.ExitOK},
		{"verify_json", []string{"verify", "--json", clean}, cli.ExitOK},
		{"verify_strict", []string{"verify", clean, "--strict"}, cli.ExitCorrupt},
		{"verify_inflight", []string{"verify", inflight, "--json"}, cli.ExitOK},
		{"inspect", []string{"inspect", clean}, cli.ExitOK},
		{"inspect_json", []string{"inspect", clean, "--json"}, cli.ExitOK},
		{"inspect_inflight", []string{"inspect", inflight}, cli.ExitOK},
		{"inspect_run", []string{"inspect", inflight, "beta"}, cli.ExitOK},
		{"inspect_run_json", []string{"inspect", "--json", inflight, "beta"}, cli.ExitOK},
		{"inspect_atom", []string{"inspect", clean, "alpha", "--seq", "3"}, cli.ExitOK},
		{"inspect_atom_json", []string{"inspect", clean, "alpha", "--seq=3", "--json"}, cli.ExitOK},
		{"stats", []string{"stats", clean}, cli.ExitOK},
		{"stats_json", []string{"stats", "--json", clean}, cli.ExitOK},
		{"export", []string{"export", clean, "--run", "beta", "--from", "2", "--to", "3"}, cli.ExitOK},
		{"export_all", []string{"export", "--run=alpha", clean}, cli.ExitOK},
		{"inspect_ended", []string{"inspect", ended}, cli.ExitOK},
		{"inspect_ended_json", []string{"inspect", "--json", ended}, cli.ExitOK},
		{"inspect_ended_run", []string{"inspect", ended, "alpha"}, cli.ExitOK},
		{"inspect_ended_run_json", []string{"inspect", "--json", ended, "gamma"}, cli.ExitOK},
		{"stats_ended", []string{"stats", ended}, cli.ExitOK},
		{"export_ended", []string{"export", ended, "--run", "alpha", "--from", "5"}, cli.ExitOK},
		{"verify_ended", []string{"verify", "--pubkey", endedKey, ended}, cli.ExitOK},
		{"inspect_forked", []string{"inspect", forked}, cli.ExitOK},
		{"inspect_forked_json", []string{"inspect", "--json", forked}, cli.ExitOK},
		{"inspect_fork_run", []string{"inspect", forked, "alpha-retry"}, cli.ExitOK},
		{"export_fork", []string{"export", forked, "--run", "alpha-retry"}, cli.ExitOK},
		{"verify_forked", []string{"verify", forked}, cli.ExitOK},
		{"diff_fork", []string{"diff", forked, "alpha", "last", "alpha-retry-2", "last"}, cli.ExitOK},
		{"diff_fork_json", []string{"diff", "--json", forked, "beta-copy", "last", "beta", "2"}, cli.ExitOK},
		{"diff", []string{"diff", clean, "alpha", "2", "4"}, cli.ExitOK},
		{"diff_json", []string{"diff", "--json", clean, "beta", "3", "last"}, cli.ExitOK},
		{"diff_reverse", []string{"diff", clean, "beta", "4", "beta", "2"}, cli.ExitOK},
		{"diff_empty", []string{"diff", clean, "alpha", "0", "0", "--json"}, cli.ExitOK},
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
				// The width of the snapshots/ line's size varies with it too.
				out = reSnapshotsPad.ReplaceAllString(out, "${1} <size>")
			}
			for id, mask := range ids {
				out = strings.ReplaceAll(out, id, mask)
			}
			golden(t, tc.name, maskEnds.Replace(out))
		})
	}
	for dir, h := range before {
		if diff := cmp.Diff(h, treeHash(t, dir)); diff != "" {
			t.Errorf("the commands changed the store %s (-before +after):\n%s", dirs[dir], diff)
		}
	}
}

var reSnapshotsPad = regexp.MustCompile(`(\n *snapshots) +<size>`)

var reFileSizes = []*regexp.Regexp{
	regexp.MustCompile(`((?:"snapshots"|"wal"|"total_bytes"|"segment_bytes"|files|snapshots  |wal  |\.wal) *:? *)[0-9][0-9.]*( [KMG]?i?B)?`),
	regexp.MustCompile(`(segments: [0-9]+, )[0-9.]+ [KMG]?i?B`),
	regexp.MustCompile(`("id": [0-9]+,\s+"bytes": )[0-9]+`),
}

var rePID = regexp.MustCompile(`process [0-9]+`)

// TestGoldenRunning: inspect on a store whose agent is running an action
// right now (its exec has not returned) shows the atom and the action as
// running, not as interrupted or in doubt; the same bytes with no live
// process are interrupted and in doubt (inspect_inflight.golden).
func TestGoldenRunning(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "running")
	outputs := map[string]string{}
	buildStore(t, dir, storeOptions(), func(dir string) {
		for name, args := range map[string][]string{
			"inspect_running":     {"inspect", dir},
			"inspect_running_run": {"inspect", dir, "beta"},
		} {
			code, out, errOut := runCLI(args...)
			if code != cli.ExitOK || errOut != "" {
				t.Errorf("%s: exit %d, stderr %s", name, code, errOut)
			}
			outputs[name] = out
		}
	})
	id := storeID(t, dir)
	for name, out := range outputs {
		out = normalize(t, out, map[string]string{dir: "$RUNNING"})
		out = strings.ReplaceAll(rePID.ReplaceAllString(out, "process <pid>"), id, "<store-id>")
		golden(t, name, out)
	}
}

// publicKeyFile writes pub as the public key file of the store in dir
// (named for its origin) and returns its path.
func publicKeyFile(t *testing.T, dir string, pub ed25519.PublicKey) string {
	t.Helper()
	b, err := chain.MarshalPublicKey(chain.OriginName(storeID(t, dir)), pub)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "store.pub")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// runSummaries returns the runs of the store in dir as Inspect sees them.
func runSummaries(t *testing.T, dir string) []engine.RunSummary {
	t.Helper()
	in, err := engine.Inspect(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	return in.Runs()
}
