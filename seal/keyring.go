package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
)

// Errors of this package; test with errors.Is.
var (
	// ErrAuth: a sealed payload or a wrapped key does not open: it was
	// changed, moved (other additional data) or sealed with another key.
	ErrAuth = errors.New("seal: authentication failed")
	// ErrUnknownKey: the keyring has no key of that id.
	ErrUnknownKey = errors.New("seal: no such key in the keyring")
	// ErrWrongKey: the keyring's key of that id did not wrap this data key.
	ErrWrongKey = errors.New("seal: the keyring's key does not open this data key")
	// ErrErased: the data key was erased; what it sealed cannot be opened.
	ErrErased = errors.New("seal: data key erased")
	// ErrCorrupt: a sealed payload or a key table does not decode.
	ErrCorrupt = errors.New("seal: corrupt")
	// ErrNoKey: a sealed payload names a data key its table never had
	// (the table is older than the payload, or another store's). It
	// matches ErrCorrupt too.
	ErrNoKey = errors.New("seal: no such data key in the key table")
)

// A Keyring holds the user's key-encryption keys, by id. The store keeps
// only data keys wrapped by them, and the id of the key that wrapped each.
// Implementations may call out to a KMS; they must be safe for concurrent
// use.
type Keyring interface {
	// Current is the id of the key that wraps new data keys.
	Current() string
	// Wrap seals dataKey with the key id.
	Wrap(id string, dataKey []byte) ([]byte, error)
	// Unwrap opens what Wrap(id, ...) returned. A keyring without id
	// returns an error matching ErrUnknownKey; a key that did not wrap it,
	// or a changed wrapped key, one matching ErrWrongKey.
	Unwrap(id string, wrapped []byte) ([]byte, error)
}

// StaticKeyring is a Keyring of 32-byte keys held in memory, wrapping with
// AES-256-GCM.
type StaticKeyring struct {
	current string
	aeads   map[string]cipher.AEAD
	rand    io.Reader
}

// NewKeyring returns a keyring of keys (id -> 32 bytes) that wraps new
// data keys with keys[current]. The keys are copied.
func NewKeyring(keys map[string][]byte, current string) (*StaticKeyring, error) {
	k := &StaticKeyring{current: current, aeads: make(map[string]cipher.AEAD, len(keys)), rand: rand.Reader}
	for id, key := range keys {
		if id == "" || len(id) > MaxKeyID {
			return nil, fmt.Errorf("seal: key id %q: must be 1 to %d bytes", id, MaxKeyID)
		}
		aead, err := newAEAD(key)
		if err != nil {
			return nil, fmt.Errorf("seal: key %q: %w", id, err)
		}
		k.aeads[id] = aead
	}
	if _, ok := k.aeads[current]; !ok {
		return nil, fmt.Errorf("seal: the current key %q is not among the keys", current)
	}
	return k, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("a key is %d bytes, not %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Current implements Keyring.
func (k *StaticKeyring) Current() string { return k.current }

// Wrap implements Keyring: nonce [12] | AES-256-GCM(dataKey) | tag [16],
// with additional data WrapAAD(id).
func (k *StaticKeyring) Wrap(id string, dataKey []byte) ([]byte, error) {
	aead, ok := k.aeads[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownKey, id)
	}
	out := make([]byte, NonceSize, NonceSize+len(dataKey)+TagSize)
	if _, err := io.ReadFull(k.rand, out); err != nil {
		return nil, fmt.Errorf("seal: nonce: %w", err)
	}
	return aead.Seal(out, out[:NonceSize], dataKey, WrapAAD(id)), nil
}

// Unwrap implements Keyring.
func (k *StaticKeyring) Unwrap(id string, wrapped []byte) ([]byte, error) {
	aead, ok := k.aeads[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownKey, id)
	}
	if len(wrapped) < NonceSize+TagSize {
		return nil, fmt.Errorf("%w %q: the wrapped key is %d bytes", ErrWrongKey, id, len(wrapped))
	}
	key, err := aead.Open(nil, wrapped[:NonceSize], wrapped[NonceSize:], WrapAAD(id))
	if err != nil {
		return nil, fmt.Errorf("%w %q", ErrWrongKey, id)
	}
	return key, nil
}
