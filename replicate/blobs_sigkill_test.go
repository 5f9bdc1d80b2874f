package replicate

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

// The writer child of TestSIGKILLBlobs: it runs when the test binary is
// started with CONTINUUM_REPLICATE_BLOBCHILD set to the cluster's URLs,
// puts a blob in each atom of run "r" and commits its reference under
// "b<seq>", and reports every acknowledged atom after its Commit returned
// ("ack SEQ"), until it is killed.
func init() {
	urls := os.Getenv("CONTINUUM_REPLICATE_BLOBCHILD")
	if urls == "" {
		return
	}
	os.Exit(blobWriter(urls, os.Getenv("CONTINUUM_REPLICATE_DIR")))
}

// blobOf is the content of atom seq's blob: sizes of 0, 1, more than a
// chunk and a few KiB in turn, bytes drawn from seq.
func blobOf(seq uint64) []byte {
	sizes := []int{0, 1, blob.ChunkSize + 1000, 3000}
	b := make([]byte, sizes[seq%uint64(len(sizes))])
	rand.New(rand.NewSource(int64(seq))).Read(b)
	return b
}

func blobWriter(urls, dir string) int {
	fail := func(err error) int {
		fmt.Println("error", err)
		return 1
	}
	db, err := openChild(urls, dir, "kill9b")
	if err != nil {
		return fail(err)
	}
	run, err := db.Run(ctx, "r")
	if err != nil {
		return fail(err)
	}
	for {
		a, err := run.Begin(ctx)
		if err != nil {
			return fail(err)
		}
		ref, err := a.PutBlob(ctx, "", bytes.NewReader(blobOf(a.Seq())))
		if err != nil {
			return fail(err)
		}
		if err := a.Commit(ctx, new(frame.Delta).Set(fmt.Sprint("b", a.Seq()), []byte(blob.Value(ref)))); err != nil {
			return fail(err)
		}
		fmt.Println("ack", a.Seq())
	}
}

// TestSIGKILLBlobs: a child process puts and references blobs in a
// replicated store and is SIGKILLed mid-flight (between a blob's write and
// its shipping, in its shipping, or in a commit); a node that takes the
// store after its lease expired reads every blob of every atom the child
// had acknowledged, byte for byte, and verifies clean. The killed node's
// own copy, reopened, ships a blob it holds and the replica lacks (a
// crash's, never referenced) and verifies clean too.
func TestSIGKILLBlobs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	c := newCluster(t, true)
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	childDir := filepath.Join(t.TempDir(), "child")
	cmd.Env = append(os.Environ(), "CONTINUUM_REPLICATE_BLOBCHILD="+strings.Join(c.urls, ","),
		"CONTINUUM_REPLICATE_DIR="+childDir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed after a number of acknowledged atoms drawn from the seed, so
	// that the kill falls at another point of a put each run.
	seed := rand.Int63()
	t.Logf("seed %d", seed)
	after := 9 + rand.New(rand.NewSource(seed)).Intn(8)
	var acked uint64
	sc := bufio.NewScanner(stdout)
	for n := 0; n < after && sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || f[0] != "ack" {
			t.Fatalf("child: %s", sc.Text())
		}
		acked, _ = strconv.ParseUint(f[1], 10, 64)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "ack" {
			acked, _ = strconv.ParseUint(f[1], 10, 64)
		}
	}
	if acked == 0 {
		t.Fatal("the child acknowledged nothing")
	}
	check := func(db *engine.DB, who string) {
		t.Helper()
		run, err := db.Run(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		if run.LastSeq() < acked {
			t.Fatalf("%s: the child acknowledged %d atoms, the store has %d", who, acked, run.LastSeq())
		}
		want := map[string][]byte{}
		for seq := uint64(1); seq <= run.LastSeq(); seq++ {
			if _, ok := run.State().Memory[fmt.Sprint("b", seq)]; ok {
				want[fmt.Sprint("b", seq)] = blobOf(seq)
			} else if seq <= acked {
				t.Fatalf("%s: atom %d, acknowledged, references no blob", who, seq)
			}
		}
		checkBlobs(t, run, want)
	}
	rb, dbb, dirb := open(t, c, "kill9b", "b", 1, false)
	t.Logf("node b after the SIGKILL: %+v", rb.Restored())
	check(dbb, "node b")
	closeAndVerify(t, dbb, rb, dirb, "verify of node b's store")

	// The crash window made sure of: a blob durable in the killed node's
	// copy, never shipped (never referenced). Its reopen ships it.
	w, err := blob.Open(vfs.Default, filepath.Join(childDir, blob.Dir)).Create(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("durable here, killed before its shipping")); err != nil {
		t.Fatal(err)
	}
	orphan, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	rc, dbc := openAt(t, c, "kill9b", "child", 0, false, childDir)
	t.Logf("the killed node's copy: %+v", rc.Restored())
	check(dbc, "the killed node's copy")
	if _, err := rc.blobs.GetInfo(ctx, blob.Dir+"/"+blob.Name(orphan.Hash, nil)); err != nil {
		t.Fatalf("a blob the replica lacked, after the reopen: %v", err)
	}
	closeAndVerify(t, dbc, rc, childDir, "verify of the killed node's copy")
}
