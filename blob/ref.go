package blob

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/zeebo/blake3"
)

// ChunkSize is the plaintext size of every chunk but a blob's last.
const ChunkSize = 1 << 20

// MaxMediaType bounds a Ref's media type.
const MaxMediaType = 255

// Ref is what a record holds of a blob: its hash (the tree hash of the
// package doc), its size in bytes, and its media type ("" when unknown).
type Ref struct {
	Hash  [32]byte
	Size  int64
	Media string
}

// String is the Ref as "blake3t:<hex>/<size>" and its media type.
func (r Ref) String() string {
	s := fmt.Sprintf("blake3t:%s/%d", hex.EncodeToString(r.Hash[:]), r.Size)
	if r.Media != "" {
		s += " " + r.Media
	}
	return s
}

// refVersion is the first byte of an encoded Ref.
const refVersion = 1

// AppendRef appends r's binary encoding to dst: a version byte, the hash,
// the size as a uvarint, and the media type (uvarint length, bytes).
func AppendRef(dst []byte, r Ref) []byte {
	dst = append(dst, refVersion)
	dst = append(dst, r.Hash[:]...)
	dst = binary.AppendUvarint(dst, uint64(r.Size))
	dst = binary.AppendUvarint(dst, uint64(len(r.Media)))
	return append(dst, r.Media...)
}

// ErrRef is returned for a Ref's encoding that does not parse.
var ErrRef = errors.New("blob: malformed reference")

// ParseRef decodes a Ref from the front of b and returns the bytes after
// it. Any malformed input is an error matching ErrRef.
func ParseRef(b []byte) (Ref, []byte, error) {
	var r Ref
	if len(b) < 1+32 || b[0] != refVersion {
		return r, nil, fmt.Errorf("%w: %d bytes, version %v", ErrRef, len(b), first(b))
	}
	copy(r.Hash[:], b[1:33])
	b = b[33:]
	size, n := uvarint(b)
	if n <= 0 || size > 1<<62 {
		return r, nil, fmt.Errorf("%w: size", ErrRef)
	}
	b = b[n:]
	ml, n := uvarint(b)
	if n <= 0 || ml > MaxMediaType || uint64(len(b)-n) < ml {
		return r, nil, fmt.Errorf("%w: media type", ErrRef)
	}
	b = b[n:]
	if !utf8.Valid(b[:ml]) {
		return r, nil, fmt.Errorf("%w: media type is not UTF-8", ErrRef)
	}
	r.Size, r.Media = int64(size), string(b[:ml])
	return r, b[ml:], nil
}

// uvarint is binary.Uvarint refusing a value not in its shortest form
// (n = -1), so that a Ref has one encoding.
func uvarint(b []byte) (uint64, int) {
	v, n := binary.Uvarint(b)
	if n > 1 && b[n-1] == 0 {
		return 0, -1
	}
	return v, n
}

func first(b []byte) any {
	if len(b) == 0 {
		return "none"
	}
	return b[0]
}

// chunkCount is the number of chunks of a blob of size bytes (an empty
// blob has none).
func chunkCount(size int64) int64 { return (size + ChunkSize - 1) / ChunkSize }

// chunkLen is the plaintext length of chunk i of a blob of size bytes.
func chunkLen(size, i int64) int {
	if rest := size - i*ChunkSize; rest < ChunkSize {
		return int(rest)
	}
	return ChunkSize
}

// The contexts of the two hashes (BLAKE3's key derivation mode), so that
// neither can be taken for the other or for any other BLAKE3 of the store.
const (
	chunkContext = "continuum blob chunk v1"
	treeContext  = "continuum blob v1"
)

// newChunkHasher returns a hasher of chunks, for chunkHash.
func newChunkHasher() *blake3.Hasher { return blake3.NewDeriveKey(chunkContext) }

// chunkHash is c_i of the package doc.
func chunkHash(h *blake3.Hasher, chunk []byte) (sum [32]byte) {
	h.Reset()
	_, _ = h.Write(chunk)
	h.Sum(sum[:0])
	return sum
}

// treeHash is h of the package doc over the chunk hashes in list (32
// bytes each).
func treeHash(size int64, list []byte) (sum [32]byte) {
	h := blake3.NewDeriveKey(treeContext)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(size))
	_, _ = h.Write(n[:])
	_, _ = h.Write(list)
	h.Sum(sum[:0])
	return sum
}

// Hash returns the Ref hash of b, as a Writer would compute it.
func Hash(b []byte) [32]byte {
	h := newChunkHasher()
	list := make([]byte, 0, 32*chunkCount(int64(len(b))))
	for off := 0; off < len(b); off += ChunkSize {
		c := chunkHash(h, b[off:min(off+ChunkSize, len(b))])
		list = append(list, c[:]...)
	}
	return treeHash(int64(len(b)), list)
}
