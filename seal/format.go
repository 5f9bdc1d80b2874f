package seal

// The formats of this package. Every constant in this file is frozen: a
// store written by one version must stay readable by every later one.
//
// A sealed payload:
//
//	+------+------------------+-----------+----------------------------+
//	| 0xc5 | uvarint key no   | nonce [12]| ciphertext | GCM tag [16]  |
//	+------+------------------+-----------+----------------------------+
//
// The first byte (Magic) is outside frame.Codec's range, so a sealed
// payload can stand where a compressed one does and be told from it by its
// first byte. key no names the data key in the key table. The GCM
// additional data is the caller's: the place the payload belongs to.
//
// A key table (the body of the store's key file; its framing and checksum
// are the file's):
//
//	"CKEY" | version 1 | uvarint n | n x entry
//	entry  = uvarint key no | uvarint len | scope | state
//	         | uvarint len | wrapping key id | uvarint len | wrapped key
//
// Entries are in ascending key no, each no once. scope is "" for the
// store, a run id, or a run id, a NUL byte and a memory key (MemoryScope:
// the keys of an erasable memory key's values). state is 1 live, 2
// erased, 3 erasing (live, its scope's erasure begun and not finished:
// the owner finishes or undoes it when it next opens the table); an
// erased entry has an empty key id and wrapped key. A wrapped key is the Keyring's encoding
// (StaticKeyring: nonce [12] | AES-256-GCM(data key) | tag [16], AAD
// WrapAAD(id)).

const (
	// Magic is the first byte of a sealed payload.
	Magic byte = 0xc5
	// NonceSize and TagSize are AES-GCM's.
	NonceSize = 12
	TagSize   = 16
	// KeySize is the size of a data key and of a StaticKeyring key.
	KeySize = 32
	// Overhead is the most a sealed payload adds to its plaintext besides
	// the key number's varint: the magic byte, the nonce and the tag.
	Overhead = 1 + NonceSize + TagSize

	tableMagic   = "CKEY"
	tableVersion = 1

	stateLive    = 1
	stateErased  = 2
	stateErasing = 3

	// MaxScope bounds a scope (a run id), MaxKeyID a wrapping key's id and
	// MaxWrapped a wrapped data key, in bytes.
	MaxScope   = 4 << 10
	MaxKeyID   = 256
	MaxWrapped = 1 << 10
	// MaxSeals is how many payloads one data key may seal: a quarter of
	// AES-GCM's 2^32 bound for random nonces.
	MaxSeals = 1 << 30
)

// WrapAAD is the additional data a StaticKeyring binds a wrapped data key
// to: the id of the key that wraps it.
func WrapAAD(id string) []byte { return []byte("continuum/seal data key wrapped by " + id) }
