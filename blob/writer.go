package blob

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/crc32c"
	"github.com/continuumdb/continuum/internal/durable"
	"github.com/klauspost/compress/s2"
	"github.com/zeebo/blake3"
)

// A Writer writes one blob as a stream. Write appends bytes; Commit makes
// the blob durable under its name and returns its Ref; Abort drops it. It
// holds one chunk in memory. It is not safe for concurrent use.
type Writer struct {
	s      *Store
	sealer Sealer
	media  string
	tmp    string
	f      vfs.File
	hdr    header

	buf  []byte // the chunk being filled, up to ChunkSize
	enc  []byte // the chunk compressed
	out  []byte // the chunk as written: frame, payload, CRC
	list []byte // the chunk hashes so far
	h    *blake3.Hasher
	size int64
	err  error // the first error: the Writer is then dead
	done bool
}

// ErrClosed is returned by a Writer used after Commit or Abort.
var ErrClosed = errors.New("blob: writer already committed or aborted")

// Create starts a blob of media type media ("" when unknown), sealed with
// sealer (nil: a plaintext blob). The caller must Commit or Abort it.
func (s *Store) Create(sealer Sealer, media string) (*Writer, error) {
	if len(media) > MaxMediaType {
		return nil, fmt.Errorf("blob: media type of %d bytes, at most %d", len(media), MaxMediaType)
	}
	if err := s.mkdir(); err != nil {
		return nil, err
	}
	w := &Writer{s: s, sealer: sealer, media: media, tmp: tempName(), h: newChunkHasher()}
	w.hdr.sealed = sealer != nil
	if _, err := rand.Read(w.hdr.id[:]); err != nil {
		return nil, fmt.Errorf("blob: draw an id: %w", err)
	}
	f, err := durable.Create(s.fs, s.path(w.tmp), vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("blob: create %s: %w", s.path(w.tmp), err)
	}
	w.f = f
	if _, err := f.Write(appendHeader(nil, w.hdr)); err != nil {
		w.fail(err)
		return nil, w.err
	}
	return w, nil
}

// fail records err as the Writer's first error and drops its file.
func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = fmt.Errorf("blob: write %s: %w", w.s.path(w.tmp), err)
	}
	if w.f != nil {
		_ = w.f.Close()
		w.f = nil
		_ = w.s.fs.Remove(w.s.path(w.tmp))
	}
}

// Write appends p to the blob.
func (w *Writer) Write(p []byte) (int, error) {
	if w.done {
		return 0, ErrClosed
	}
	if w.err != nil {
		return 0, w.err
	}
	n := 0
	for len(p) > 0 {
		if w.buf == nil {
			w.buf = make([]byte, 0, ChunkSize)
		}
		k := min(len(p), ChunkSize-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p, n = p[k:], n+k
		if len(w.buf) == ChunkSize {
			if err := w.flush(); err != nil {
				return n - k, err
			}
		}
	}
	return n, nil
}

// flush writes the chunk in buf.
func (w *Writer) flush() error {
	c := w.buf
	i := int64(len(w.list) / 32)
	sum := chunkHash(w.h, c)
	w.list = append(w.list, sum[:]...)

	if w.enc == nil {
		w.enc = make([]byte, s2.MaxEncodedLen(ChunkSize))
	}
	out := append(w.out[:0], 0, 0, 0, 0, kindStored)
	payload := c
	if enc := s2.Encode(w.enc, c); len(enc) <= len(c)-len(c)/8 {
		out[4], payload = kindS2, enc
	}
	body := len(out)
	if w.sealer != nil {
		var err error
		if out, err = w.sealer.Seal(out, payload, aad(nil, w.hdr.id, i)); err != nil {
			w.fail(err)
			return w.err
		}
	} else {
		out = append(out, payload...)
	}
	binary.LittleEndian.PutUint32(out[:4], uint32(len(out)-body))
	out = binary.LittleEndian.AppendUint32(out, crc32c.Checksum(out[4:]))
	w.out = out
	if _, err := w.f.Write(out); err != nil {
		w.fail(err)
		return w.err
	}
	w.size += int64(len(c))
	w.buf = w.buf[:0]
	return nil
}

// Commit writes the blob's last chunk and trailer, makes it durable under
// its name (fsync of the file, rename, fsync of the directory) and returns
// its Ref. A blob of that name already stored (the same content under the
// same key) is kept and this copy dropped, once its header and trailer
// check out against the Ref. Any error leaves nothing under the name.
func (w *Writer) Commit() (Ref, error) {
	if w.done {
		return Ref{}, ErrClosed
	}
	if w.err != nil {
		return Ref{}, w.err
	}
	w.done = true
	if len(w.buf) > 0 {
		if err := w.flush(); err != nil {
			return Ref{}, err
		}
	}
	ref := Ref{Hash: treeHash(w.size, w.list), Size: w.size, Media: w.media}
	list := w.list
	if w.sealer != nil {
		var err error
		if list, err = w.sealer.Seal(nil, w.list, aad(nil, w.hdr.id, -1)); err != nil {
			w.fail(err)
			return Ref{}, w.err
		}
	}
	t := append([]byte(nil), list...)
	t = binary.LittleEndian.AppendUint64(t, uint64(w.size))
	t = binary.LittleEndian.AppendUint64(t, uint64(len(w.list)/32))
	t = binary.LittleEndian.AppendUint32(t, uint32(len(list)))
	t = binary.LittleEndian.AppendUint32(t, crc32c.Checksum(t))
	if _, err := w.f.Write(t); err != nil {
		w.fail(err)
		return Ref{}, w.err
	}
	if err := w.f.Sync(); err != nil {
		w.fail(err)
		return Ref{}, w.err
	}
	err := w.f.Close()
	w.f = nil
	tmp := w.s.path(w.tmp)
	if err != nil {
		_ = w.s.fs.Remove(tmp)
		return Ref{}, fmt.Errorf("blob: close %s: %w", tmp, err)
	}
	name := w.s.path(Name(ref.Hash, w.sealer))
	if w.s.check(name, ref, w.sealer) == nil {
		if err := w.s.fs.Remove(tmp); err != nil {
			return Ref{}, fmt.Errorf("blob: remove %s: %w", tmp, err)
		}
		return ref, nil
	}
	if err := w.s.fs.Rename(tmp, name); err != nil {
		_ = w.s.fs.Remove(tmp)
		return Ref{}, fmt.Errorf("blob: rename %s to %s: %w", tmp, name, err)
	}
	if err := durable.SyncDir(w.s.fs, w.s.dir); err != nil {
		return Ref{}, fmt.Errorf("blob: sync %s: %w", w.s.dir, err)
	}
	return ref, nil
}

// Abort drops the blob. It is a no-op after Commit or Abort.
func (w *Writer) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	if w.f == nil {
		return nil
	}
	_ = w.f.Close()
	w.f = nil
	if err := w.s.fs.Remove(w.s.path(w.tmp)); err != nil {
		return fmt.Errorf("blob: remove %s: %w", w.s.path(w.tmp), err)
	}
	return nil
}
