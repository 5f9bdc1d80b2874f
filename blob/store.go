package blob

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/crc32c"
	"github.com/continuumdb/continuum/internal/durable"
)

// Sealer seals a sealed store's blobs under one data key (the engine's: a
// run's). Its AAD binds each payload to its place; Name must be a keyed
// function of the hash (a MAC), so that equal content under one key has one
// name and the name tells nothing of the content without the key.
type Sealer interface {
	Seal(dst, plain, aad []byte) ([]byte, error)
	Open(dst, sealed, aad []byte) ([]byte, error)
	Name(hash [32]byte) [32]byte
	// Overhead is the most Seal adds to a payload.
	Overhead() int
}

// Store is the blobs of one store, in one directory. It is safe for
// concurrent use; it keeps no state but the directory's name.
type Store struct {
	fs  vfs.FS
	dir string
}

// Dir is the directory of a store's blobs, relative to the store's.
const Dir = "blobs"

// tmpPrefix starts the names of the files Writers write before Commit.
const tmpPrefix = "tmp-"

// Errors of this package; each error names the blob's file and says why.
var (
	// ErrNotFound: no blob of the Ref's name.
	ErrNotFound = errors.New("blob: not found")
	// ErrCorrupt: a blob's file disagrees with its Ref or with itself.
	ErrCorrupt = errors.New("blob: damaged")
)

// Open returns the store of the blobs in dir (created, durably, on the
// first Create). fs should be the store's confined FS (privfs.Confine).
func Open(fs vfs.FS, dir string) *Store { return &Store{fs: fs, dir: dir} }

// Name is the file name (in the store's directory) of the blob of hash
// under sealer (nil: a plaintext blob).
func Name(hash [32]byte, sealer Sealer) string {
	if sealer != nil {
		hash = sealer.Name(hash)
	}
	return hex.EncodeToString(hash[:])
}

// path is the blob file name's path.
func (s *Store) path(name string) string { return s.fs.PathJoin(s.dir, name) }

const (
	magic      = "CBLB"
	version    = 1
	flagSealed = 1
	idLen      = 16
	headerLen  = 4 + 1 + 1 + 2 + idLen + 4
	// chunkFrame is a chunk's bytes besides its payload: length, kind, CRC.
	chunkFrame = 4 + 1 + 4
	// trailerTail is the trailer's bytes after its list: size, chunk
	// count, the list's stored length, CRC.
	trailerTail = 8 + 8 + 4 + 4
	kindStored  = 0
	kindS2      = 1
)

// header is a blob file's header: whether it is sealed, and the random id
// its Writer drew, which a sealed blob's AADs carry.
type header struct {
	sealed bool
	id     [idLen]byte
}

func appendHeader(dst []byte, h header) []byte {
	start := len(dst)
	dst = append(dst, magic...)
	var flags byte
	if h.sealed {
		flags |= flagSealed
	}
	dst = append(dst, version, flags, 0, 0)
	dst = append(dst, h.id[:]...)
	return binary.LittleEndian.AppendUint32(dst, crc32c.Checksum(dst[start:]))
}

func parseHeader(b []byte) (header, error) {
	var h header
	if len(b) < headerLen {
		return h, errors.New("header cut short")
	}
	if string(b[:4]) != magic {
		return h, errors.New("not a blob file (magic)")
	}
	if crc32c.Checksum(b[:headerLen-4]) != binary.LittleEndian.Uint32(b[headerLen-4:]) {
		return h, errors.New("header checksum mismatch")
	}
	if b[4] != version {
		return h, fmt.Errorf("version %d, this build reads %d", b[4], version)
	}
	if b[5]&^flagSealed != 0 || b[6] != 0 || b[7] != 0 {
		return h, fmt.Errorf("unknown flags %#x", b[5:8])
	}
	h.sealed = b[5]&flagSealed != 0
	copy(h.id[:], b[8:8+idLen])
	return h, nil
}

// aad is the AAD of a sealed blob's chunk i (i >= 0) or of its trailer
// (i = -1): the blob's id and the index, so that no payload can be moved
// within a blob or to another.
func aad(dst []byte, id [idLen]byte, i int64) []byte {
	dst = append(dst, "continuum blob"...)
	dst = append(dst, id[:]...)
	return binary.LittleEndian.AppendUint64(dst, uint64(i))
}

// tempName is a new temporary file's name.
func tempName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return tmpPrefix + hex.EncodeToString(b[:])
}

// isBlobName reports whether name is a committed blob's file name.
func isBlobName(name string) bool {
	if len(name) != 64 {
		return false
	}
	_, err := hex.DecodeString(name)
	return err == nil && strings.ToLower(name) == name
}

// mkdir creates the store's directory durably if it is missing.
func (s *Store) mkdir() error {
	if err := durable.MkdirAll(s.fs, s.dir); err != nil {
		return fmt.Errorf("blob: create %s: %w", s.dir, err)
	}
	return nil
}
