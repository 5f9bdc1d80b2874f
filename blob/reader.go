package blob

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/crc32c"
	"github.com/continuumdb/continuum/internal/durable"
	"github.com/klauspost/compress/s2"
	"github.com/zeebo/blake3"
)

// A Reader reads one blob as a stream, checking each chunk against the
// blob's chunk hashes, and those against the Ref, before it returns a byte
// of it. It holds two chunks in memory. It is not safe for concurrent use.
type Reader struct {
	name   string
	f      vfs.File
	sealer Sealer
	hdr    header
	ref    Ref
	list   []byte // the chunk hashes, checked against ref.Hash
	end    int64  // where the chunks end and the trailer begins
	off    int64  // the next chunk's offset
	next   int64  // the next chunk's index
	h      *blake3.Hasher
	raw    []byte // a chunk as stored
	opened []byte // a sealed chunk's payload, opened
	chunk  []byte // the current chunk's plaintext
	pos    int    // bytes of chunk already read
	err    error
}

// corrupt is an ErrCorrupt naming the blob's file and why.
func corrupt(name string, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrCorrupt, name, fmt.Sprintf(format, args...))
}

// Open opens the blob ref names, sealed with sealer (nil: plaintext). Its
// header and trailer are checked against ref before Open returns: a
// missing blob is an error matching ErrNotFound, one that disagrees with
// ref's hash or with itself ErrCorrupt, each naming the file. A whole
// blob of ref's hash but of another size than ref's is ErrNotFound: no
// blob of that Ref exists.
func (s *Store) Open(ref Ref, sealer Sealer) (*Reader, error) {
	name := s.path(Name(ref.Hash, sealer))
	f, err := s.fs.Open(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s (%v)", ErrNotFound, name, ref)
		}
		return nil, fmt.Errorf("blob: open %s: %w", name, err)
	}
	r := &Reader{name: name, f: f, sealer: sealer, ref: ref}
	if err := r.load(); err != nil {
		_ = f.Close()
		return nil, err
	}
	r.h = newChunkHasher()
	return r, nil
}

// load reads and checks the header and trailer.
func (r *Reader) load() error {
	st, err := r.f.Stat()
	if err != nil {
		return fmt.Errorf("blob: stat %s: %w", r.name, err)
	}
	if !st.Mode().IsRegular() {
		return corrupt(r.name, "not a regular file (%v)", st.Mode())
	}
	fileSize := st.Size()
	if fileSize < headerLen+trailerTail {
		return corrupt(r.name, "%d bytes, shorter than a header and a trailer", fileSize)
	}
	var hb [headerLen]byte
	if _, err := r.f.ReadAt(hb[:], 0); err != nil {
		return fmt.Errorf("blob: read %s: %w", r.name, err)
	}
	if r.hdr, err = parseHeader(hb[:]); err != nil {
		return corrupt(r.name, "%v", err)
	}
	if r.hdr.sealed != (r.sealer != nil) {
		return corrupt(r.name, "sealed is %v, the store's blobs are sealed: %v", r.hdr.sealed, r.sealer != nil)
	}
	var tb [trailerTail]byte
	if _, err := r.f.ReadAt(tb[:], fileSize-trailerTail); err != nil {
		return fmt.Errorf("blob: read %s: %w", r.name, err)
	}
	size := binary.LittleEndian.Uint64(tb[0:])
	count := binary.LittleEndian.Uint64(tb[8:])
	stored := int64(binary.LittleEndian.Uint32(tb[16:]))
	if size > 1<<62 || count != uint64(chunkCount(int64(size))) {
		return corrupt(r.name, "of %d bytes, its trailer says %d bytes in %d chunks", fileSize, size, count)
	}
	least, most := int64(count)*32, int64(count)*32
	if r.sealer != nil {
		most += int64(r.sealer.Overhead())
	}
	if stored < least || stored > most || fileSize-trailerTail-stored < headerLen {
		return corrupt(r.name, "a trailer list of %d bytes, want %d to %d", stored, least, most)
	}
	r.end = fileSize - trailerTail - stored
	t := make([]byte, stored+trailerTail)
	if _, err := r.f.ReadAt(t, r.end); err != nil {
		return fmt.Errorf("blob: read %s: %w", r.name, err)
	}
	n := len(t) - 4
	if crc32c.Checksum(t[:n]) != binary.LittleEndian.Uint32(t[n:]) {
		return corrupt(r.name, "trailer checksum mismatch")
	}
	list := t[:stored]
	if r.sealer != nil {
		if list, err = r.sealer.Open(nil, list, aad(nil, r.hdr.id, -1)); err != nil {
			return corrupt(r.name, "trailer: %v", err)
		}
		if int64(len(list)) != int64(count)*32 {
			return corrupt(r.name, "trailer opens to %d bytes, want %d", len(list), count*32)
		}
	}
	if treeHash(int64(size), list) != r.ref.Hash {
		return corrupt(r.name, "its chunk hashes are not those of %v", r.ref)
	}
	if int64(size) != r.ref.Size {
		// The file is whole and is the blob of this hash: the reference
		// names another size, so no blob of it exists (a caller's
		// mistake, not damage).
		return fmt.Errorf("%w: %s holds %d bytes, the reference %v names %d", ErrNotFound, r.name, size, r.ref, r.ref.Size)
	}
	r.list, r.off = list, headerLen
	return nil
}

// Read reads the blob's next bytes.
func (r *Reader) Read(p []byte) (int, error) {
	for r.pos == len(r.chunk) {
		if r.err != nil {
			return 0, r.err
		}
		if r.next == int64(len(r.list)/32) {
			if r.off != r.end {
				r.err = corrupt(r.name, "%d bytes between the last chunk and the trailer", r.end-r.off)
			} else {
				r.err = io.EOF
			}
			continue
		}
		if err := r.readChunk(); err != nil {
			r.err = err
			return 0, err
		}
	}
	n := copy(p, r.chunk[r.pos:])
	r.pos += n
	return n, nil
}

// readChunk reads, checks and decodes chunk r.next.
func (r *Reader) readChunk() error {
	i := r.next
	want := chunkLen(r.ref.Size, i)
	bound := int64(want)
	if r.sealer != nil {
		bound += int64(r.sealer.Overhead())
	}
	var fr [5]byte
	if r.end-r.off < chunkFrame {
		return corrupt(r.name, "chunk %d at offset %d: cut short", i, r.off)
	}
	if _, err := r.f.ReadAt(fr[:], r.off); err != nil {
		return fmt.Errorf("blob: read %s: %w", r.name, err)
	}
	n := int64(binary.LittleEndian.Uint32(fr[:4]))
	if n > bound || r.off+chunkFrame+n > r.end {
		return corrupt(r.name, "chunk %d at offset %d: %d stored bytes, at most %d", i, r.off, n, bound)
	}
	if cap(r.raw) < int(n)+5 {
		r.raw = make([]byte, 0, bound+chunkFrame)
	}
	raw := r.raw[:n+5]
	if _, err := r.f.ReadAt(raw, r.off+4); err != nil {
		return fmt.Errorf("blob: read %s: %w", r.name, err)
	}
	if crc32c.Checksum(raw[:n+1]) != binary.LittleEndian.Uint32(raw[n+1:]) {
		return corrupt(r.name, "chunk %d at offset %d: checksum mismatch", i, r.off)
	}
	kind, payload := raw[0], raw[1:n+1]
	if r.sealer != nil {
		var err error
		if r.opened, err = r.sealer.Open(r.opened[:0], payload, aad(nil, r.hdr.id, i)); err != nil {
			return corrupt(r.name, "chunk %d: %v", i, err)
		}
		payload = r.opened
	}
	if cap(r.chunk) < want {
		r.chunk = make([]byte, 0, ChunkSize)
	}
	switch kind {
	case kindStored:
		if len(payload) != want {
			return corrupt(r.name, "chunk %d: %d bytes, want %d", i, len(payload), want)
		}
		r.chunk = append(r.chunk[:0], payload...)
	case kindS2:
		if dl, err := s2.DecodedLen(payload); err != nil || dl != want {
			return corrupt(r.name, "chunk %d: decodes to %d bytes (%v), want %d", i, dl, err, want)
		}
		c, err := s2.Decode(r.chunk[:cap(r.chunk)], payload)
		if err != nil {
			return corrupt(r.name, "chunk %d: %v", i, err)
		}
		r.chunk = c
	default:
		return corrupt(r.name, "chunk %d: unknown kind %d", i, kind)
	}
	if sum := chunkHash(r.h, r.chunk); !bytes.Equal(sum[:], r.list[32*i:32*i+32]) {
		return corrupt(r.name, "chunk %d at offset %d: its hash is not the trailer's", i, r.off)
	}
	r.off += chunkFrame + n
	r.next++
	r.pos = 0
	return nil
}

// Close closes the blob's file.
func (r *Reader) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// Verify reads the blob ref names whole, checking every chunk; nil means
// its bytes are ref's.
func (s *Store) Verify(ref Ref, sealer Sealer) error {
	r, err := s.Open(ref, sealer)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(io.Discard, r)
	return err
}

// check checks the header and trailer of the blob file name against ref.
func (s *Store) check(name string, ref Ref, sealer Sealer) error {
	f, err := s.fs.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	r := &Reader{name: name, f: f, sealer: sealer, ref: ref}
	return r.load()
}

// Sweep removes the blobs keep does not keep (keep is given each blob's
// file name) and, if temps is set, the temporary files of Writers (which
// must then not run beside it: a crash's leftovers), then fsyncs the
// directory. Files of other names are left alone. It returns how many
// files it removed and their bytes.
func (s *Store) Sweep(keep func(name string) bool, temps bool) (files int, bytes int64, err error) {
	names, err := s.fs.List(s.dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, 0, nil
		}
		return 0, 0, fmt.Errorf("blob: list %s: %w", s.dir, err)
	}
	for _, n := range names {
		drop := (isBlobName(n) && !keep(n)) || (temps && strings.HasPrefix(n, tmpPrefix))
		if !drop {
			continue
		}
		p := s.path(n)
		if st, err := s.fs.Stat(p); err == nil {
			bytes += st.Size()
		}
		if err := s.fs.Remove(p); err != nil {
			return files, bytes, fmt.Errorf("blob: remove %s: %w", p, err)
		}
		files++
	}
	if files > 0 {
		if err := durable.SyncDir(s.fs, s.dir); err != nil {
			return files, bytes, fmt.Errorf("blob: sync %s: %w", s.dir, err)
		}
	}
	return files, bytes, nil
}

// Names calls fn with the file name of every committed blob in the store.
func (s *Store) Names(fn func(name string) error) error {
	names, err := s.fs.List(s.dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("blob: list %s: %w", s.dir, err)
	}
	for _, n := range names {
		if isBlobName(n) {
			if err := fn(n); err != nil {
				return err
			}
		}
	}
	return nil
}

// VerifyAs reads the file file of the store's directory whole, checking
// that it is the plaintext blob the committed blob file name names (its
// hash, with the size its trailer gives): nil means it may be renamed to
// name. A sealed blob, named by a keyed MAC, cannot be checked without its
// key and is refused (ErrCorrupt). Errors name the file and say why.
func (s *Store) VerifyAs(file, name string) error {
	if !isBlobName(name) {
		return fmt.Errorf("blob: %q is not a blob file's name", name)
	}
	var ref Ref
	if _, err := hex.Decode(ref.Hash[:], []byte(name)); err != nil {
		return fmt.Errorf("blob: %q is not a blob file's name: %w", name, err)
	}
	p := s.path(file)
	f, err := s.fs.Open(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: %s", ErrNotFound, p)
		}
		return fmt.Errorf("blob: open %s: %w", p, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("blob: stat %s: %w", p, err)
	}
	if st.Size() >= headerLen+trailerTail {
		var tb [trailerTail]byte
		if _, err := f.ReadAt(tb[:], st.Size()-trailerTail); err != nil {
			return fmt.Errorf("blob: read %s: %w", p, err)
		}
		ref.Size = int64(binary.LittleEndian.Uint64(tb[:]) & (1<<62 - 1))
	}
	r := &Reader{name: p, f: f, ref: ref}
	if err := r.load(); err != nil {
		return err
	}
	r.h = newChunkHasher()
	_, err = io.Copy(io.Discard, r)
	return err
}
