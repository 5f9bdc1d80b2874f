package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/agenttext"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
)

// leakSecrets is the agent data of TestSealedStoreLeaksNothing: the
// secrets that recur in every record (the kind a dictionary keeps), and
// those of one atom each.
type leakSecrets struct {
	token, ssn, tool string   // in every atom of both runs
	perAtom          []string // memory values, messages, args, results, tool names, inbox payloads, fail reasons, end results
}

// leakWorkload writes atoms atoms to each of the runs a and b of db, each
// holding the secrets of s in its memory, its messages, its action's tool,
// args and result, and a message to the other run; then run a fails an
// atom and ends. It returns the secrets written.
func leakWorkload(t *testing.T, db *DB, s *leakSecrets, atoms int) {
	t.Helper()
	ctx := context.Background()
	nonce := func() string {
		var b [6]byte
		rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}
	secret := func(kind string) string {
		v := kind + "-" + nonce()
		s.perAtom = append(s.perAtom, v)
		return v
	}
	runs := map[string]*Run{}
	for _, id := range []string{"a", "b"} {
		r, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		runs[id] = r
	}
	for i := 0; i < atoms; i++ {
		for _, id := range []string{"a", "b"} {
			r := runs[id]
			a, err := r.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tool := secret("toolname")
			args := fmt.Sprintf(`{"authorization":"Bearer %s","ssn":%q,"query":%q}`, s.token, s.ssn, secret("argument"))
			result := fmt.Sprintf(`{"answer":%q,"ssn":%q}`, secret("toolresult"), s.ssn)
			for _, name := range []string{tool, s.tool} {
				if _, err := a.Do(ctx, ledger.Action{Tool: name, Args: []byte(args)},
					func(context.Context, string) ([]byte, error) { return []byte(result), nil }); err != nil {
					t.Fatal(err)
				}
			}
			other := "b"
			if id == "b" {
				other = "a"
			}
			// Never received: the messages wait in INBOX.
			if err := a.Send(ctx, other, []byte("inbox "+secret("inboxpayload")+" "+s.ssn)); err != nil {
				t.Fatal(err)
			}
			d := new(frame.Delta).
				Set("patient", []byte(secret("memoryvalue")+" ssn "+s.ssn)).
				Set(fmt.Sprint("note-", i%7), []byte("token "+s.token+" "+secret("memorynote"))).
				AppendMessage(frame.Message{Role: frame.RoleUser, Content: "user says " + secret("message") + " " + s.ssn}).
				ToolOutput(fmt.Sprint("call-", i), s.tool, []byte(secret("tooloutput")+" "+s.token))
			if err := a.Commit(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	a, err := runs["a"].Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(ctx, "failed: "+secret("failreason")); err != nil {
		t.Fatal(err)
	}
	if err := runs["a"].End(ctx, StatusCompleted, []byte(secret("endresult")+" "+s.ssn)); err != nil {
		t.Fatal(err)
	}
}

// searchTree returns, for each file under dir, which of secrets it holds
// byte for byte, and the names of every file.
func searchTree(t *testing.T, dir string, secrets []string) (found []string, files []string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, rel)
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				found = append(found, fmt.Sprintf("%s holds %q", rel, s))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found, files
}

// TestSealedStoreLeaksNothing: an encrypted store written past every
// threshold at which it writes a new kind of file (log segments, the
// dictionary threshold of 256 records, snapshots in Pebble, frame files,
// the ledger table, INBOX, CHECKPOINT, KEYS) holds none of the agent's
// data in the clear in any file, after Close and after the erasure of a
// run; a plaintext control with the same options holds it.
func TestSealedStoreLeaksNothing(t *testing.T) {
	const atoms = 150 // per run: 300 atoms, 600 actions, 300 messages
	s := &leakSecrets{token: "tok-" + strings.Repeat("9f", 10), ssn: "078-05-1120", tool: "payroll.lookup.secret"}
	opts := func(sealed bool) *Options {
		o := &Options{NoSync: true, SegmentSize: 256 << 10, SnapshotEvery: 10, Logger: quiet()}
		if sealed {
			o.Keyring = testRing(t, "k1", "k1")
		}
		return o
	}
	all := func() []string { return append([]string{s.token, s.ssn, s.tool}, s.perAtom...) }

	// The control: the same workload in a plaintext store holds them.
	plain := filepath.Join(t.TempDir(), "plain")
	db, err := Open(plain, opts(false))
	if err != nil {
		t.Fatal(err)
	}
	leakWorkload(t, db, s, atoms)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if found, _ := searchTree(t, plain, all()); len(found) == 0 {
		t.Fatal("the plaintext control holds no secret: the search is blind")
	}

	dir := filepath.Join(t.TempDir(), "sealed")
	s.perAtom = nil
	o := opts(true)
	db, err = Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	leakWorkload(t, db, s, atoms)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	found, files := searchTree(t, dir, all())
	// Every kind of file the store writes was written, so the search above
	// covered it.
	for _, want := range []string{layout.KeysName, layout.CheckpointName, layout.InboxName, "ledger-",
		layout.FramesDir + "/", layout.SnapshotsDir + "/", layout.WALDir + "/0000000000000002"} {
		ok := false
		for _, f := range files {
			ok = ok || strings.HasPrefix(filepath.ToSlash(f), want)
		}
		if !ok {
			t.Fatalf("no %s* among the files %v: the workload did not cross its threshold", want, files)
		}
	}
	if len(found) > 0 {
		t.Fatalf("after Close, %d secrets in the clear, the first: %s (files: %v)", len(found), found[0], files)
	}

	// Erasing run a leaves nothing of it, nor of b, in the clear either.
	db, err = Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Erase(context.Background(), "a", "test"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if found, files := searchTree(t, dir, all()); len(found) > 0 {
		t.Fatalf("after Erase, %d secrets in the clear, the first: %s (files: %v)", len(found), found[0], files)
	}
}

// BenchmarkDictCost measures what the dictionary saves on the log: the
// same agent workload (agenttext, seed 1: a message, a tool call with its
// args and result, a memory value per atom) in a plaintext store with and
// without a dictionary, and in an encrypted store, which trains none. It
// reports the log's bytes per atom of each.
func BenchmarkDictCost(b *testing.B) {
	const atoms = 2000
	for _, c := range []struct {
		name   string
		dict   int
		sealed bool
	}{{"plain-dict", 0, false}, {"plain-nodict", -1, false}, {"sealed", 0, true}} {
		b.Run(c.name, func(b *testing.B) {
			var perAtom float64
			for range b.N {
				dir := filepath.Join(b.TempDir(), "s")
				o := &Options{NoSync: true, DictSamples: c.dict, Logger: quiet()}
				if c.sealed {
					o.Keyring = testRing(b, "k1", "k1")
				}
				db, err := Open(dir, o)
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				g := agenttext.New(1)
				r, err := db.Run(ctx, "r")
				if err != nil {
					b.Fatal(err)
				}
				for i := range atoms {
					a, err := r.Begin(ctx)
					if err != nil {
						b.Fatal(err)
					}
					tool, args, res := g.Tool(), g.ToolArgs(150), g.ToolResult(600)
					if _, err := a.Do(ctx, ledger.Action{Tool: tool, Args: args},
						func(context.Context, string) ([]byte, error) { return res, nil }); err != nil {
						b.Fatal(err)
					}
					d := new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleUser, Content: g.Message(300)}).
						ToolOutput(fmt.Sprint("call-", i), tool, res).Set(fmt.Sprint("k", i%20), []byte(g.Sentence()))
					if err := a.Commit(ctx, d); err != nil {
						b.Fatal(err)
					}
				}
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				var n int64
				filepath.WalkDir(filepath.Join(dir, layout.WALDir), func(_ string, d fs.DirEntry, err error) error {
					if err == nil && !d.IsDir() {
						if fi, err := d.Info(); err == nil {
							n += fi.Size()
						}
					}
					return nil
				})
				perAtom = float64(n) / atoms
			}
			b.ReportMetric(perAtom, "log-bytes/atom")
		})
	}
}
