package replication

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
)

type rep struct {
	files  []string
	data   map[string]string
	groups int
	fail   error
	starts []wal.Pos
}

func (r *rep) Replicate([][][]byte) error { r.groups++; return r.fail }
func (r *rep) ReplicateFile(name string, data []byte) error {
	if r.data == nil {
		r.data = map[string]string{}
	}
	r.files = append(r.files, name)
	r.data[name] = string(data)
	return r.fail
}

type posRep struct{ rep }

func (r *posRep) ReplicateAt(start wal.Pos, a [][][]byte) error {
	r.starts = append(r.starts, start)
	return r.Replicate(a)
}

func write(t *testing.T, fs vfs.FS, name, data string) {
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestHook(t *testing.T) {
	if Hook(nil, nil) != nil {
		t.Fatal("a nil Replicator has a hook")
	}
	var plain rep
	if err := Hook(&plain, func() wal.Pos { t.Fatal("end read for a Replicator not positioned"); return wal.Pos{} })(nil); err != nil || plain.groups != 1 {
		t.Fatalf("hook: %v, %d groups", err, plain.groups)
	}
	var p posRep
	end := wal.Pos{Segment: 3, Offset: 40}
	h := Hook(&p, func() wal.Pos { return end })
	end.Offset = 80 // read when the group is handed over, not when the hook is built
	if err := h(nil); err != nil || len(p.starts) != 1 || p.starts[0] != end {
		t.Fatalf("positioned hook: %v, starts %v, want [%v]", err, p.starts, end)
	}
}

func TestFiles(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/s", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Files(nil, fs, "/s"); err != nil {
		t.Fatal(err)
	}
	var r rep
	if err := Files(&r, fs, "/s"); err == nil || !strings.Contains(err.Error(), "/s/"+layout.StoreName) {
		t.Fatalf("Files without STORE: %v, want an error naming it", err)
	}
	write(t, fs, "/s/"+layout.StoreName, "store")
	r = rep{}
	if err := Files(&r, fs, "/s"); err != nil || len(r.files) != 1 || r.data[layout.StoreName] != "store" {
		t.Fatalf("Files without dictionaries: %v, %v", err, r.files)
	}
	if err := fs.MkdirAll("/s/"+layout.DictsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, fs, "/s/"+layout.DictsDir+"/"+layout.DictFileName(2), "d2")
	write(t, fs, "/s/"+layout.DictsDir+"/"+layout.DictFileName(1), "d1")
	write(t, fs, "/s/"+layout.DictsDir+"/"+layout.DictFileName(3)+".tmp", "partial")
	r = rep{}
	if err := Files(&r, fs, "/s"); err != nil {
		t.Fatal(err)
	}
	want := []string{layout.StoreName, layout.DictsDir + "/" + layout.DictFileName(1), layout.DictsDir + "/" + layout.DictFileName(2)}
	if strings.Join(r.files, ",") != strings.Join(want, ",") || r.data[want[2]] != "d2" {
		t.Fatalf("Files gave %v, want %v", r.files, want)
	}
	boom := errors.New("boom")
	r = rep{fail: boom}
	if err := Files(&r, fs, "/s"); !errors.Is(err, boom) {
		t.Fatalf("Files with a failing Replicator: %v", err)
	}
	if err := Dict(&r, 7, []byte("x")); !errors.Is(err, boom) || !strings.Contains(err.Error(), "dictionary 7") {
		t.Fatalf("Dict: %v", err)
	}
	if err := Dict(nil, 7, nil); err != nil {
		t.Fatal(err)
	}
}

type blobRep struct {
	rep
	got map[string]string
}

func (r *blobRep) ReplicateBlob(name string, size int64, open func() (io.ReadCloser, error)) error {
	f, err := open()
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	if int64(len(b)) != size {
		return fmt.Errorf("%s: %d bytes, size %d", name, len(b), size)
	}
	if r.got == nil {
		r.got = map[string]string{}
	}
	r.got[name] = string(b)
	return r.fail
}

func TestBlob(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/s/"+blob.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("b", 200<<10)
	write(t, fs, "/s/"+blob.Dir+"/ab", big)
	var plain rep
	if Blobs(&plain) || Blob(&plain, fs, "/s", "ab") != nil || Blobs(nil) || Blob(nil, fs, "/s", "ab") != nil {
		t.Fatal("a Replicator that ships no blobs was given one")
	}
	var r blobRep
	if !Blobs(&r) {
		t.Fatal("Blobs of a BlobReplicator is false")
	}
	if err := Blob(&r, fs, "/s", "ab"); err != nil || r.got[blob.Dir+"/ab"] != big {
		t.Fatalf("Blob: %v, got %d bytes", err, len(r.got[blob.Dir+"/ab"]))
	}
	if err := Blob(&r, fs, "/s", "missing"); err == nil || !strings.Contains(err.Error(), "/s/"+blob.Dir+"/missing") {
		t.Fatalf("Blob of a missing file: %v, want an error naming it", err)
	}
	boom := errors.New("boom")
	r.fail = boom
	if err := Blob(&r, fs, "/s", "ab"); !errors.Is(err, boom) || !strings.Contains(err.Error(), "/s/"+blob.Dir+"/ab") {
		t.Fatalf("Blob with a failing Replicator: %v", err)
	}
}
