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

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// TestSecretsScrubbedEverywhere runs actions whose exec echoes the
// action's redacted secrets in its error message and in its result, and
// whose result has a part named by RedactResult, long enough for a
// dictionary to be trained on the records; then it greps every file of the
// store, raw, and every log record decompressed, for the secrets. It also
// checks what each Do returns: exec's own result and error to the call
// that ran exec, the certificate's scrubbed result to every later one, in
// the same process and after a restart; and that the store verifies.
func TestSecretsScrubbedEverywhere(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	opts := &Options{NoSync: true, DictSamples: 24, SnapshotEvery: 4, CheckpointEvery: 8}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	secret := func(prefix string) string {
		var b [8]byte
		rand.Read(b[:])
		return prefix + hex.EncodeToString(b[:])
	}
	token := secret("tok-")
	quoted := `pa"ss\` + secret("word-") // echoed escaped inside JSON
	var sessions []string
	r, err := db.Run(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	action := func(i int) ledger.Action {
		return ledger.Action{Tool: "api.call",
			Args:   []byte(fmt.Sprintf(`{"n":%d,"token":%q,"password":%q}`, i, token, quoted)),
			Key:    fmt.Sprintf("call-%d", i),
			Redact: []string{"/token", "/password"}, RedactResult: []string{"/session"}}
	}
	const atoms = 60
	for i := 0; i < atoms; i++ {
		session := secret("sess-")
		sessions = append(sessions, session)
		a, err := r.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		act := action(i)
		// First attempt: the downstream refuses, quoting the token.
		_, err = a.Do(ctx, act, func(context.Context, string) ([]byte, error) {
			return nil, fmt.Errorf("401 for token %s and password %s", token, quoted)
		})
		if err == nil || !strings.Contains(err.Error(), token) {
			t.Fatalf("atom %d: the failing Do returned %v, want exec's own error", i, err)
		}
		// Second attempt: the result echoes the token and holds a session.
		want := fmt.Sprintf(`{"auth":"Bearer %s","password":%q,"session":%q,"n":%d}`, token, quoted, session, i)
		got, err := a.Do(ctx, act, func(context.Context, string) ([]byte, error) { return []byte(want), nil })
		if err != nil || string(got) != want {
			t.Fatalf("atom %d: Do = %q, %v; want exec's own result %q", i, got, err, want)
		}
		// A later Do of the same action gets the certificate's result.
		again, err := a.Do(ctx, act, func(context.Context, string) ([]byte, error) {
			t.Fatal("exec called for a certified action")
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		checkScrubbed(t, "a later Do", again, token, quoted, session)
		if !bytes.Contains(again, []byte(ledger.Redacted)) || !bytes.Contains(again, []byte(fmt.Sprintf(`"n":%d`, i))) {
			t.Fatalf("atom %d: later Do = %s, want the result with markers in place of the secrets", i, again)
		}
		if err := a.Commit(ctx, new(frame.Delta).Set("step", []byte(fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
		if i == atoms/3 {
			// The samples are in: wait for the dictionary, so that the
			// records from here on are compressed with it.
			if !db.dict.Started() {
				t.Fatal("dictionary training did not start")
			}
			db.dict.Wait()
		}
	}
	if db.Stats().Dictionary == 0 {
		t.Fatal("no dictionary was trained: the test needs records compressed with one")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// After a restart, the certified result is the scrubbed one.
	db, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	r, _ = db.Run(ctx, "r1")
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Do(ctx, action(3), func(context.Context, string) ([]byte, error) {
		t.Fatal("exec called for a certified action after a restart")
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkScrubbed(t, "Do after a restart", got, append([]string{token, quoted}, sessions...)...)
	if err := a.Fail(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(ctx, dir, &VerifyOptions{Deep: true})
	if err != nil || !rep.OK {
		t.Fatalf("verify: %v %+v", err, rep)
	}

	secrets := append([]string{token, quoted, strings.ReplaceAll(quoted, `"`, `\"`)}, sessions...)
	// Every file, raw.
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds the secret %q", p, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every record of the log, decompressed (with the trained dictionary).
	dicts := frame.NewDicts()
	if _, err := layout.LoadDicts(vfs.Default, dir, dicts); err != nil {
		t.Fatal(err)
	}
	comp := frame.NewCompressor(dicts)
	l, err := wal.Open(filepath.Join(dir, layout.WALDir), &wal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := record.NewCursor(l, func(seg uint64) string { return wal.SegmentName(seg) }, wal.Pos{}, &record.Decoder{Comp: comp, Ledger: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	records, dicted := 0, 0
	for c.Next() {
		r := c.Record()
		records++
		plain := r.Plain
		compressed := r.Body
		if r.Kind == record.KindAtom {
			if plain, err = comp.Decompress(nil, r.Body); err != nil {
				t.Fatal(err)
			}
		} else if r.Kind == record.KindIntent || r.Kind == record.KindCert {
			compressed = r.Raw[1:]
		}
		if compressed != nil {
			if _, dict, _ := frame.PeekCodec(compressed); dict != 0 {
				dicted++
			}
		}
		for _, s := range secrets {
			if bytes.Contains(r.Raw, []byte(s)) || bytes.Contains(plain, []byte(s)) {
				t.Fatalf("%s record at %v holds the secret %q", r.Kind, r.Pos, s)
			}
		}
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	if dicted == 0 {
		t.Fatalf("none of %d records was compressed with the dictionary", records)
	}
	// The frame files, decompressed.
	names, _ := filepath.Glob(filepath.Join(dir, layout.FramesDir, "*.frame"))
	for _, n := range names {
		b, _ := os.ReadFile(n)
		ff, err := layout.ParseFrameFile(n, b)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := comp.Decompress(nil, ff.Frame)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if bytes.Contains(raw, []byte(s)) {
				t.Errorf("frame file %s holds the secret %q", n, s)
			}
		}
	}
}

func checkScrubbed(t *testing.T, what string, b []byte, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if bytes.Contains(b, []byte(s)) {
			t.Fatalf("%s returned %s, which holds the secret %q", what, b, s)
		}
	}
}
