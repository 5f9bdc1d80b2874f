package chain

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/zeebo/blake3"
)

// Hash is a 32-byte BLAKE3 chain head: h(n) for a run at seq n.
type Hash [32]byte

// String returns the lowercase hex form (64 characters).
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// IsZero reports whether h is all zero bytes (no head yet).
func (h Hash) IsZero() bool { return h == Hash{} }

// ParseHash parses the 64-character hex form written by String.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("%w: hash %q: want %d hex characters, have %d", ErrParse, truncate(s), 2*len(h), len(s))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return Hash{}, fmt.Errorf("%w: hash %q: %v", ErrParse, truncate(s), err)
	}
	return h, nil
}

// Nonce is the 16-byte random value stored in a run's creation record. It
// makes h(0) unpredictable, so two runs with the same id (for example a run
// deleted and created again) never share a chain.
type Nonce [16]byte

// NewNonce returns a fresh nonce from crypto/rand.
func NewNonce() (Nonce, error) {
	var n Nonce
	if _, err := rand.Read(n[:]); err != nil {
		return Nonce{}, fmt.Errorf("chain: reading random nonce: %w", err)
	}
	return n, nil
}

// String returns the lowercase hex form (32 characters).
func (n Nonce) String() string { return hex.EncodeToString(n[:]) }

// KeySize is the size of the secret key of keyed mode.
const KeySize = 32

// Hasher computes chain links. It is safe for concurrent use: each call
// borrows a BLAKE3 state from a pool and returns it, so the hot path does not
// allocate.
type Hasher struct {
	keyed bool
	// proto is the initial state (derive-key context or keyed subkey
	// applied); pooled states are copies of it. Never written after
	// NewHasher.
	proto *blake3.Hasher
	pool  sync.Pool // of *hashState
}

// hashState is one pooled BLAKE3 state plus a scratch buffer for the
// fixed-size header, so Link never allocates.
type hashState struct {
	h   *blake3.Hasher
	hdr [maxHeader]byte
	out [32]byte
}

// NewHasher returns a Hasher. A nil or empty key selects unkeyed mode (BLAKE3
// derive-key mode with the context string ContextRecord): anyone can compute
// and check hashes. A non-empty key must be KeySize bytes and selects keyed
// mode: BLAKE3 keyed with a subkey derived from key under ContextKeyed, so
// hashes cannot be recomputed (or checked) without the key.
func NewHasher(key []byte) (*Hasher, error) {
	h := &Hasher{}
	switch {
	case len(key) == 0:
		h.proto = blake3.NewDeriveKey(ContextRecord)
	case len(key) != KeySize:
		return nil, fmt.Errorf("%w: have %d bytes, want %d", ErrKeySize, len(key), KeySize)
	default:
		var sub [32]byte
		blake3.DeriveKey(ContextKeyed, key, sub[:])
		p, err := blake3.NewKeyed(sub[:])
		if err != nil {
			return nil, fmt.Errorf("chain: keyed hasher: %w", err)
		}
		h.proto = p
		h.keyed = true
	}
	h.pool.New = func() any { return &hashState{h: h.proto.Clone()} }
	return h, nil
}

// Keyed reports whether h was built with a secret key.
func (h *Hasher) Keyed() bool { return h.keyed }

// Genesis returns h(0) for a run: the hash of the genesis domain tag, the run
// id and the run's nonce. See format.go for the exact bytes.
func (h *Hasher) Genesis(runID string, nonce Nonce) Hash {
	st := h.pool.Get().(*hashState)
	st.h.Reset()
	b := st.hdr[:0]
	b = append(b, tagGenesis)
	b = binary.BigEndian.AppendUint32(b, uint32(len(runID)))
	st.h.Write(b)
	st.h.WriteString(runID)
	st.h.Write(nonce[:])
	var out Hash
	st.h.Sum(st.out[:0])
	out = st.out
	h.pool.Put(st)
	return out
}

// ForkGenesis returns h(at) for a run forked from parent at seq at, whose
// head there was parentHead: the hash of the fork domain tag, the run id,
// its nonce, the parent id, at and parentHead. See format.go.
func (h *Hasher) ForkGenesis(runID string, nonce Nonce, parent string, at uint64, parentHead Hash) Hash {
	st := h.pool.Get().(*hashState)
	st.h.Reset()
	b := st.hdr[:0]
	b = append(b, tagFork)
	b = binary.BigEndian.AppendUint32(b, uint32(len(runID)))
	st.h.Write(b)
	st.h.WriteString(runID)
	st.h.Write(nonce[:])
	b = binary.BigEndian.AppendUint32(st.hdr[:0], uint32(len(parent)))
	st.h.Write(b)
	st.h.WriteString(parent)
	b = binary.BigEndian.AppendUint64(st.hdr[:0], at)
	st.h.Write(b)
	st.h.Write(parentHead[:])
	var out Hash
	st.h.Sum(st.out[:0])
	out = st.out
	h.pool.Put(st)
	return out
}

// Link returns h(seq) = H(tag, run id, seq, prev, len(payload), payload).
// prev is h(seq-1) (Genesis for seq 1). It does not allocate.
func (h *Hasher) Link(runID string, seq uint64, prev Hash, payload []byte) Hash {
	return h.LinkParts(runID, seq, prev, payload, nil)
}

// LinkParts is Link over the payload body followed by tail, hashed where
// they lie: a writer that holds a payload in two pieces (an atom's body
// and its results' digests) need not copy them together. It does not
// allocate.
func (h *Hasher) LinkParts(runID string, seq uint64, prev Hash, body, tail []byte) Hash {
	st := h.pool.Get().(*hashState)
	st.h.Reset()
	b := st.hdr[:0]
	b = append(b, tagRecord)
	b = binary.BigEndian.AppendUint32(b, uint32(len(runID)))
	st.h.Write(b)
	st.h.WriteString(runID)
	b = st.hdr[:0]
	b = binary.BigEndian.AppendUint64(b, seq)
	b = append(b, prev[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(body)+len(tail)))
	st.h.Write(b)
	st.h.Write(body)
	st.h.Write(tail)
	st.h.Sum(st.out[:0])
	out := Hash(st.out)
	h.pool.Put(st)
	return out
}

func truncate(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// MarshalText writes the hex form, so a Hash is a JSON string.
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText reads the hex form.
func (h *Hash) UnmarshalText(b []byte) error {
	v, err := ParseHash(string(b))
	if err != nil {
		return err
	}
	*h = v
	return nil
}
