package record

import (
	"fmt"

	"github.com/continuumdb/continuum/seal"
)

// PlaceBlob is the kind of a sealed blob payload's place (AppendAAD, with
// the run that owns the data key and seq 0), followed by the blob's own
// AAD (its id and the payload's index, package blob). It is no record
// kind: the blob store seals with it.
const PlaceBlob Kind = 0xf4

// BlobSealer is a blob.Sealer of an encrypted store: it seals a run's
// blobs with a data key of the run (Key, the run's newest when the blob
// is written) and names them by a MAC of their hash under a key derived
// from that data key (seal.Key.NameOf), so that erasing the run's keys
// makes its blobs unreadable and their names meaningless. Opening takes
// any live key of the store that the payload names.
type BlobSealer struct {
	Store [16]byte
	Run   string
	Key   *seal.Key  // names and seals
	Keys  *seal.Keys // opens
}

// Seal seals plain for the blob AAD aad.
func (b *BlobSealer) Seal(dst, plain, aad []byte) ([]byte, error) {
	if b.Key == nil {
		return dst, fmt.Errorf("record: run %q has no data key in the key table", b.Run)
	}
	return b.Key.Seal(dst, plain, b.aad(aad))
}

// Open opens what Seal sealed; a payload of an erased key matches
// seal.ErrErased, one changed or moved seal.ErrAuth.
func (b *BlobSealer) Open(dst, sealed, aad []byte) ([]byte, error) {
	return seal.Open(dst, sealed, b.aad(aad), b.Keys.Key)
}

// Name is the keyed name of a blob of hash.
func (b *BlobSealer) Name(hash [32]byte) [32]byte { return b.Key.NameOf(hash) }

// Overhead is the most Seal adds: the envelope's magic, key number,
// nonce and tag.
func (b *BlobSealer) Overhead() int { return 1 + 10 + seal.NonceSize + seal.TagSize }

func (b *BlobSealer) aad(blobAAD []byte) []byte {
	a := AppendAAD(make([]byte, 0, 96+len(b.Run)+len(blobAAD)), b.Store, PlaceBlob, b.Run, 0)
	return append(a, blobAAD...)
}

// BlobSealers returns a sealer of run's blobs per live data key of the
// run, the newest first (a blob is named under the key that wrote it):
// none if the run has no live key (erased).
func (s *Sealer) BlobSealers(run string) []*BlobSealer {
	keys := s.Keys.ScopeKeys(run)
	out := make([]*BlobSealer, len(keys))
	for i, k := range keys {
		out[i] = &BlobSealer{Store: s.Store, Run: run, Key: k, Keys: s.Keys}
	}
	return out
}
