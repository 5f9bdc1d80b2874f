package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

// secret marks the agent data of the sealed-store tests: none of it may
// appear in any file of an encrypted store.
const secret = "SECRET-7c1e"

// sealedWorkload writes, to db, atoms with actions, a failed atom, an
// ended run and one left active, all of it holding secret.
func sealedWorkload(t testing.TB, db *DB) {
	t.Helper()
	ctx := context.Background()
	for _, id := range []string{"ended", "active"} {
		r, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			a, err := r.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			res, err := a.Do(ctx, ledger.Action{Tool: "tool-" + secret, Args: []byte(fmt.Sprintf(`{"q":"%s-%d"}`, secret, i))},
				func(context.Context, string) ([]byte, error) {
					return []byte(fmt.Sprintf(`"result %s %d"`, secret, i)), nil
				})
			if err != nil {
				t.Fatal(err)
			}
			d := new(frame.Delta).Set(fmt.Sprintf("key-%d", i), []byte(secret+" value")).
				ToolOutput(fmt.Sprint("call-", i), "tool", res)
			if err := a.Commit(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		a, err := r.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Fail(ctx, "reason "+secret); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := db.Run(ctx, "ended")
	if err := r.End(ctx, StatusCompleted, []byte("final "+secret)); err != nil {
		t.Fatal(err)
	}
}

// checkSealedState checks what sealedWorkload left, read back.
func checkSealedState(t testing.TB, db *DB) {
	t.Helper()
	ctx := context.Background()
	for _, id := range []string{"ended", "active"} {
		r, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		f, err := r.StateE()
		if err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
		for i := range 5 {
			if got := string(f.Memory[fmt.Sprintf("key-%d", i)]); got != secret+" value" {
				t.Fatalf("run %s key-%d = %q", id, i, got)
			}
		}
		if len(f.Messages) != 5 || !strings.Contains(f.Messages[4].Content, "result "+secret+" 4") {
			t.Fatalf("run %s: messages %+v", id, f.Messages)
		}
	}
}

// storeFiles returns every file of the store under dir, by name.
func storeFiles(t testing.TB, fs vfs.FS, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	var walk func(d string)
	walk = func(d string) {
		names, err := fs.List(d)
		if err != nil {
			return
		}
		for _, n := range names {
			p := fs.PathJoin(d, n)
			if st, err := fs.Stat(p); err == nil && st.IsDir() {
				walk(p)
				continue
			}
			b, err := layout.ReadFile(fs, p)
			if err != nil {
				t.Fatal(err)
			}
			out[p] = b
		}
	}
	walk(dir)
	return out
}

// TestSealedLog: an encrypted store's log holds none of the agent's data
// in the clear, and reads back whole after a restart.
func TestSealedLog(t *testing.T) {
	// The control: a plaintext store holds the secret in its log, so the
	// search below can find it.
	plain := vfs.NewMem()
	db, err := Open("p", &Options{FS: plain, NoSync: true, DictSamples: -1})
	if err != nil {
		t.Fatal(err)
	}
	sealedWorkload(t, db)
	crash(db)
	found := false
	for _, b := range storeFiles(t, plain, "p/wal") {
		found = found || bytes.Contains(b, []byte(secret))
	}
	if !found {
		t.Fatal("the plaintext control's log does not hold the secret: the search is blind")
	}

	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	db, err = Open("s", encOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	sealedWorkload(t, db)
	checkSealedState(t, db)
	// Crash-like: no Close, so the restart replays the log itself.
	crash(db)
	for name, b := range storeFiles(t, fs, "s/wal") {
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("%s holds the agent's data in the clear", name)
		}
	}
	db, err = Open("s", encOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	checkSealedState(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Close wrote the derived files: frame files, snapshots, the ledger's
	// table, INBOX, CHECKPOINT. None holds the agent's data in the clear.
	files := storeFiles(t, fs, "s")
	for _, want := range []string{"s/KEYS", "s/CHECKPOINT", "s/INBOX", "s/ledger-"} {
		found := false
		for name := range files {
			found = found || strings.HasPrefix(name, want)
		}
		if !found {
			t.Fatalf("no %s* among %d files: the check below would miss it", want, len(files))
		}
	}
	for name, b := range files {
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("%s holds the agent's data in the clear", name)
		}
	}
	db, err = Open("s", encOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	checkSealedState(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestVerifySealed: verify of an encrypted store without any key checks
// every link over the sealed bytes and says the payloads were not opened;
// with the keyring, Deep opens them and checks the rest. A byte changed in
// a sealed atom body is found either way.
func TestVerifySealed(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	db, err := Open("s", encOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	sealedWorkload(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	notOpened := func(rep *chain.Report) bool {
		for _, u := range rep.Unchecked {
			if strings.Contains(u, "no payload was opened") {
				return true
			}
		}
		return false
	}
	rep, err := Verify(ctx, "s", &VerifyOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Runs) != 2 || !notOpened(rep) {
		t.Fatalf("verify without keys: ok %v, %d runs, unchecked %q; failures %+v", rep.OK, len(rep.Runs), rep.Unchecked, rep.Failures)
	}
	for _, rr := range rep.Runs {
		if want := map[string]uint64{"ended": 6, "active": 5}[rr.RunID]; rr.LastSeq != want {
			t.Fatalf("run %s verified to seq %d", rr.RunID, rr.LastSeq)
		}
	}
	rep, err = Verify(ctx, "s", &VerifyOptions{FS: fs, Keyring: ring, Deep: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || notOpened(rep) {
		t.Fatalf("deep verify with the keyring: ok %v, unchecked %q, failures %+v", rep.OK, rep.Unchecked, rep.Failures)
	}
	if _, err := Verify(ctx, "s", &VerifyOptions{FS: fs, Keyring: testRing(t, "k2", "k2")}); !errors.Is(err, seal.ErrUnknownKey) {
		t.Fatalf("verify with a keyring lacking the key: %v, want ErrUnknownKey", err)
	}

	db, err = Open("s", encOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	r, err := db.Run(ctx, "active")
	if err != nil {
		t.Fatal(err)
	}
	// Atom 6: chained over its sealed body, then a byte of it changed:
	// found without any key (the link) and with the keyring (GCM).
	forgeSealedAtom(t, db, r, func(comp []byte) ([]byte, []byte) { return comp, nil }, true)
	crash(db)
	for _, o := range []*VerifyOptions{{FS: fs}, {FS: fs, Keyring: ring, Deep: true}} {
		rep, err := Verify(ctx, "s", o)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK || !failsAt(rep, "active", 6) {
			t.Fatalf("keyring %v: a changed sealed body: ok %v, failures %+v", o.Keyring != nil, rep.OK, rep.Failures)
		}
	}
}

// TestVerifySealedTail: an atom sealed and chained by a writer with the
// key, whose sealed digests do not match its actions' results: only a
// deep verify with the keyring can find it, and does.
func TestVerifySealedTail(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	db, err := Open("s", encOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	sealedWorkload(t, db)
	r, err := db.Run(ctx, "active")
	if err != nil {
		t.Fatal(err)
	}
	forgeSealedAtom(t, db, r, func(comp []byte) ([]byte, []byte) { return comp, make([]byte, 32) }, false)
	crash(db)
	rep, err := Verify(ctx, "s", &VerifyOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("verify without keys: the links are right, yet %+v", rep.Failures)
	}
	rep, err = Verify(ctx, "s", &VerifyOptions{FS: fs, Keyring: ring, Deep: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || !failsAt(rep, "active", 6) {
		t.Fatalf("deep verify: ok %v, failures %+v; want a failure at active seq 6", rep.OK, rep.Failures)
	}
}

// forgeSealedAtom appends the next atom of r, with no action and an empty
// delta, sealed with edit's compressed body and tail and chained over the
// sealed bytes; flip then changes a byte of the sealed body after the
// link was computed.
func forgeSealedAtom(t *testing.T, db *DB, r *Run, edit func(comp []byte) ([]byte, []byte), flip bool) {
	t.Helper()
	r.mu.Lock()
	seq, prev := r.mu.lastSeq+1, r.mu.head
	r.mu.Unlock()
	body := record.AppendAtomBody(nil, nil, frame.AppendDelta(nil, new(frame.Delta).Set("forged", []byte("x"))))
	comp, tail := edit(db.comp.Compress(nil, body, 0))
	sealed, err := db.sealer.SealAtomBody(nil, r.id, seq, comp, tail)
	if err != nil {
		t.Fatal(err)
	}
	head := db.hasher.Link(r.id, seq, prev, sealed)
	if flip {
		sealed[len(sealed)-20] ^= 1
	}
	pos, err := db.append(context.Background(), append(record.AppendAtomHeader(nil, r.id, seq, head), sealed...))
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.mu.lastSeq, r.mu.head = seq, head
	r.mu.book.Positions = append(r.mu.book.Positions, pos)
	r.mu.Unlock()
}

// failsAt reports whether rep has a failure of run at seq.
func failsAt(rep *chain.Report, run string, seq uint64) bool {
	for _, f := range rep.Failures {
		if f.RunID == run && f.Seq == seq {
			return true
		}
	}
	return false
}
