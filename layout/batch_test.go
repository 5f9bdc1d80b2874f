package layout

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestFileBatch: every file added is written whole under its name, on the
// operating system's filesystem (queued, written at Flush or when the
// queue is full) and on another (written at once, in order).
func TestFileBatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   vfs.FS
		dir  string
	}{{"os", vfs.Default, t.TempDir()}, {"mem", vfs.NewMem(), "/d"}} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.fs.MkdirAll(tc.dir, 0o700); err != nil {
				t.Fatal(err)
			}
			b := &FileBatch{FS: tc.fs}
			n := batchChunk + 3
			for i := range n {
				if err := b.Add(tc.fs.PathJoin(tc.dir, fmt.Sprintf("f%d", i)), bytes.Repeat([]byte{byte(i)}, i)); err != nil {
					t.Fatal(err)
				}
			}
			queued := len(b.files)
			if tc.name == "os" && queued != 3 || tc.name == "mem" && queued != 0 {
				t.Fatalf("%d files queued after %d added", queued, n)
			}
			if err := b.Flush(); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				f, err := tc.fs.Open(tc.fs.PathJoin(tc.dir, fmt.Sprintf("f%d", i)))
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(f)
				f.Close()
				if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{byte(i)}, i)) {
					t.Fatalf("file %d: %d bytes, %v", i, len(got), err)
				}
			}
		})
	}
}
