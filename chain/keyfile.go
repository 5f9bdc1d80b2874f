package chain

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// MarshalSigningKey returns the signing key file for key under the signer
// name (format.go): one note signer key line, as
// golang.org/x/mod/sumdb/note.GenerateKey writes it. It holds the private
// key: keep it 0600 and outside the store.
func MarshalSigningKey(name string, key ed25519.PrivateKey) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: have %d bytes, want %d", ErrPrivateKey, len(key), ed25519.PrivateKeySize)
	}
	v, err := noteVerifier(name, key.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	data := base64.StdEncoding.EncodeToString(append([]byte{1}, key.Seed()...))
	return fmt.Appendf(nil, "PRIVATE+KEY+%s+%08x+%s\n", name, v.KeyHash(), data), nil
}

// ParseSigningKey reads a signing key file (format.go): exactly one note
// signer key line, blank lines and '#' comments ignored. It returns the
// signer name (the origin the key signs as) and the key, for
// engine.Options.SigningKey. The key hash in the line is checked, so a
// damaged file is an error, not another key.
func ParseSigningKey(b []byte) (name string, key ed25519.PrivateKey, err error) {
	found := 0
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		found++
		if found > 1 {
			return "", nil, fmt.Errorf("%w: signing key file line %d: more than one key", ErrParse, i+1)
		}
		s, err := note.NewSigner(line)
		if err != nil {
			return "", nil, fmt.Errorf("%w: signing key file line %d: %v", ErrParse, i+1, err)
		}
		// NewSigner checked the shape, the algorithm and the hash:
		// PRIVATE+KEY+name+hash+base64(0x01 || 32-byte seed).
		parts := strings.SplitN(line, "+", 5)
		raw, err := base64.StdEncoding.DecodeString(parts[4])
		if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != 1 {
			return "", nil, fmt.Errorf("%w: signing key file line %d: not an ed25519 key", ErrParse, i+1)
		}
		name, key = s.Name(), ed25519.NewKeyFromSeed(raw[1:])
	}
	if found == 0 {
		return "", nil, fmt.Errorf("%w: signing key file holds no key", ErrParse)
	}
	return name, key, nil
}
