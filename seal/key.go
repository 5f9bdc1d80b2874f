package seal

import (
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/zeebo/blake3"
)

// A Key is a data key, ready to seal and open payloads. It is safe for
// concurrent use.
//
// Nonces: the n-th payload a Key seals (n from 0) has the nonce base + n,
// a 96-bit big-endian sum modulo 2^96, where base is drawn once from the
// random source, when the Key first seals. Within one Key the nonces are
// distinct: n is an atomic counter below MaxSeals < 2^96. The same data
// key is loaded again by every Open of its store, each load (a Key value)
// with its own base, and the loads' nonces are the intervals [base, base+n)
// they used: two loads that sealed n_a and n_b payloads share a nonce only
// if their bases lie within n_a + n_b - 1 of each other, with probability
// (n_a+n_b-1)/2^96. Over P loads that sealed N payloads in all, the union
// bound is (P-1)N/2^96 <= N^2/2^96; a random nonce per payload has
// N(N-1)/2^97. The construction is thus never worse than random nonces by
// more than a factor of two (every load sealing one payload), and much
// better when each load seals many: 2^20 loads of 2^10 payloads each is
// 2^-46 here, 2^-37 with random nonces. GCM's own counter blocks never
// overlap across payloads: with a 96-bit nonce they are nonce || counter,
// and the nonces differ. Only the first seal of each load reads the
// random source (one getrandom per data key and process, not per
// payload).
type Key struct {
	no   uint64
	aead cipher.AEAD
	// names is the key that names what this data key seals by content
	// (NameOf): derived from the data key, immutable.
	names [32]byte
	// seals counts the payloads this Key sealed or tried to: the next
	// seal's n (see above).
	seals atomic.Uint64
	rand  io.Reader // base's source
	// base is the nonce of this Key's first payload; set once (baseOnce),
	// with baseErr if the source failed, then immutable.
	baseOnce sync.Once
	base     [NonceSize]byte
	baseErr  error
}

func newKey(no uint64, raw []byte, r io.Reader) (*Key, error) {
	aead, err := newAEAD(raw)
	if err != nil {
		return nil, err
	}
	k := &Key{no: no, aead: aead, rand: r}
	blake3.DeriveKey(nameContext, raw, k.names[:])
	return k, nil
}

// nameContext derives a data key's naming key (NameOf) from it.
const nameContext = "continuum seal content name v1"

// NameOf returns the keyed name of the content whose hash is sum: a MAC
// of sum under a key derived from k's (BLAKE3 keyed mode), so that equal
// content sealed with k has one name and the name tells nothing of the
// content to anyone without k. Erasing k makes the names meaningless.
func (k *Key) NameOf(sum [32]byte) (name [32]byte) {
	h, _ := blake3.NewKeyed(k.names[:])
	_, _ = h.Write(sum[:])
	h.Sum(name[:0])
	return name
}

// No is the key's number in its table: sealed payloads name it.
func (k *Key) No() uint64 { return k.no }

// Sealed reports how many payloads k sealed in this process; its owner
// starts a new data key before MaxSeals.
func (k *Key) Sealed() uint64 { return k.seals.Load() }

// Seal appends to dst the sealed form of plain, bound to aad (Magic, the
// key number, the nonce, the ciphertext and its tag). It fails only when
// the system's randomness does (at k's first seal; the failure is then
// k's for good) or k has sealed MaxSeals payloads.
func (k *Key) Seal(dst, plain, aad []byte) ([]byte, error) {
	n := k.seals.Add(1) - 1
	if n >= MaxSeals {
		return dst, fmt.Errorf("seal: data key %d has sealed %d payloads, its bound; start a new one", k.no, uint64(MaxSeals))
	}
	k.baseOnce.Do(func() {
		if _, err := io.ReadFull(k.rand, k.base[:]); err != nil {
			k.baseErr = fmt.Errorf("seal: nonce of data key %d: %w", k.no, err)
		}
	})
	if k.baseErr != nil {
		return dst, k.baseErr
	}
	dst = append(dst, Magic)
	dst = binary.AppendUvarint(dst, k.no)
	dst = appendNonce(dst, &k.base, n)
	return k.aead.Seal(dst, dst[len(dst)-NonceSize:], plain, aad), nil
}

// appendNonce appends base + n, 96 bits big-endian, modulo 2^96.
func appendNonce(dst []byte, base *[NonceSize]byte, n uint64) []byte {
	hi := binary.BigEndian.Uint32(base[:4])
	lo := binary.BigEndian.Uint64(base[4:])
	sum, carry := bits.Add64(lo, n, 0)
	dst = binary.BigEndian.AppendUint32(dst, hi+uint32(carry))
	return binary.BigEndian.AppendUint64(dst, sum)
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
