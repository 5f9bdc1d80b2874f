// Package blob stores large values outside the log: tool outputs, pages,
// screenshots, attachments. A blob is written and read as a stream, never
// whole in memory, and stored once per content: the record that uses it
// holds only its Ref (hash, size, media type), and the hash, being part of
// that chained record, is what proves the blob's bytes.
//
// # Format
//
// A blob is cut into chunks of ChunkSize plaintext bytes (the last one
// shorter). Its hash is a tree over them:
//
//	chunk hash  c_i = BLAKE3-256(derive "continuum blob chunk v1"; chunk i)
//	blob hash   h   = BLAKE3-256(derive "continuum blob v1"; size (8 bytes LE) || c_0 || ... || c_n-1)
//
// so that a reader checks each chunk against the list of chunk hashes
// before it hands out a byte of it, and the list against h, which the Ref
// holds: no unverified byte ever leaves a Reader. The file, blobs/<name>:
//
//	header   "CBLB" | version 1 | flags (bit 0: sealed) | 2 zero bytes
//	         | id (16 random bytes) | CRC-32C of the 24 bytes before it
//	chunk i  stored length u32 LE | kind u8 (0 stored, 1 s2) | payload
//	         | CRC-32C of kind and payload
//	trailer  the chunk hashes (32 bytes each; sealed as one payload in a
//	         sealed blob) | size u64 LE | chunk count u64 LE
//	         | the list's stored length u32 LE | CRC-32C of the trailer before it
//
// A chunk's payload is compressed with s2 when that saves at least an
// eighth, and then, in a sealed blob, sealed with AAD binding it to the
// blob's id and its index (the trailer's to the id and -1), so no payload
// can be moved within a blob or to another. A plaintext blob is named by hex(h); a sealed
// one by its Sealer's keyed name of h, which tells nothing of the content
// to anyone without the key (a name computable from the content alone
// would confirm a guess of it). The same bytes under the same key (a run,
// its forks, every atom) are stored once; under different keys, once per
// key.
//
// # Durability
//
// A Writer writes a temporary file (blobs/tmp-*), and Commit fsyncs it,
// renames it to its name and fsyncs blobs/ before it returns the Ref: a
// record that references a blob is written after Commit, so a power loss
// never leaves a reference to a blob that is not there. A blob already
// present under the name is kept (its header and trailer checked first)
// and the new copy dropped. Sweep removes blobs no live record references
// and temporary files a crash left, fsyncing blobs/ after.
//
// # Hostile blobs
//
// A reader trusts nothing in the file: the header's size and chunk count
// must match the Ref, each chunk's stored length is bounded by its
// expected plaintext length plus the compression and sealing overhead,
// s2's decoded length is checked against the expected length before
// anything is decompressed, and each chunk's hash against the trailer's.
// Memory is two chunks whatever the blob's size. The FS handed to Open
// should be the store's confined FS (privfs.Confine), so that a FIFO,
// device or symbolic link planted under blobs/ is refused, not opened.
//
// # References in records
//
// A record references a blob by its reference value (Value, ParseValue):
// "\x00continuum-blob:" hex(hash) "/" size [";" media], text that stands
// where the bytes would (a memory value, a tool output, a message's text)
// and that has one spelling per Ref. The engine (engine/blobs.go) writes
// a value above Options.BlobThreshold to a blob and puts its reference
// value in the record; offline.RecordBlobRefs finds them in the log.
//
// The interface to the core is Store (Create, Open, Verify, Sweep, Names;
// VerifyAs for a copy checked by its name, as a restore from a replica does)
// and Sealer, which record.BlobSealer implements over a run's data key
// (the name a MAC under a key derived from it: seal.Key.NameOf).
package blob
