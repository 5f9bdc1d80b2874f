// Package seal is CONTINUUM's authenticated encryption at rest: the
// envelope of a sealed payload, the data keys that seal payloads, the
// user's keyring that wraps them, and the key table that stores the
// wrapped data keys.
//
// Envelope encryption: every payload is sealed with AES-256-GCM under a
// data key, 32 random bytes; a data key is never stored in the clear but
// wrapped by a key-encryption key of the user's Keyring, named by its id.
// Rotating the user's key is cheap: new data keys are wrapped with the new
// key, old ones stay readable as long as the keyring holds the old key,
// and Table.Rewrap re-wraps every data key under the current key (after
// which the old key can be retired) without touching the sealed data.
//
// A data key has a scope: the store, or one run. Erasing a run's content
// is crypto-shredding: its data key is dropped from the table (Table.Erase
// keeps the entry, marked erased, so that a reader can tell an erased run
// from a damaged one) and what it sealed can no longer be opened by anyone,
// wherever copies of the log went.
//
// Usage:
//
//	ring, err := seal.NewKeyring(map[string][]byte{"k1": master}, "k1")
//	var t seal.Table
//	dk, err := t.Add(ring, "run-42")        // a new data key for a run
//	sealed, err := dk.Seal(nil, plain, aad) // aad binds it to its place
//	...
//	keys, err := t.Open(ring)               // unwrap every live data key
//	plain, err := seal.Open(nil, sealed, aad, keys.Key)
//
// # Guarantees
//
//   - A sealed payload opens only with its data key and the same
//     additional data (AAD): a byte changed anywhere, a payload moved to
//     another place whose AAD differs, or a wrong key is an error matching
//     ErrAuth, never garbage.
//   - A wrong or missing user key is an error at Table.Open (ErrUnknownKey,
//     ErrWrongKey), before any payload is read.
//   - Nonces are 96 bits: a random base per data key and process
//     (crypto/rand, drawn at the key's first seal) plus a counter, so that
//     sealing reads no randomness per payload. Across the processes that
//     load a key, a nonce repeats with probability at most (P-1)N/2^96 for
//     P loads sealing N payloads in all, never more than twice that of a
//     random nonce per payload (the argument is at Key). AES-GCM's bound
//     for random nonces is 2^32 payloads per key; a data key seals at most
//     MaxSeals payloads in one process (Key.Seal refuses more), and its
//     owner starts a new data key well before that.
//   - Decoders never panic on any input (fuzzed).
//
// # Caveats
//
//   - The key table is as precious as the log: without it nothing sealed
//     can be opened. Back them up together.
//   - Sealing hides content, not sizes, counts or timing.
//   - The keyring is the user's: this package neither stores nor derives
//     the key-encryption keys.
package seal
