package wal

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// zeroWritesFS records every write of zeros into the files it creates
// (where a segment or a spare is zero-filled): the file's name, offset
// and length.
type zeroWritesFS struct {
	vfs.FS
	mu     sync.Mutex
	writes []zeroWrite
}

type zeroWrite struct {
	name     string
	off, len int64
}

func (z *zeroWritesFS) Unwrap() vfs.FS { return z.FS }

func (z *zeroWritesFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := z.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	return &zeroWritesFile{File: f, fs: z, name: name}, nil
}

type zeroWritesFile struct {
	vfs.File
	fs   *zeroWritesFS
	name string
	off  int64 // for Write
}

func (f *zeroWritesFile) note(p []byte, off int64) {
	for _, b := range p {
		if b != 0 {
			return
		}
	}
	f.fs.mu.Lock()
	f.fs.writes = append(f.fs.writes, zeroWrite{f.name, off, int64(len(p))})
	f.fs.mu.Unlock()
}

func (f *zeroWritesFile) Write(p []byte) (int, error) {
	f.note(p, f.off)
	n, err := f.File.Write(p)
	f.off += int64(n)
	return n, err
}

func (f *zeroWritesFile) WriteAt(p []byte, off int64) (int, error) {
	f.note(p, off)
	return f.File.WriteAt(p, off)
}

// TestZeroFillWrites: segments and spares are zero-filled in writes of at
// most 64 KiB that never cross a multiple of it (the page cache
// keeps a write as one folio, which ext4 walks on every later write into
// it), and the writes cover each file to its size.
func TestZeroFillWrites(t *testing.T) {
	z := &zeroWritesFS{FS: vfs.NewMem()}
	const segSize = 1 << 20
	l := mustOpen(t, z, Options{SegmentSize: segSize, InitialSegmentSize: 256 << 10})
	defer l.Close()
	ctx := context.Background()
	// Past half of the first segment, so that the spare is prepared.
	for l.End().Offset < 200<<10 {
		if _, err := l.Append(ctx, rec(1, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	// The deadline only bounds a hang: a busy machine may take seconds.
	deadline := time.Now().Add(time.Minute)
	for !l.spareReady() {
		if time.Now().After(deadline) {
			t.Fatal("no spare prepared")
		}
		time.Sleep(time.Millisecond)
	}
	const most = 64 << 10
	z.mu.Lock()
	defer z.mu.Unlock()
	covered := map[string]int64{}
	for _, w := range z.writes {
		if w.len > most || w.off/most != (w.off+w.len-1)/most {
			t.Errorf("%s: zeros written at [%d, %d): over %d bytes or across a multiple of it", w.name, w.off, w.off+w.len, most)
		}
		covered[w.name[strings.LastIndex(w.name, "/")+1:]] += w.len
	}
	for name, want := range map[string]int64{
		segmentName(1) + segTmpSuffix: 256<<10 - SegmentHeaderSize,
		spareTmpName:                  512 << 10,
	} {
		if covered[name] != want {
			t.Errorf("%s: %d bytes of zeros written, want %d (all: %v)", name, covered[name], want, covered)
		}
	}
}

// TestWriteZeros: exactly [from, to) is zeroed, whatever its alignment,
// and an empty or reversed range writes nothing.
func TestWriteZeros(t *testing.T) {
	const size = 3*64<<10 + 100
	for _, r := range [][2]int64{{0, size}, {40, 64 << 10}, {65530, 65540}, {100, 100}, {7, 3}, {64 << 10, 2 * 64 << 10}, {1, size - 1}} {
		mem := vfs.NewMem()
		f, err := mem.Create("f", vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(bytes.Repeat([]byte{0xff}, size), 0); err != nil {
			t.Fatal(err)
		}
		if off, err := writeZeros(f, r[0], r[1]); err != nil {
			t.Fatalf("[%d, %d): at %d: %v", r[0], r[1], off, err)
		}
		got := make([]byte, size)
		if _, err := f.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		for i, b := range got {
			if want := byte(0xff); int64(i) >= r[0] && int64(i) < r[1] {
				want = 0
				if b != want {
					t.Fatalf("[%d, %d): byte %d is %#x, want 0", r[0], r[1], i, b)
				}
			} else if b != want {
				t.Fatalf("[%d, %d): byte %d outside the range is %#x", r[0], r[1], i, b)
			}
		}
		f.Close()
	}
}
