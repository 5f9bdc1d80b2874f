package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/limits"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/seal"
)

// blobBytes returns n bytes of text-like content (compressible, as tool
// outputs are) seeded by seed.
func blobBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 41))
	words := []string{"alpha ", "beta ", "gamma ", "delta ", "<div>", "</div>\n", "{\"k\":", "42}", "lorem ", "ipsum "}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		if rng.IntN(16) == 0 {
			fmt.Fprintf(&b, "%x ", rng.Uint64())
		}
	}
	return b.Bytes()[:n]
}

// readValue reads v of run r's state through OpenValue.
func readValue(t testing.TB, r *Run, v []byte) []byte {
	t.Helper()
	rc, err := r.OpenValue(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// blobFiles lists the committed blob files of store "s" on fs.
func blobFiles(t testing.TB, fs vfs.FS) []string {
	t.Helper()
	var names []string
	if err := blob.Open(fs, "s/blobs").Names(func(n string) error { names = append(names, n); return nil }); err != nil {
		t.Fatal(err)
	}
	return names
}

// walBytes is the size of store "s"'s log.
func walBytes(t testing.TB, fs vfs.FS) int64 {
	t.Helper()
	names, err := fs.List("s/wal")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, name := range names {
		if st, err := fs.Stat("s/wal/" + name); err == nil {
			n += st.Size()
		}
	}
	return n
}

func verifyDeep(t testing.TB, fs vfs.FS, ring seal.Keyring) {
	t.Helper()
	rep, err := Verify(context.Background(), "s", &VerifyOptions{FS: fs, Keyring: ring, Deep: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("deep verify: failures %+v", rep.Failures)
	}
}

// TestBlobValues: the values of a delta above the threshold go to blobs;
// the log holds their references; the state reads them back, also after
// a restart; a value at the threshold stays inline.
func TestBlobValues(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	opts := &Options{FS: fs, NoSync: true, DictSamples: -1, BlobThreshold: 4 << 10}
	db, err := Open("s", opts)
	if err != nil {
		t.Fatal(err)
	}
	big := blobBytes(1, 3<<20+7) // three chunks and a bit
	out := blobBytes(2, 300<<10)
	msg := blobBytes(3, 64<<10)
	part := blobBytes(4, 5<<10)
	small := blobBytes(5, 4<<10)
	r, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := new(frame.Delta).Set("page", big).Set("small", small).
		AddPending(frame.Pending{CallID: "c1", Tool: "fetch"}).ToolOutput("c1", "fetch", out).
		AppendMessage(frame.Message{Role: frame.RoleUser, Content: string(msg)}).
		AppendMessage(frame.Message{Role: frame.RoleUser,
			Parts: []frame.Part{{Kind: frame.PartText, Text: string(part)}, {Kind: frame.PartText, Text: "short"}}})
	if err := a.Commit(ctx, d); err != nil {
		t.Fatal(err)
	}
	if n := walBytes(t, fs); n > 64<<10 {
		t.Fatalf("the log is %d bytes after an atom whose large values went to blobs", n)
	}
	if got := len(blobFiles(t, fs)); got != 4 {
		t.Fatalf("%d blob files, want 4 (page, output, message, part)", got)
	}
	check := func(r *Run) {
		t.Helper()
		st := r.State()
		if _, ok := blob.ParseValueBytes(st.Memory["page"]); !ok {
			t.Fatalf("memory value page is %d bytes inline, want a reference", len(st.Memory["page"]))
		}
		if !bytes.Equal(st.Memory["small"], small) {
			t.Fatal("a value at the threshold did not stay inline")
		}
		if got := readValue(t, r, st.Memory["page"]); !bytes.Equal(got, big) {
			t.Fatalf("page read back %d bytes, want its %d", len(got), len(big))
		}
		if got := readValue(t, r, st.Memory["small"]); !bytes.Equal(got, small) {
			t.Fatal("OpenValue of an inline value")
		}
		var toolOut []byte
		for _, m := range st.Messages {
			if m.Role == frame.RoleTool {
				toolOut = []byte(m.Content)
			}
		}
		if got := readValue(t, r, toolOut); !bytes.Equal(got, out) {
			t.Fatalf("tool output read back %d bytes, want %d", len(got), len(out))
		}
		if len(st.Messages) != 3 {
			t.Fatalf("%d messages", len(st.Messages))
		}
		if got := readValue(t, r, []byte(st.Messages[1].Content)); !bytes.Equal(got, msg) {
			t.Fatal("message content read back wrong")
		}
		m := st.Messages[2]
		if got := readValue(t, r, []byte(m.Parts[0].Text)); !bytes.Equal(got, part) || m.Parts[1].Text != "short" {
			t.Fatal("message parts read back wrong")
		}
	}
	check(r)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open("s", opts)
	if err != nil {
		t.Fatal(err)
	}
	r, err = db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	check(r)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	verifyDeep(t, fs, nil)
}

// TestBlobDoAndPut: a result of Do above the threshold is certified as a
// reference, and Do returns the reference (the same after a restart);
// PutBlob streams a blob the atom then references; the same bytes in two
// runs are one file.
func TestBlobDoAndPut(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	opts := &Options{FS: fs, NoSync: true, DictSamples: -1, BlobThreshold: 1 << 10}
	db, err := Open("s", opts)
	if err != nil {
		t.Fatal(err)
	}
	result := blobBytes(7, 200<<10)
	calls := 0
	exec := func(context.Context, string) ([]byte, error) { calls++; return result, nil }
	act := ledger.Action{Tool: "fetch", Args: []byte(`{"url":"https://example.com"}`), Key: "fetch-1"}
	var refs []string
	for _, id := range []string{"r1", "r2"} {
		r, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res, err := a.Do(ctx, act, exec)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := blob.ParseValueBytes(res); !ok {
			t.Fatalf("Do returned %d bytes, want a reference value", len(res))
		}
		if got := readValue(t, r, res); !bytes.Equal(got, result) {
			t.Fatal("Do's result read back wrong")
		}
		// A stream of 2.5 MiB, the same in both runs.
		ref, err := a.PutBlob(ctx, "text/html", io.LimitReader(bytes.NewReader(blobBytes(8, 5<<20)), 5<<19))
		if err != nil {
			t.Fatal(err)
		}
		if ref.Size != 5<<19 || ref.Media != "text/html" || ref.Hash != blob.Hash(blobBytes(8, 5<<20)[:5<<19]) {
			t.Fatalf("PutBlob's ref %v", ref)
		}
		d := new(frame.Delta).AddPending(frame.Pending{CallID: "c", Tool: "fetch"}).ToolOutput("c", "fetch", res).
			Set("page", []byte(blob.Value(ref)))
		if err := a.Commit(ctx, d); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, string(r.State().Memory["page"]))
	}
	if calls != 1 {
		t.Fatalf("exec ran %d times for one key", calls)
	}
	if refs[0] != refs[1] {
		t.Fatal("the same blob in two runs has two references")
	}
	if got := len(blobFiles(t, fs)); got != 2 {
		t.Fatalf("%d blob files, want 2 (the result, the page), each stored once", got)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	verifyDeep(t, fs, nil)
}

// TestBlobEscape: a value that starts as a reference value does but names
// no blob of the run is stored as a blob of its bytes, so that it reads
// back as it was, with or without a threshold.
func TestBlobEscape(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	db, err := Open("s", &Options{FS: fs, NoSync: true, DictSamples: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	forged := blob.Value(blob.Ref{Size: 3, Media: "text/plain"})
	odd := blob.ValuePrefix + "not a reference"
	r, _ := db.Run(ctx, "r")
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("forged", []byte(forged)).Set("odd", []byte(odd))); err != nil {
		t.Fatal(err)
	}
	st := r.State()
	for k, want := range map[string]string{"forged": forged, "odd": odd} {
		if got := readValue(t, r, st.Memory[k]); string(got) != want {
			t.Fatalf("%s read back %q, want %q", k, got, want)
		}
	}
}

// TestBlobGC: a blob stays while a record of the log references it or an
// atom in flight wrote it, and the GC after the last reference's removal
// sweeps it, with a crash's temporary files.
func TestBlobGC(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	opts := &Options{FS: fs, NoSync: true, DictSamples: -1, BlobThreshold: 1 << 10, CompactDead: 0.01, SegmentSize: 1 << 20}
	db, err := Open("s", opts)
	if err != nil {
		t.Fatal(err)
	}
	shared, own := blobBytes(11, 100<<10), blobBytes(12, 100<<10)
	for _, id := range []string{"a", "b"} {
		r, _ := db.Run(ctx, id)
		at, err := r.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d := new(frame.Delta).Set("shared", shared)
		if id == "a" {
			d.Set("own", own)
		}
		if err := at.Commit(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	// An atom in flight holds a blob no record references yet.
	c, _ := db.Run(ctx, "c")
	inflight, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pending, err := inflight.PutBlob(ctx, "", bytes.NewReader(blobBytes(13, 50<<10)))
	if err != nil {
		t.Fatal(err)
	}
	// A crash's leftover: a temporary file.
	f, err := fs.Create("s/blobs/tmp-0123456789abcdef", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte("torn"))
	_ = f.Close()
	if got := len(blobFiles(t, fs)); got != 3 {
		t.Fatalf("%d blob files before GC, want 3", got)
	}
	if _, err := db.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(blobFiles(t, fs)); got != 3 {
		t.Fatalf("%d blob files after a GC with nothing dead, want 3", got)
	}
	if _, err := fs.Stat("s/blobs/tmp-0123456789abcdef"); err == nil {
		t.Fatal("GC left a crash's temporary blob file")
	}
	ra, _ := db.Run(ctx, "a")
	if err := ra.End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GC(ctx); err != nil {
		t.Fatal(err)
	}
	rb, _ := db.Run(ctx, "b")
	if got := readValue(t, rb, rb.State().Memory["shared"]); !bytes.Equal(got, shared) {
		t.Fatal("GC removed a blob run b references")
	}
	names := blobFiles(t, fs)
	if len(names) != 2 {
		t.Fatalf("%d blob files after deleting run a and GC, want 2 (shared, pending): %v", len(names), names)
	}
	if err := inflight.Commit(ctx, new(frame.Delta).Set("p", []byte(blob.Value(pending)))); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readValue(t, c, c.State().Memory["p"]); !bytes.Equal(got, blobBytes(13, 50<<10)) {
		t.Fatal("the blob of an atom in flight did not survive GC")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	verifyDeep(t, fs, nil)
}

// TestBlobSealed: in an encrypted store a run's blobs are sealed (no byte
// of the content, nor its plain hash, in any file name or file) and
// erasing the run makes them unreadable; the next GC removes them.
func TestBlobSealed(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	opts := encOpts(fs, ring)
	opts.BlobThreshold = 1 << 10
	db, err := Open("s", opts)
	if err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte(secret+" in a large value "), 4000)
	for _, id := range []string{"gone", "kept"} {
		r, _ := db.Run(ctx, id)
		a, err := r.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Commit(ctx, new(frame.Delta).Set("v", value)); err != nil {
			t.Fatal(err)
		}
	}
	names := blobFiles(t, fs)
	if len(names) != 2 {
		t.Fatalf("%d blob files, want one per run's key: %v", len(names), names)
	}
	plainName := blob.Name(blob.Hash(value), nil)
	for _, n := range names {
		if n == plainName {
			t.Fatal("a sealed blob is named by its plain hash")
		}
		b := readFile(t, fs, "s/blobs/"+n)
		if bytes.Contains(b, []byte(secret)) {
			t.Fatal("a sealed blob holds its content in the clear")
		}
	}
	gone, _ := db.Run(ctx, "gone")
	ref, _ := blob.ParseValueBytes(gone.State().Memory["v"])
	if got := readValue(t, gone, gone.State().Memory["v"]); !bytes.Equal(got, value) {
		t.Fatal("a sealed blob read back wrong")
	}
	if err := gone.End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Erase(ctx, "gone", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.OpenBlob(ctx, "gone", ref); err == nil {
		t.Fatal("an erased run's blob opened")
	}
	kept, _ := db.Run(ctx, "kept")
	if _, err := db.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(blobFiles(t, fs)); got != 1 {
		t.Fatalf("%d blob files after erasing a run and GC, want 1", got)
	}
	if got := readValue(t, kept, kept.State().Memory["v"]); !bytes.Equal(got, value) {
		t.Fatal("the other run's blob read back wrong")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	verifyDeep(t, fs, ring)
	rep, err := Verify(ctx, "s", &VerifyOptions{FS: fs})
	if err != nil || !rep.OK || !slices.ContainsFunc(rep.Unchecked, func(u string) bool { return strings.Contains(u, "blobs") }) {
		t.Fatalf("verify without the keyring: %v, ok %v, unchecked %q", err, rep != nil && rep.OK, rep.Unchecked)
	}
}

func readFile(t testing.TB, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBlobTooLargeAdvice: the error of a frame grown too large says what
// to do.
func TestBlobTooLargeAdvice(t *testing.T) {
	err := limits.TooLarge(ErrTooLarge, "r", 3, "the frame after this delta", MaxSize+1)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "BlobThreshold") || !strings.Contains(err.Error(), "PutBlob") {
		t.Fatalf("error %q", err)
	}
}

// TestBlobFork: a fork reads the blobs its state took from its parent, in
// an encrypted store too (they are under the parent's key), and GC keeps
// them (a parent is deleted only with its forks).
func TestBlobFork(t *testing.T) {
	ctx := context.Background()
	for _, sealed := range []bool{false, true} {
		t.Run(fmt.Sprint("sealed=", sealed), func(t *testing.T) {
			fs := vfs.NewMem()
			var ring seal.Keyring
			opts := &Options{FS: fs, NoSync: true, DictSamples: -1}
			if sealed {
				ring = testRing(t, "k1", "k1")
				opts = encOpts(fs, ring)
			}
			opts.BlobThreshold = 1 << 10
			db, err := Open("s", opts)
			if err != nil {
				t.Fatal(err)
			}
			value := blobBytes(30, 200<<10)
			p, _ := db.Run(ctx, "parent")
			a, err := p.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Commit(ctx, new(frame.Delta).Set("v", value)); err != nil {
				t.Fatal(err)
			}
			f, err := db.Fork(ctx, "parent", 1, "fork")
			if err != nil {
				t.Fatal(err)
			}
			if got := readValue(t, f, f.State().Memory["v"]); !bytes.Equal(got, value) {
				t.Fatal("a fork read its parent's blob wrong")
			}
			if err := p.End(ctx, StatusCompleted, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Delete(ctx, "parent"); !errors.Is(err, ErrRunHasForks) {
				t.Fatalf("delete of a parent: %v", err)
			}
			if _, err := db.GC(ctx); err != nil {
				t.Fatal(err)
			}
			if got := readValue(t, f, f.State().Memory["v"]); !bytes.Equal(got, value) {
				t.Fatal("GC removed a blob a fork's state holds")
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			verifyDeep(t, fs, ring)
		})
	}
}

// TestBlobCopiedReference: a reference value copied into another run's
// delta stays a reference (no second copy of the blob) in a plaintext
// store, and keeps the blob alive once the run that wrote it is deleted
// and collected; Do's exec may stream its result with PutBlob and return
// the reference.
func TestBlobCopiedReference(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("s", &Options{FS: fs, NoSync: true, DictSamples: -1, BlobThreshold: 1 << 10, CompactDead: 0.01, SegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	value := blobBytes(100, 500<<10)
	a := mustRun(db, "a")
	at, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := at.Do(ctx, ledger.Action{Tool: "fetch", Args: []byte(`{}`)}, func(ctx context.Context, _ string) ([]byte, error) {
		ref, err := at.PutBlob(ctx, "text/plain", bytes.NewReader(value))
		return []byte(blob.Value(ref)), err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := at.Commit(ctx, new(frame.Delta).Set("v", res)); err != nil {
		t.Fatal(err)
	}
	if got := readValue(t, a, a.State().Memory["v"]); !bytes.Equal(got, value) {
		t.Fatal("Do's streamed result read back wrong")
	}
	b := mustRun(db, "b")
	bt, err := b.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := bt.Commit(ctx, new(frame.Delta).Set("copy", a.State().Memory["v"])); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.State().Memory["copy"], a.State().Memory["v"]) || len(blobFiles(t, fs)) != 1 {
		t.Fatalf("a copied reference: %d blob files, value %q", len(blobFiles(t, fs)), b.State().Memory["copy"])
	}
	if err := a.End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readValue(t, b, b.State().Memory["copy"]); !bytes.Equal(got, value) {
		t.Fatal("GC removed a blob that the copied reference holds")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	verifyDeep(t, fs, nil)
}
