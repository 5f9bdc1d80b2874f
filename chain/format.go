package chain

// This file holds every byte format of the chain package. The constants
// below are frozen: changing any of them changes every hash and signature
// ever written, so a change means a new version (new context strings, new
// header lines), never an edit.
//
// # Record hash (version 1)
//
// Unkeyed mode is BLAKE3 derive-key mode with context ContextRecord. Keyed
// mode is BLAKE3 keyed mode with subkey = BLAKE3-DeriveKey(ContextKeyed,
// secret key). In both modes the hashed input is:
//
//	genesis h(0):
//	+------+-------------+--------+-------------+
//	| 0x00 | len(run) u32| run id | nonce (16B) |
//	+------+-------------+--------+-------------+
//
//	record h(n), n >= 1:
//	+------+-------------+--------+---------+-------------+-----------------+---------+
//	| 0x01 | len(run) u32| run id | seq u64 | h(n-1) (32B)| len(payload) u64| payload |
//	+------+-------------+--------+---------+-------------+-----------------+---------+
//
//	fork genesis h(at) of a run forked from parent at seq at:
//	+------+-------------+--------+-------------+----------------+-----------+--------+------------------+
//	| 0x02 | len(run) u32| run id | nonce (16B) | len(parent) u32| parent id | at u64 | parent h(at) 32B |
//	+------+-------------+--------+-------------+----------------+-----------+--------+------------------+
//
// A fork's chain starts at seq at with its fork genesis (it has no h(0)..
// h(at-1) of its own: those seqs are its parent's), so it commits to the
// parent, the fork point and the parent's head there.
//
// Integers are big-endian. The tag byte separates genesis, fork genesis and
// record inputs; the length prefixes make the encoding injective.
//
// # Checkpoint (version 1)
//
// A checkpoint is a golang.org/x/mod/sumdb/note text. Unsigned (no signing
// key configured) it is the text alone; signed, the text is followed by a
// blank line and one signature line per key ("— <name> <base64(keyhash ||
// ed25519 sig)>"). The text is exactly these lines, each ending in '\n':
//
//	continuum checkpoint v1
//	store <Go-quoted store id>
//	run <Go-quoted run id>
//	seq <decimal, no leading zeros>
//	head <64 lowercase hex>
//	final          (only when the run ended)
//
// Ids are written with strconv.Quote, so any byte string round-trips and the
// text never holds control characters; parsing accepts only the canonical
// quoting, so one checkpoint has exactly one text.
//
// # Store head (version 1)
//
//	continuum store-head v1
//	store <Go-quoted store id>
//	run <Go-quoted run id> <seq> <64 hex head>     (zero or more, sorted by run id, unique)
//
// A store head lists, for every run, its latest checkpoint. It is signed
// like a checkpoint.
//
// # Public key file
//
// The file `continuumctl verify --pubkey F` reads is one line holding a
// note verifier key, "<name>+<8 hex key hash>+<base64(0x01 || 32-byte
// ed25519 public key)>", as golang.org/x/mod/sumdb/note.NewEd25519VerifierKey
// writes it. Blank lines and lines starting with '#' are ignored. The name
// is the origin the key signs as: OriginName of the store's id,
// "continuum-<first 16 hex digits of the store id>", the name the engine
// signs under; verify checks it against the store (VerifyOptions.Origin).
//
// # Signing key file
//
// The file `continuumctl keygen` writes beside the public key file (mode
// 0600; keep it outside the store) is one line holding a note signer key,
// "PRIVATE+KEY+<name>+<8 hex key hash>+<base64(0x01 || 32-byte ed25519
// seed)>", as golang.org/x/mod/sumdb/note.GenerateKey writes it, with the
// same name and key hash as the public key file. Blank lines and lines
// starting with '#' are ignored.
//
// # Trusted state (JSON, version 1)
//
//	{"version":1,"store":"<store id>","runs":[{"run":"<id>","seq":<n>,"head":"<64 hex>"},...]}
//
// Runs are sorted by id; MarshalJSON always writes this exact shape.

const (
	// ContextRecord is the BLAKE3 derive-key context of unkeyed chains.
	ContextRecord = "continuumdb.org 2026-11-29 chain record hash v1"
	// ContextKeyed derives the keyed-mode BLAKE3 key from the secret key.
	ContextKeyed = "continuumdb.org 2026-11-29 chain keyed record hash v1"

	tagGenesis = 0x00
	tagRecord  = 0x01
	tagFork    = 0x02

	// maxHeader is the largest fixed-size part of a hash input written at
	// once: seq (8) + prev (32) + payload length (8).
	maxHeader = 8 + 32 + 8

	checkpointHeader = "continuum checkpoint v1"
	storeHeadHeader  = "continuum store-head v1"

	// stateVersion is the "version" of the trusted-state JSON.
	stateVersion = 1

	// maxNoteSize bounds what ParseCheckpoint and ParseStoreHead accept,
	// so a damaged length cannot make them read or allocate without limit.
	maxNoteSize = 64 << 20
)
