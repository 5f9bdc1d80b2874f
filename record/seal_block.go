package record

// Derived files sealed per block (WAITS, layout/waitsseal.go): each block
// sealed on its own with the store's key, so that a reader opens only the
// blocks it reads. The additional data of block n is the file's place
// (AppendAAD: the store, the kind, the run "" and the checkpoint
// generation), then bind (the file's header: its length, its blocks, its
// id) and n:
//
//	AppendAAD(store, kind, "", gen) | uvarint len | bind | uvarint n
//
// so that a block does not open at another index, in another file (of
// another generation, or of the same one: the header's id differs), nor
// under a header changed in any byte.

import (
	"encoding/binary"
	"fmt"

	"github.com/continuumdb/continuum/seal"
)

// PlaceWaitsBlock is the kind of the place of a block of WAITS sealed per
// block (layout/waitsseal.go). It is no record kind.
const PlaceWaitsBlock Kind = 0xf6

// BlockSealer seals the blocks of one derived file, all with the one data
// key that was the store's newest when it was made: every block of the
// file names that key, so that each sealed block of a given plaintext
// length has the same length.
type BlockSealer struct {
	s   *Sealer
	key *seal.Key
	k   Kind
	gen uint64
}

// StoreBlockSealer returns the BlockSealer of a file of kind k of
// checkpoint generation gen, with the store's key.
func (s *Sealer) StoreBlockSealer(k Kind, gen uint64) (*BlockSealer, error) {
	key, ok := s.Keys.Scope("")
	if !ok {
		return nil, fmt.Errorf("record: the store has no data key in the key table")
	}
	return &BlockSealer{s: s, key: key, k: k, gen: gen}, nil
}

// KeyNo is the number of the data key the blocks name.
func (b *BlockSealer) KeyNo() uint64 { return b.key.No() }

// SealedLen is the length of a block of n plaintext bytes sealed with the
// data key numbered no.
func SealedLen(n int, no uint64) int {
	var v [binary.MaxVarintLen64]byte
	return seal.Overhead + binary.PutUvarint(v[:], no) + n
}

// Seal appends block n of the file, plain, sealed and bound to bind (the
// file's header) and n.
func (b *BlockSealer) Seal(dst, plain, bind []byte, n uint64) ([]byte, error) {
	aad := appendBlockAAD(make([]byte, 0, 64+len(bind)), b.s.Store, b.k, b.gen, bind, n)
	return b.key.Seal(dst, plain, aad)
}

// OpenStoreBlock appends the plaintext of sealed, block n of a file of
// kind k of generation gen whose header is bind, as BlockSealer.Seal
// sealed it. A block changed, moved, or of another file matches
// seal.ErrAuth.
func (s *Sealer) OpenStoreBlock(dst, sealed []byte, k Kind, gen uint64, bind []byte, n uint64) ([]byte, error) {
	var buf [192]byte
	return seal.Open(dst, sealed, appendBlockAAD(buf[:0], s.Store, k, gen, bind, n), s.Keys.Key)
}

func appendBlockAAD(dst []byte, store [16]byte, k Kind, gen uint64, bind []byte, n uint64) []byte {
	dst = AppendAAD(dst, store, k, "", gen)
	dst = AppendBytes(dst, bind)
	return binary.AppendUvarint(dst, n)
}
