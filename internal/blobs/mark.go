package blobs

// The mark of shipped blobs: the names of the blob files the store's
// replica acknowledged, so that Open ships only those it may lack
// (doc.go, "Shipping").
//
// Format of blobs/SHIPPED (little-endian; these constants are frozen):
//
//	+---------+---------+---------+--------------+
//	| "CBSH"  | version | 0 0 0   | CRC32C(0:8)  |   header, 12 bytes
//	+---------+---------+---------+--------------+
//	| name (32 bytes: the blob file's name, hex-decoded) | CRC32C(name) |   entry, 36 bytes
//	| ...                                                               |   one per blob acknowledged
//
// An entry is appended, and the file fsynced, only after the replica
// acknowledged the blob; the file is created (and rewritten without the
// names of blobs no longer here) through a temporary file, fsynced,
// renamed, the directory fsynced. Reading stops at the first entry cut
// short or whose CRC disagrees: a torn append loses at most names, and a
// lost name only means a blob is shipped again (the replica skips what it
// holds). A damaged mark is rewritten, never an error.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/crc32c"
	"github.com/continuumdb/continuum/internal/durable"
)

const (
	// MarkName is the mark's file name in the store's blob directory:
	// not a blob's name, so blob.Store's listing and sweep leave it be.
	MarkName = "SHIPPED"
	// markTemp is the temporary file a rewrite renames over the mark. Its
	// "tmp-" prefix is blob.Store's for temporary files: a sweep removes
	// one a crash left.
	markTemp       = "tmp-shipped"
	markMagic      = "CBSH"
	markVersion    = 1
	markHeaderLen  = 4 + 1 + 3 + 4
	markEntryLen   = 32 + 4
	markNameHexLen = 64
)

// mark is the Set's handle on the mark file: fs and dir are the store's
// filesystem and blob directory.
type mark struct {
	fs  vfs.FS
	dir string

	mu sync.Mutex
	// size is the mark file's length once it was read or written whole
	// (0: not yet; the next add rewrites it); err, once set, is final: a
	// failed write or fsync leaves the file's state unknown, and every
	// later add fails with it until the store is opened again. Guarded by
	// mu.
	size int64
	err  error
}

func (m *mark) path(name string) string { return m.fs.PathJoin(m.dir, name) }

// read returns the names the mark holds, and whether the file needs a
// rewrite (missing, damaged, cut short, or holding a name twice). A
// missing file is no error.
func (m *mark) read() (names map[string]bool, rewrite bool, err error) {
	p := m.path(MarkName)
	f, err := m.fs.Open(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return map[string]bool{}, true, nil
		}
		return nil, false, fmt.Errorf("engine: blob mark %s: %w", p, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("engine: blob mark %s: %w", p, err)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, false, fmt.Errorf("engine: blob mark %s: read: %w", p, err)
	}
	names = map[string]bool{}
	if len(b) < markHeaderLen || !bytes.Equal(b[:markHeaderLen], markHeader()) {
		return names, true, nil
	}
	rest := b[markHeaderLen:]
	for len(rest) >= markEntryLen {
		if crc32c.Checksum(rest[:32]) != binary.LittleEndian.Uint32(rest[32:markEntryLen]) {
			return names, true, nil
		}
		n := hex.EncodeToString(rest[:32])
		if names[n] {
			rewrite = true
		}
		names[n] = true
		rest = rest[markEntryLen:]
	}
	if len(rest) > 0 {
		rewrite = true
	}
	return names, rewrite, nil
}

func markHeader() []byte {
	h := append([]byte(markMagic), markVersion, 0, 0, 0)
	return binary.LittleEndian.AppendUint32(h, crc32c.Checksum(h))
}

func appendEntry(dst []byte, name string) ([]byte, error) {
	var raw [32]byte
	if len(name) != markNameHexLen {
		return dst, fmt.Errorf("engine: blob mark: %q is not a blob file's name", name)
	}
	if _, err := hex.Decode(raw[:], []byte(name)); err != nil {
		return dst, fmt.Errorf("engine: blob mark: %q is not a blob file's name: %w", name, err)
	}
	dst = append(dst, raw[:]...)
	return binary.LittleEndian.AppendUint32(dst, crc32c.Checksum(raw[:])), nil
}

// rewriteLocked replaces the mark with one holding names: a temporary
// file, fsynced, renamed, the directory fsynced.
func (m *mark) rewriteLocked(names []string) error {
	if m.err != nil {
		return m.err
	}
	b := markHeader()
	for _, n := range names {
		var err error
		if b, err = appendEntry(b, n); err != nil {
			return err
		}
	}
	tmp, p := m.path(markTemp), m.path(MarkName)
	fail := func(what string, err error) error {
		_ = m.fs.Remove(tmp)
		m.err = fmt.Errorf("engine: blob mark %s: %s: %w", p, what, err)
		return m.err
	}
	f, err := durable.Create(m.fs, tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fail("create "+tmp, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fail("write "+tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fail("fsync "+tmp, err)
	}
	if err := f.Close(); err != nil {
		return fail("close "+tmp, err)
	}
	if err := m.fs.Rename(tmp, p); err != nil {
		return fail("rename "+tmp, err)
	}
	if err := durable.SyncDir(m.fs, m.dir); err != nil {
		return fail("sync", err)
	}
	m.size = int64(len(b))
	return nil
}

// add appends name to the mark and fsyncs it (creating the mark if it was
// not read or written whole since the Set was made). Called only once the
// replica acknowledged the blob.
func (m *mark) add(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	if m.size == 0 {
		return m.rewriteLocked([]string{name})
	}
	e, err := appendEntry(nil, name)
	if err != nil {
		return err
	}
	p := m.path(MarkName)
	f, err := m.fs.OpenReadWrite(p, vfs.WriteCategoryUnspecified)
	if err != nil {
		m.err = fmt.Errorf("engine: blob mark %s: open: %w", p, err)
		return m.err
	}
	if _, err := f.WriteAt(e, m.size); err != nil {
		f.Close()
		m.err = fmt.Errorf("engine: blob mark %s: write at %d: %w", p, m.size, err)
		return m.err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		m.err = fmt.Errorf("engine: blob mark %s: fsync: %w", p, err)
		return m.err
	}
	if err := f.Close(); err != nil {
		m.err = fmt.Errorf("engine: blob mark %s: close: %w", p, err)
		return m.err
	}
	m.size += int64(len(e))
	return nil
}
