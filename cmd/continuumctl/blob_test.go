package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

// blobStore writes a store with one run whose memory value "page" went to
// a blob; it returns the store, the value's bytes and its Ref.
func blobStore(t *testing.T) (string, []byte, blob.Ref) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	opts := storeOptions()
	opts.SegmentSize = 0
	opts.BlobThreshold = 1 << 10
	db, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	page := bytes.Repeat([]byte("<p>a page of a web site</p>\n"), 100000) // 2.8 MB
	if err := a.Commit(ctx, new(frame.Delta).Set("page", page)); err != nil {
		t.Fatal(err)
	}
	ref, ok := blob.ParseValueBytes(r.State().Memory["page"])
	if !ok {
		t.Fatal("no reference in the state")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, page, ref
}

// TestBlobGet: blob get writes a blob's bytes, by either spelling of its
// reference; a damaged blob is exit 1 and a file left unwritten; verify
// names the run and seq; export shows the reference.
func TestBlobGet(t *testing.T) {
	dir, page, ref := blobStore(t)
	for _, spelling := range []string{ref.String(), blob.Value(ref), strings.TrimPrefix(blob.Value(ref), "\x00")} {
		code, out, errs := runCLI("blob", "get", dir, spelling)
		if code != 0 || out != string(page) {
			t.Fatalf("blob get %q: exit %d, %d bytes, stderr %s", spelling, code, len(out), errs)
		}
	}
	file := filepath.Join(t.TempDir(), "page.html")
	if code, _, errs := runCLI("blob", "get", dir, ref.String(), "--out", file); code != 0 {
		t.Fatalf("blob get --out: exit %d: %s", code, errs)
	}
	if b, err := os.ReadFile(file); err != nil || !bytes.Equal(b, page) {
		t.Fatalf("blob get --out wrote %d bytes (%v)", len(b), err)
	}
	if code, _, _ := runCLI("blob", "get", dir, "blake3t:zz/1"); code != cli.ExitUsage {
		t.Fatalf("a malformed reference: exit %d", code)
	}
	code, out, _ := runCLI("export", dir, "--run", "r")
	if code != 0 || !strings.Contains(out, "continuum-blob:") {
		t.Fatalf("export: exit %d, no reference in %.300s", code, out)
	}

	// Damage the blob's second chunk.
	name := filepath.Join(dir, blob.Dir, blob.Name(ref.Hash, nil))
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-200] ^= 1
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(t.TempDir(), "damaged.html")
	if code, _, errs := runCLI("blob", "get", dir, ref.String(), "--out", damaged); code != cli.ExitCorrupt || !strings.Contains(errs, "damaged") {
		t.Fatalf("blob get of a damaged blob: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(damaged); err == nil {
		t.Fatal("blob get left a file of a damaged blob")
	}
	code, out, _ = runCLI("verify", dir)
	if code != cli.ExitCorrupt || !strings.Contains(out, `"r"`) || !strings.Contains(out, "blob") {
		t.Fatalf("verify of a damaged blob: exit %d:\n%s", code, out)
	}
	t.Logf("verify:\n%s", out)
}
