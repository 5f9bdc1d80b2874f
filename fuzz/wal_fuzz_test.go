package fuzz

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/wal"
)

// walSegments is a tiny real log written through the wal API: segment 1
// holds a few records and a filler that leaves no room for another, so the
// reopen sealed it; segment 2 (the newest, unsealed) holds a few more. Tiny
// (one MinSegmentSize each), so that the fuzzer mutates and minimizes
// quickly.
var walSegments struct {
	once   sync.Once
	s1, s2 []byte
	err    error
}

func walFixture(tb testing.TB) (s1, s2 []byte) {
	walSegments.once.Do(func() {
		fs := vfs.NewMem()
		ctx := context.Background()
		for i, batches := range [][][][]byte{
			{{[]byte("")}, {[]byte("hello")}, {[]byte("a batch of"), []byte("two records")}, {bytes.Repeat([]byte{7}, 40)}},
			{{[]byte("after the reopen")}, {[]byte("x"), []byte("y"), []byte("z")}},
		} {
			l, err := wal.Open("wal", &wal.Options{FS: fs, SegmentSize: wal.MinSegmentSize})
			if err != nil {
				walSegments.err = err
				return
			}
			for _, b := range batches {
				if _, err := l.AppendBatch(ctx, b); err != nil {
					walSegments.err = err
					return
				}
			}
			if i == 0 {
				// A writable Open resumes a segment that has room; fill this
				// one up to its seal's reserve so that the reopen seals it.
				fill := wal.MinSegmentSize - 2*wal.RecordHeaderSize - l.End().Offset
				if _, err := l.Append(ctx, bytes.Repeat([]byte{9}, int(fill))); err != nil {
					walSegments.err = err
					return
				}
			}
			if err := l.Close(); err != nil {
				walSegments.err = err
				return
			}
		}
		walSegments.s1, walSegments.err = walReadFile(fs, "wal/0000000000000001.wal")
		if walSegments.err == nil {
			walSegments.s2, walSegments.err = walReadFile(fs, "wal/0000000000000002.wal")
		}
	})
	if walSegments.err != nil {
		tb.Fatal(walSegments.err)
	}
	return walSegments.s1, walSegments.s2
}

// walTrim cuts the zero bytes off the end of a segment.
func walTrim(b []byte) []byte {
	n := len(b)
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return b[:min(len(b), (n+15)&^7)]
}

func walReadFile(fs vfs.FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size())
	_, err = f.ReadAt(b, 0)
	return b, err
}

// FuzzWALSegment reads arbitrary bytes as a WAL segment: alone, it is the
// newest segment (recovery's tail scan); with sealed set, a valid segment 2
// follows it, so it is read as a sealed segment. Recovery and reading must
// never panic; failures must be *wal.CorruptionError (or a bad position)
// naming segment 1 or 2; every record read must come back identical through
// ReadAt, at increasing positions.
func FuzzWALSegment(f *testing.F) {
	s1, s2 := walFixture(f)
	// Seed with the written part of each segment only: the zero-filled rest
	// reads the same as a shorter file.
	s1, s2 = walTrim(s1), walTrim(s2)
	f.Add(s1, false)
	f.Add(s1, true)
	f.Add(s2, false)
	f.Add(s1[:len(s1)/2], true)
	f.Add(s2[:len(s2)/2], false)
	f.Fuzz(func(t *testing.T, data []byte, sealed bool) {
		walCheckSegment(t, data, sealed)
	})
}

func walCheckSegment(t *testing.T, data []byte, sealed bool) {
	_, s2 := walFixture(t)
	fs := vfs.NewMem()
	if err := fs.MkdirAll("wal", 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"wal/0000000000000001.wal": data}
	if sealed {
		files["wal/0000000000000002.wal"] = s2
	}
	for name, b := range files {
		f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(bytes.Clone(b)); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	l, err := wal.Open("wal", &wal.Options{FS: fs, ReadOnly: true})
	if err != nil {
		walExpectCorrupt(t, err)
		return
	}
	defer l.Close()
	r, err := l.NewReader(wal.Pos{})
	if err != nil {
		if !errors.Is(err, wal.ErrBadPos) {
			t.Fatalf("NewReader: %v", err)
		}
		return
	}
	defer r.Close()
	var prev wal.Pos
	for r.Next() {
		p := r.Pos()
		if !prev.Less(p) || !p.Less(r.NextPos()) {
			t.Fatalf("positions out of order: %v then %v (next %v)", prev, p, r.NextPos())
		}
		prev = p
		got, err := l.ReadAt(p)
		if err != nil || !bytes.Equal(got, r.Record()) {
			t.Fatalf("ReadAt(%v) = %d bytes, %v; the reader saw %d bytes", p, len(got), err, len(r.Record()))
		}
	}
	if err := r.Err(); err != nil {
		walExpectCorrupt(t, err)
	}
}

func walExpectCorrupt(t *testing.T, err error) {
	t.Helper()
	var ce *wal.CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("error is not a corruption error: %v", err)
	}
	if (ce.Segment != 1 && ce.Segment != 2) || ce.Reason == "" || ce.Offset < 0 {
		t.Fatalf("corruption error does not say where: %+v", ce)
	}
}
