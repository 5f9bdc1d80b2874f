package seal

import (
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"io"
	"sync/atomic"
)

// A Key is a data key, ready to seal and open payloads. It is safe for
// concurrent use.
type Key struct {
	no    uint64
	aead  cipher.AEAD
	seals atomic.Uint64 // payloads sealed by this process
	rand  io.Reader
}

func newKey(no uint64, raw []byte, r io.Reader) (*Key, error) {
	aead, err := newAEAD(raw)
	if err != nil {
		return nil, err
	}
	return &Key{no: no, aead: aead, rand: r}, nil
}

// No is the key's number in its table: sealed payloads name it.
func (k *Key) No() uint64 { return k.no }

// Sealed reports how many payloads k sealed in this process; its owner
// starts a new data key before MaxSeals.
func (k *Key) Sealed() uint64 { return k.seals.Load() }

// Seal appends to dst the sealed form of plain, bound to aad (Magic, the
// key number, a random nonce, the ciphertext and its tag). It fails only
// when the system's randomness does or k has sealed MaxSeals payloads.
func (k *Key) Seal(dst, plain, aad []byte) ([]byte, error) {
	if k.seals.Add(1) > MaxSeals {
		return dst, fmt.Errorf("seal: data key %d has sealed %d payloads, its bound; start a new one", k.no, MaxSeals)
	}
	dst = append(dst, Magic)
	dst = binary.AppendUvarint(dst, k.no)
	n := len(dst)
	dst = append(dst, make([]byte, NonceSize)...)
	if _, err := io.ReadFull(k.rand, dst[n:]); err != nil {
		return dst[:n-1-uvarintLen(k.no)], fmt.Errorf("seal: nonce: %w", err)
	}
	return k.aead.Seal(dst, dst[n:n+NonceSize], plain, aad), nil
}

// KeyNo returns the number of the data key that sealed payload, without
// opening it.
func KeyNo(sealed []byte) (uint64, error) {
	no, _, err := parse(sealed)
	return no, err
}

// IsSealed reports whether b starts as a sealed payload does.
func IsSealed(b []byte) bool { return len(b) > 0 && b[0] == Magic }

func parse(sealed []byte) (no uint64, body []byte, err error) {
	if len(sealed) == 0 || sealed[0] != Magic {
		return 0, nil, fmt.Errorf("%w: not a sealed payload", ErrCorrupt)
	}
	no, w := binary.Uvarint(sealed[1:])
	if w <= 0 || w != uvarintLen(no) {
		return 0, nil, fmt.Errorf("%w: sealed payload: bad key number", ErrCorrupt)
	}
	body = sealed[1+w:]
	if len(body) < NonceSize+TagSize {
		return 0, nil, fmt.Errorf("%w: sealed payload of %d bytes, shorter than nonce and tag", ErrCorrupt, len(sealed))
	}
	return no, body, nil
}

// Open appends to dst the plaintext of sealed, which must have been
// sealed with additional data aad. key looks up the data key by number;
// its error is returned as is. A payload that was changed, moved or sealed
// with another key is an error matching ErrAuth; one that does not parse,
// ErrCorrupt.
func Open(dst, sealed, aad []byte, key func(no uint64) (*Key, error)) ([]byte, error) {
	no, body, err := parse(sealed)
	if err != nil {
		return dst, err
	}
	k, err := key(no)
	if err != nil {
		return dst, err
	}
	out, err := k.aead.Open(dst, body[:NonceSize], body[NonceSize:], aad)
	if err != nil {
		return dst, fmt.Errorf("%w: data key %d", ErrAuth, no)
	}
	return out, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
