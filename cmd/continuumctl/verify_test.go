package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
	"github.com/google/go-cmp/cmp"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func segPath(dir string, seg uint64) string {
	return filepath.Join(dir, "wal", fmt.Sprintf("%016x.wal", seg))
}

// findRecord returns the position and length of the record of kind for
// run and seq, from a read-only scan.
func findRecord(t *testing.T, dir, kind, run string, seq uint64) (wal.Pos, int) {
	t.Helper()
	var pos wal.Pos
	n := -1
	err := engine.Scan(context.Background(), dir, nil, func(r *engine.LogRecord) error {
		if r.Kind == kind && r.Run == run && r.Seq == seq {
			pos, n = r.Pos, r.Size
		}
		return nil
	})
	if err != nil || n < 0 {
		t.Fatalf("no %s record of run %s seq %d (%v)", kind, run, seq, err)
	}
	return pos, n
}

// editRecord changes the payload of the record at pos with edit and, if
// fixCRC, recomputes the log's checksum so that only the chain can tell.
func editRecord(t *testing.T, dir string, pos wal.Pos, fixCRC bool, edit func(payload []byte)) {
	t.Helper()
	name := segPath(dir, pos.Segment)
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	h := b[pos.Offset : pos.Offset+wal.RecordHeaderSize]
	n := int64(binary.LittleEndian.Uint32(h[4:8]))
	payload := b[pos.Offset+wal.RecordHeaderSize : pos.Offset+wal.RecordHeaderSize+n]
	edit(payload)
	if fixCRC {
		var seg [8]byte
		binary.LittleEndian.PutUint64(seg[:], pos.Segment)
		c := crc32.Update(0, castagnoli, seg[:])
		c = crc32.Update(c, castagnoli, h[4:16])
		c = crc32.Update(c, castagnoli, payload)
		binary.LittleEndian.PutUint32(h[0:4], c)
	}
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// verifyJSONOut runs verify --json and decodes its object.
func verifyJSONOut(t *testing.T, args ...string) (int, verifyJSON) {
	t.Helper()
	code, out, errOut := runCLI(append([]string{"verify", "--json"}, args...)...)
	var v verifyJSON
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("verify --json printed no object (%v); stdout %q stderr %q", err, out, errOut)
	}
	return code, v
}

func kinds(fs []chain.Failure) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Kind.String())
	}
	return out
}

// TestVerifyTampered damages copies of a clean store in several ways and
// checks that verify exits 1, names the kind in --json, and says in text
// which run, seq and file; and that verify did not change the damaged
// store either.
func TestVerifyTampered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		kind   string // expected among the failures
		run    string // expected run of that failure ("" for the store)
		seq    uint64
		where  string // expected in the failure's location
	}{
		{
			name: "atom edited in place, log checksum recomputed",
			damage: func(t *testing.T, dir string) {
				pos, _ := findRecord(t, dir, "atom", "alpha", 3)
				editRecord(t, dir, pos, true, func(p []byte) {
					// A byte of the compressed body's literal text, far
					// from the header: it still decompresses.
					p[len(p)-40] ^= 0x01
				})
			},
			kind: "hash-mismatch", run: "alpha", seq: 3, where: "wal 1:",
		},
		{
			name: "bit flip in an atom, log checksum left",
			damage: func(t *testing.T, dir string) {
				pos, _ := findRecord(t, dir, "atom", "beta", 2)
				editRecord(t, dir, pos, false, func(p []byte) { p[len(p)/2] ^= 0x10 })
			},
			kind: "corrupt", where: "wal",
		},
		{
			name: "sealed segment truncated in the middle of a record",
			damage: func(t *testing.T, dir string) {
				pos, n := findRecord(t, dir, "atom", "alpha", 3)
				if err := os.Truncate(segPath(dir, pos.Segment), pos.Offset+wal.RecordHeaderSize+int64(n)/2); err != nil {
					t.Fatal(err)
				}
			},
			kind: "corrupt", where: "wal",
		},
		{
			// Open does not read sealed segments; verify's scan must.
			name: "sealed segment's header damaged",
			damage: func(t *testing.T, dir string) {
				pos, _ := findRecord(t, dir, "atom", "alpha", 1)
				if _, err := os.Stat(segPath(dir, pos.Segment+1)); err != nil {
					t.Fatalf("segment %d is the newest, not sealed: %v", pos.Segment, err)
				}
				f, err := os.OpenFile(segPath(dir, pos.Segment), os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if _, err := f.WriteAt([]byte("XX"), 0); err != nil { // the magic
					t.Fatal(err)
				}
			},
			kind: "corrupt", where: "wal",
		},
		{
			name: "frame file given another head, checksum recomputed",
			damage: func(t *testing.T, dir string) {
				names, _ := filepath.Glob(filepath.Join(dir, "frames", "*.frame"))
				if len(names) == 0 {
					t.Fatal("no frame files")
				}
				slices.Sort(names)
				b, err := os.ReadFile(names[0])
				if err != nil {
					t.Fatal(err)
				}
				// magic 8 | version 2 | uvarint len | id | uvarint seq | head [32] ...
				idLen := int(b[10])
				off := 11 + idLen + 1
				b[off] ^= 0xff
				binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
				if err := os.WriteFile(names[0], b, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			kind: "checkpoint-mismatch", where: "frames",
		},
		{
			name: "CHECKPOINT edited",
			damage: func(t *testing.T, dir string) {
				name := filepath.Join(dir, "CHECKPOINT")
				b, err := os.ReadFile(name)
				if err != nil {
					t.Fatal(err)
				}
				b[len(b)/2] ^= 0x04
				if err := os.WriteFile(name, b, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			kind: "corrupt", where: "CHECKPOINT",
		},
		{
			name: "log cut off from the segment holding the last atom",
			damage: func(t *testing.T, dir string) {
				pos, _ := findRecord(t, dir, "atom", "beta", 4)
				names, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
				for _, n := range names {
					if n >= segPath(dir, pos.Segment) {
						if err := os.Remove(n); err != nil {
							t.Fatal(err)
						}
					}
				}
			},
			// The restart files name atoms the log no longer holds.
			kind: "corrupt", run: "beta", seq: 4, where: "frames",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyStore(t, "clean")
			tc.damage(t, dir)
			before := treeHash(t, dir)

			code, v := verifyJSONOut(t, dir)
			if code != cli.ExitCorrupt || v.OK {
				t.Fatalf("exit %d, ok %v; want exit 1. failures %+v", code, v.OK, v.Failures)
			}
			var hit *chain.Failure
			for i, f := range v.Failures {
				if f.Kind.String() == tc.kind && (tc.run == "" || f.RunID == tc.run) && (tc.seq == 0 || f.Seq == tc.seq) {
					hit = &v.Failures[i]
					break
				}
			}
			if hit == nil {
				t.Fatalf("failures %v (%+v), want %s in run %q seq %d", kinds(v.Failures), v.Failures, tc.kind, tc.run, tc.seq)
			}
			if !strings.Contains(hit.Location, tc.where) {
				t.Errorf("failure location %q, want it to name %q; all: %+v", hit.Location, tc.where, v.Failures)
			}
			if tc.kind == "hash-mismatch" && (hit.Expected.IsZero() || hit.Actual.IsZero() || hit.Expected == hit.Actual) {
				t.Errorf("hash mismatch without both hashes: %+v", hit)
			}

			code, out, _ := runCLI("verify", dir)
			if code != cli.ExitCorrupt {
				t.Errorf("text: exit %d, want 1", code)
			}
			for _, want := range []string{"TAMPERED OR CORRUPT", tc.kind, hit.Location} {
				if !strings.Contains(out, want) {
					t.Errorf("text output lacks %q:\n%s", want, out)
				}
			}
			if tc.run != "" && !strings.Contains(out, fmt.Sprintf("%s in run %q at seq %d", tc.kind, tc.run, tc.seq)) {
				t.Errorf("text output does not name run and seq:\n%s", out)
			}
			// The other commands read the damaged store without panicking
			// and say what they could not read.
			for _, args := range [][]string{{"inspect", dir}, {"inspect", dir, "alpha", "--seq", "3"}, {"stats", dir},
				{"export", dir, "--run", "beta"}} {
				code, _, errOut := runCLI(args...)
				if code != cli.ExitOK && (errOut == "" || code != cli.ExitCorrupt && code != cli.ExitUsage) {
					t.Errorf("%v: exit %d, stderr %q", args[0], code, errOut)
				}
				if tc.where == "CHECKPOINT" && (code != cli.ExitOK || !strings.Contains(errOut, "warning: snapshot and frame seqs unknown")) {
					t.Errorf("%v with a damaged CHECKPOINT: exit %d, stderr %q; want exit 0 and a warning", args, code, errOut)
				}
			}
			if diff := cmp.Diff(before, treeHash(t, dir)); diff != "" {
				t.Errorf("the commands changed the damaged store (-before +after):\n%s", diff)
			}
		})
	}
}

// TestVerifyState saves the state of a store, lets it grow, saves again,
// and checks that the older copy is reported as a rollback.
func TestVerifyState(t *testing.T) {
	old := copyStore(t, "clean")
	grown := copyStore(t, "clean")
	db, err := engine.Open(grown, storeOptions())
	if err != nil {
		t.Fatal(err)
	}
	run, err := db.Run(context.Background(), "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Step(context.Background(), run, testSeed, agent.NewWorld()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "trusted.json")

	code, v := verifyJSONOut(t, grown, "--save-state", state)
	if code != cli.ExitOK || v.StateSaved != state {
		t.Fatalf("save: exit %d, state_saved %q", code, v.StateSaved)
	}
	f, err := os.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	s, err := chain.ReadState(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if s.Runs["alpha"].Seq != 7 || s.Runs["beta"].Seq != 4 {
		t.Errorf("saved state %+v, want alpha at 7, beta at 4", s)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(state), ".*tmp*")); len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}

	if code, v := verifyJSONOut(t, grown, "--state", state); code != cli.ExitOK {
		t.Errorf("the saved store against its own state: exit %d, failures %+v", code, v.Failures)
	}
	code, v = verifyJSONOut(t, "--state", state, old)
	if code != cli.ExitCorrupt || !slices.Contains(kinds(v.Failures), "rollback") {
		t.Errorf("older copy: exit %d, failures %v; want exit 1 with a rollback", code, kinds(v.Failures))
	}
	// A failed store's state is not saved.
	other := filepath.Join(t.TempDir(), "not-saved.json")
	if code, _ := verifyJSONOut(t, old, "--state", state, "--save-state", other); code != cli.ExitCorrupt {
		t.Errorf("exit %d, want 1", code)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("state of a failed verification was saved: %v", err)
	}
}

func TestVerifyPublicKey(t *testing.T) {
	dir := fixture(t, "signed")
	keyFile := func(name string, pub ed25519.PublicKey) string {
		b, err := chain.MarshalPublicKey(name, pub)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "key.pub")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	id := storeID(t, dir)
	good := keyFile("continuum-"+id[:16], ed25519.NewKeyFromSeed(testSigningSeed).Public().(ed25519.PublicKey))
	code, v := verifyJSONOut(t, dir, "--pubkey", good, "--strict")
	if code != cli.ExitOK || v.CheckpointsVerified == 0 || len(v.Warnings) != 0 {
		t.Errorf("right key, --strict: exit %d, %d checkpoints verified, warnings %v, failures %v",
			code, v.CheckpointsVerified, kinds(v.Warnings), kinds(v.Failures))
	}
	other := keyFile("continuum-"+id[:16], ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey))
	code, v = verifyJSONOut(t, dir, "--pubkey", other)
	if code != cli.ExitCorrupt || !slices.Contains(kinds(v.Failures), "bad-signature") {
		t.Errorf("wrong key: exit %d, failures %v; want exit 1 with bad-signature", code, kinds(v.Failures))
	}
}

// TestVerifyPublicKeyUnsigned: a store whose writer never wrote a
// checkpoint (a forgery by someone without the signing key, reusing the
// real store's nonces) fails verify --pubkey, unless
// --allow-unsigned-tail covers every run's atoms; each run's line says how
// many atoms it has past its last signed checkpoint.
func TestVerifyPublicKeyUnsigned(t *testing.T) {
	dir := fixture(t, "inflight") // copied before any checkpoint was written
	b, err := chain.MarshalPublicKey("continuum-"+storeID(t, dir)[:16], ed25519.NewKeyFromSeed(testSigningSeed).Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "real.pub")
	if err := os.WriteFile(key, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, v := verifyJSONOut(t, dir, "--pubkey", key)
	if code != cli.ExitCorrupt || !slices.Equal(kinds(v.Failures), []string{"unsigned-tail", "unsigned-tail"}) {
		t.Errorf("no signed checkpoint: exit %d, failures %v; want exit 1 with unsigned-tail for both runs", code, kinds(v.Failures))
	}
	for _, r := range v.Runs {
		if r.UnsignedTail != r.LastSeq || r.SignedSeq != 0 {
			t.Errorf("run %q: unsigned tail %d past seq %d, want %d past 0", r.RunID, r.UnsignedTail, r.SignedSeq, r.LastSeq)
		}
	}
	if code, v := verifyJSONOut(t, dir, "--pubkey", key, "--allow-unsigned-tail", "5"); code != cli.ExitCorrupt ||
		!slices.Equal(kinds(v.Failures), []string{"unsigned-tail"}) {
		t.Errorf("5 atoms allowed, alpha has 6: exit %d, failures %v; want alpha's unsigned-tail", code, kinds(v.Failures))
	}
	if code, v := verifyJSONOut(t, dir, "--pubkey", key, "--allow-unsigned-tail", "6"); code != cli.ExitOK {
		t.Errorf("6 atoms allowed: exit %d, failures %v; want exit 0", code, kinds(v.Failures))
	}
	code, out, _ := runCLI("verify", "--pubkey", key, dir)
	if code != cli.ExitCorrupt || !strings.Contains(out, `run "alpha": FAILED after seq 6 (6 records, 6 atoms past its last signed checkpoint (seq 0))`) {
		t.Errorf("text output (exit %d) does not give alpha's unsigned atoms:\n%s", code, out)
	}
	if code, _, errOut := runCLI("verify", "--allow-unsigned-tail", "3", dir); code != cli.ExitUsage || !strings.Contains(errOut, "--pubkey") {
		t.Errorf("--allow-unsigned-tail without --pubkey: exit %d, %s", code, errOut)
	}
}

// TestExitCodes covers usage and I/O errors (exit 2), each with a message
// that names what is wrong.
func TestExitCodes(t *testing.T) {
	clean, forked := fixture(t, "clean"), fixture(t, "forked")
	tmp := t.TempDir()
	notStore := filepath.Join(tmp, "empty")
	if err := os.Mkdir(notStore, 0o755); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(tmp, "garbage")
	if err := os.WriteFile(garbage, []byte("not a key\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(tmp, "missing")
	badStore := copyStore(t, "clean")
	if err := os.WriteFile(filepath.Join(badStore, "STORE"), []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		msg  string // expected in stderr
	}{
		{nil, cli.ExitUsage, "Usage"},
		{[]string{"frobnicate"}, cli.ExitUsage, `unknown command "frobnicate"`},
		{[]string{"verify"}, cli.ExitUsage, "want one store directory"},
		{[]string{"verify", clean, clean}, cli.ExitUsage, "want one store directory"},
		{[]string{"verify", "--bogus", clean}, cli.ExitUsage, "bogus"},
		{[]string{"verify", missing}, cli.ExitUsage, missing},
		{[]string{"verify", notStore}, cli.ExitUsage, "not a CONTINUUM store"},
		{[]string{"verify", "--pubkey", missing, clean}, cli.ExitUsage, missing},
		{[]string{"verify", "--pubkey", garbage, clean}, cli.ExitUsage, garbage},
		{[]string{"verify", "--state", garbage, clean}, cli.ExitUsage, garbage},
		{[]string{"verify", clean, "--save-state", filepath.Join(missing, "s.json")}, cli.ExitUsage, missing},
		{[]string{"verify", badStore}, cli.ExitCorrupt, "STORE"},
		{[]string{"inspect", missing}, cli.ExitUsage, missing},
		{[]string{"inspect", notStore}, cli.ExitUsage, "not a CONTINUUM store"},
		{[]string{"inspect", badStore}, cli.ExitCorrupt, "STORE"},
		{[]string{"inspect", clean, "nope"}, cli.ExitUsage, `no run "nope"`},
		{[]string{"inspect", clean, "--seq", "2"}, cli.ExitUsage, "--seq needs a RUN"},
		{[]string{"inspect", clean, "alpha", "--seq", "99"}, cli.ExitUsage, "atoms 1..6, not 99"},
		{[]string{"inspect", clean, "alpha", "--seq", "x"}, cli.ExitUsage, "invalid value"},
		{[]string{"stats"}, cli.ExitUsage, "want one store directory"},
		{[]string{"stats", notStore}, cli.ExitUsage, "not a CONTINUUM store"},
		{[]string{"export", clean}, cli.ExitUsage, "--run is required"},
		{[]string{"export", clean, "--run", "nope"}, cli.ExitUsage, `no run "nope"`},
		{[]string{"export", clean, "--run", "alpha", "--from", "5", "--to", "2"}, cli.ExitUsage, "--from 5 is after --to 2"},
		{[]string{"inspect", forked, "alpha-retry", "--seq", "2"}, cli.ExitUsage, `seq 2 of run "alpha-retry" is its parent's: it was forked from run "alpha" at seq 3`},
		{[]string{"inspect", forked, "alpha-retry", "--seq", "6"}, cli.ExitUsage, `run "alpha-retry" has atoms 4..5 of its own, not 6`},
		{[]string{"inspect", forked, "beta-copy", "--seq", "5"}, cli.ExitUsage, `run "beta-copy" has no atom of its own, not 5`},
		{[]string{"diff", clean, "alpha", "1"}, cli.ExitUsage, "want DIR RUN A B or DIR RUN_A A RUN_B B, got 3 arguments"},
		{[]string{"diff", clean, "alpha", "1", "beta", "2", "3"}, cli.ExitUsage, "got 6 arguments"},
		{[]string{"diff", clean, "alpha", "1", "first"}, cli.ExitUsage, `seq "first" is not a number or "last"`},
		{[]string{"diff", clean, "alpha", "-1", "2"}, cli.ExitUsage, "-1"},
		{[]string{"diff", notStore, "alpha", "1", "2"}, cli.ExitUsage, "not a CONTINUUM store"},
		{[]string{"diff", clean, "nope", "1", "2"}, cli.ExitUsage, `no run "nope"`},
		{[]string{"diff", clean, "alpha", "1", "nope", "2"}, cli.ExitUsage, `no run "nope"`},
		{[]string{"diff", clean, "alpha", "1", "7"}, cli.ExitUsage, `run "alpha" has seqs 0..6, not 7`},
		{[]string{"diff", clean, "alpha", "last", "beta", "last"}, cli.ExitUsage, `run "alpha" (lineage of "alpha") and run "beta" (lineage of "beta") share no state`},
		// The demo moved to its own command: the old name says where, and
		// runs nothing (no store is made in --dir).
		{[]string{"demo"}, cli.ExitUsage, "go run ./cmd/continuumdemo"},
		{[]string{"demo", "--dir", filepath.Join(tmp, "demo")}, cli.ExitUsage, "a command of its own"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := runCLI(tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, errOut)
			}
			if !strings.Contains(errOut, tc.msg) {
				t.Errorf("stderr does not say %q:\n%s", tc.msg, errOut)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(tmp, "demo")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("continuumctl demo --dir made the directory (%v): it must run nothing", err)
	}
}

// TestLogDamageExits1: damage that stops the log from opening (a missing
// segment, a damaged header, a segment too short to hold one) is a
// corrupt store for inspect, stats, export and diff (exit 1, the segment named),
// as for verify, not an I/O error: the commands classify errors by the
// public engine.ErrCorrupt alone, which the log's damage matches.
func TestLogDamageExits1(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string) string // returns the file to be named
	}{
		{"segment missing between two", func(t *testing.T, dir string) string {
			if err := os.Remove(segPath(dir, 2)); err != nil {
				t.Fatal(err)
			}
			return segPath(dir, 2)
		}},
		{"newest segment's header damaged", func(t *testing.T, dir string) string {
			names, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
			slices.Sort(names)
			newest := names[len(names)-1]
			f, err := os.OpenFile(newest, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte("XX"), 0); err != nil { // the magic
				t.Fatal(err)
			}
			return newest
		}},
		{"sealed segment shorter than a header", func(t *testing.T, dir string) string {
			if err := os.Truncate(segPath(dir, 1), 10); err != nil {
				t.Fatal(err)
			}
			return segPath(dir, 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyStore(t, "clean")
			if _, err := os.Stat(segPath(dir, 3)); err != nil {
				t.Fatalf("the fixture has fewer than 3 segments: %v", err)
			}
			file := tc.damage(t, dir)
			for _, args := range [][]string{{"inspect", dir}, {"stats", dir}, {"export", dir, "--run", "beta"}, {"diff", dir, "beta", "0", "last"}, {"verify", dir}} {
				code, out, errOut := runCLI(args...)
				if code != cli.ExitCorrupt || !strings.Contains(out+errOut, file) {
					t.Errorf("%s: exit %d, want %d naming %s; stdout %q stderr %q", args[0], code, cli.ExitCorrupt, file, out, errOut)
				}
			}
		})
	}
}

// TestUnreadableStore: a store whose files cannot be read is an I/O
// error (exit 2), never reported as intact.
func TestUnreadableStore(t *testing.T) {
	t.Run("STORE is a directory", func(t *testing.T) {
		dir := copyStore(t, "clean")
		store := filepath.Join(dir, "STORE")
		if err := os.Remove(store); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(store, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"verify", "inspect", "stats"} {
			code, _, errOut := runCLI(cmd, dir)
			if code != cli.ExitUsage || !strings.Contains(errOut, store) {
				t.Errorf("%s: exit %d, want 2 with a message naming %s; stderr %s", cmd, code, store, errOut)
			}
		}
	})
	t.Run("segment without read permission", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads files whatever their mode")
		}
		dir := copyStore(t, "clean")
		seg := segPath(dir, 1)
		if err := os.Chmod(seg, 0); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(seg, 0o644)
		for _, cmd := range []string{"verify", "inspect", "stats"} {
			code, _, errOut := runCLI(cmd, dir)
			if code == cli.ExitOK {
				t.Errorf("%s of an unreadable store: exit 0; stderr %s", cmd, errOut)
			}
		}
	})
}

func TestHelp(t *testing.T) {
	for _, c := range commands() {
		if c.hidden {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(c.name, "--help")
			if code != cli.ExitOK {
				t.Errorf("exit %d, want 0", code)
			}
			if !strings.Contains(out+errOut, "Usage: continuumctl "+c.usage) {
				t.Errorf("help lacks the usage line:\n%s%s", out, errOut)
			}
		})
	}
	code, out, _ := runCLI("--help")
	if code != cli.ExitOK || !strings.Contains(out, "continuumctl verify") {
		t.Errorf("top-level help: exit %d\n%s", code, out)
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		json bool
		key  string
	}{
		{[]string{"--json", "DIR"}, []string{"DIR"}, true, ""},
		{[]string{"DIR", "--json"}, []string{"DIR"}, true, ""},
		{[]string{"DIR", "--pubkey", "k", "--json"}, []string{"DIR"}, true, "k"},
		{[]string{"--pubkey=k", "DIR", "RUN"}, []string{"DIR", "RUN"}, false, "k"},
		{[]string{"-json", "DIR", "--", "--pubkey"}, []string{"DIR", "--pubkey"}, true, ""},
		{[]string{"DIR", "-"}, []string{"DIR", "-"}, false, ""},
	} {
		fs := ctl.Flags("t", "t", "t", "", &strings.Builder{})
		asJSON := fs.Bool("json", false, "")
		key := fs.String("pubkey", "", "")
		pos, code, ok := cli.ParseFlags(fs, tc.args)
		if !ok {
			t.Errorf("%q: parse failed with exit %d", tc.args, code)
			continue
		}
		if !slices.Equal(pos, tc.pos) || *asJSON != tc.json || *key != tc.key {
			t.Errorf("%q: positional %q json %v key %q; want %q %v %q", tc.args, pos, *asJSON, *key, tc.pos, tc.json, tc.key)
		}
	}
}

// TestTornTailUntouched: a store whose log ends in an incomplete record (a
// torn write) verifies, stats reports the torn bytes, and neither trims
// them: the store stays byte-identical.
func TestTornTailUntouched(t *testing.T) {
	dir := copyStore(t, "clean")
	var last wal.Pos
	var size int
	if err := engine.Scan(context.Background(), dir, nil, func(r *engine.LogRecord) error {
		last, size = r.Pos, r.Size
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	name := segPath(dir, last.Segment)
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	end := (last.Offset + wal.RecordHeaderSize + int64(size) + wal.RecordAlign - 1) &^ (wal.RecordAlign - 1)
	// A record header that promises 64 bytes, followed by 20 of them: the
	// write was cut short. If the segment file ends at end, extend it.
	torn := make([]byte, wal.RecordHeaderSize+20)
	binary.LittleEndian.PutUint32(torn[0:4], 0xdeadbeef)
	binary.LittleEndian.PutUint32(torn[4:8], 64)
	torn[8] = 1
	for i := wal.RecordHeaderSize; i < len(torn); i++ {
		torn[i] = byte(i)
	}
	if need := end + int64(len(torn)); int64(len(b)) < need {
		b = append(b, make([]byte, need-int64(len(b)))...)
	}
	copy(b[end:], torn)
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	before := treeHash(t, dir)
	code, v := verifyJSONOut(t, dir)
	if code != cli.ExitOK {
		t.Errorf("verify of a torn tail: exit %d, failures %+v", code, v.Failures)
	}
	code, out, errOut := runCLI("stats", "--json", dir)
	if code != cli.ExitOK {
		t.Fatalf("stats: exit %d: %s", code, errOut)
	}
	var st statsView
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st.TornBytes == 0 {
		t.Errorf("stats reports no torn bytes")
	}
	if diff := cmp.Diff(before, treeHash(t, dir)); diff != "" {
		t.Errorf("verify or stats changed the store (-before +after):\n%s", diff)
	}
}

func TestProgressBar(t *testing.T) {
	var b strings.Builder
	p := progressBar(&b)
	p(10, progressMin-1) // a small store: no bar
	if b.Len() != 0 {
		t.Errorf("bar drawn for a small store: %q", b.String())
	}
	p(progressMin/2, progressMin)
	if got := b.String(); !strings.Contains(got, " 50% of 64.0 MiB") {
		t.Errorf("bar %q, want 50%% of 64.0 MiB", got)
	}
	p(progressMin, progressMin)
	if got := b.String(); !strings.Contains(got, "100%") {
		t.Errorf("bar %q does not reach 100%%", got)
	}
	p(-1, -1)
	if got := b.String(); !strings.HasSuffix(got, "\r") {
		t.Errorf("bar not cleared: %q", got)
	}
}

// TestVerifyChainKey: a keyed store verifies only with its key.
func TestVerifyChainKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keyed")
	key := bytes.Repeat([]byte{0x5a}, 32)
	opts := storeOptions()
	opts.ChainKey = key
	buildStore(t, dir, opts, nil)
	tmp := t.TempDir()
	hexKey := filepath.Join(tmp, "key.hex")
	rawKey := filepath.Join(tmp, "key.raw")
	badKey := filepath.Join(tmp, "key.bad")
	for name, b := range map[string][]byte{hexKey: []byte(hex.EncodeToString(key) + "\n"), rawKey: key, badKey: []byte("abc")} {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{hexKey, rawKey} {
		if code, v := verifyJSONOut(t, dir, "--chain-key", k); code != cli.ExitOK {
			t.Errorf("with the key in %s: exit %d, failures %v", k, code, kinds(v.Failures))
		}
	}
	if code, v := verifyJSONOut(t, dir); code != cli.ExitCorrupt || len(v.Failures) == 0 ||
		v.Failures[0].Kind != chain.KindKeyedChain || !strings.Contains(v.Failures[0].Detail, "this store is keyed; pass --chain-key") {
		t.Errorf("without the key: exit %d, failures %v; want exit 1, keyed-chain saying to pass --chain-key", code, v.Failures)
	}
	if code, _, errOut := runCLI("verify", "--chain-key", badKey, dir); code != cli.ExitUsage || !strings.Contains(errOut, badKey) {
		t.Errorf("bad key file: exit %d, stderr %s", code, errOut)
	}
}

// TestBesideRunningAgent: the read-only commands work while an agent has
// the store open (and holds its lock), and see its committed atoms.
func TestBesideRunningAgent(t *testing.T) {
	dir := copyStore(t, "clean")
	db, err := engine.Open(dir, storeOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := engine.Open(dir, storeOptions()); !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked (the test needs the lock held)", err)
	}
	run, err := db.Run(context.Background(), "beta")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Step(context.Background(), run, testSeed, agent.NewWorld()); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"verify", dir}, {"inspect", dir, "beta", "--seq", "5"}, {"stats", dir},
		{"export", dir, "--run", "beta", "--from", "5"}} {
		code, out, errOut := runCLI(args...)
		if code != cli.ExitOK {
			t.Errorf("%v beside a running agent: exit %d\n%s%s", args, code, out, errOut)
		}
	}
}

// TestVerifyPublicKeyNeverSigned: a store written without a signing key
// (its checkpoint records carry no signature) fails verify --pubkey with
// "NOT SIGNED", exit 3 (not 0, not "TAMPERED OR CORRUPT"), text and JSON,
// and no state is saved; the same store with a record changed is still
// TAMPERED OR CORRUPT, exit 1.
func TestVerifyPublicKeyNeverSigned(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	db, err := engine.Open(dir, storeOptions())
	if err != nil {
		t.Fatal(err)
	}
	r, _ := db.Run(ctx, "r")
	for range 3 {
		a, _ := r.Begin(ctx)
		if err := a.Commit(ctx, new(frame.Delta).Set("k", []byte("v"))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "agent.key")
	if code, _, errOut := runCLI("keygen", "--store", dir, "--out", key); code != cli.ExitOK {
		t.Fatalf("keygen: exit %d, %s", code, errOut)
	}
	state := filepath.Join(t.TempDir(), "state")
	code, out, errOut := runCLI("verify", dir, "--pubkey", key+".pub", "--save-state", state)
	if code != cli.ExitNotSigned || !strings.Contains(out, "result: NOT SIGNED") || strings.Contains(out, "TAMPERED") ||
		!strings.Contains(out, "never signed") {
		t.Fatalf("verify --pubkey of a store never signed: exit %d, %s %s", code, out, errOut)
	}
	if _, err := os.Stat(state); err == nil {
		t.Error("verify saved the state of a store that failed --pubkey")
	}
	code, v := verifyJSONOut(t, dir, "--pubkey", key+".pub")
	if code != cli.ExitNotSigned || v.OK || !v.NotSigned || len(v.Failures) != 0 {
		t.Fatalf("--json: exit %d, %+v", code, v)
	}
	if code, _ := verifyJSONOut(t, dir); code != cli.ExitOK {
		t.Fatalf("without --pubkey: exit %d", code)
	}

	// Tampered with as well: a frame file changed.
	frames, _ := filepath.Glob(filepath.Join(dir, layout.FramesDir, "*"))
	if len(frames) == 0 {
		t.Fatal("no frame file")
	}
	b, _ := os.ReadFile(frames[0])
	b[len(b)/2] ^= 1
	if err := os.WriteFile(frames[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI("verify", dir, "--deep", "--pubkey", key+".pub")
	if code != cli.ExitCorrupt || !strings.Contains(out, "TAMPERED OR CORRUPT") {
		t.Fatalf("verify --pubkey of a store never signed and damaged: exit %d, %s", code, out)
	}
}
