package chain

import "errors"

// Sentinel errors. Callers test with errors.Is; the wrapping error says where.
var (
	// ErrParse reports a checkpoint, store head, hash, public key or state
	// that is not in the documented format (see format.go).
	ErrParse = errors.New("chain: malformed input")
	// ErrBadSignature reports a signature that is missing, made by another
	// key, or does not verify against the trusted public key.
	ErrBadSignature = errors.New("chain: bad signature")
	// ErrKeySize reports a keyed-mode secret key that is not KeySize bytes.
	ErrKeySize = errors.New("chain: key must be 32 bytes")
	// ErrSignerName reports a signer name the note format cannot carry
	// (empty, with spaces or '+', or invalid UTF-8).
	ErrSignerName = errors.New("chain: invalid signer name")
	// ErrPrivateKey reports an Ed25519 private key of the wrong size.
	ErrPrivateKey = errors.New("chain: invalid ed25519 private key")
	// ErrPublicKey reports an Ed25519 public key of the wrong size.
	ErrPublicKey = errors.New("chain: invalid ed25519 public key")
)
