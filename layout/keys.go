package layout

// KEYS, the key table of an encrypted store (docs/DESIGN.md, "Encryption
// at rest"). Frozen like the formats of format.go:
//
//	"CNTMKEYS" | version u16 LE | store id [16] | uvarint len | key table | crc32c u32 LE of all before
//	           | additions (version 2)
//	addition = uvarint len | entry | crc32c u32 LE of the len and the entry
//
// The key table is seal.AppendTable's encoding: the store's data keys,
// each wrapped by a key of the user's keyring, erased ones kept as
// entries without a key. KEYS is not derived: without it nothing the
// store sealed can be opened.
//
// Version 1 is the table alone. Version 2 (written since keys are added
// often: one per run, one per erasable memory key of a run) is followed by
// additions: each a key added after the table, in seal.AppendEntry's
// encoding, live and numbered above every key before it. KEYS is written
// whole, atomically (WriteFileAtomic), for every change but an addition;
// an addition is appended and synced (fdatasync) instead, so that adding a
// key costs what the entry costs, not what the table does. Either is
// durable before anything is sealed with a key it adds. A crash in an
// append leaves a torn last addition: one that runs past the end of the
// file, or whose checksum fails and that ends the file, or zeros to the
// end. It is ignored (ParseKeysFile says where the whole additions end,
// so that the next change rewrites the file without it): nothing was
// sealed with its key, since its append never completed. Any other
// damage, an addition that fails with more bytes after it among them, is
// corruption.

import (
	"encoding/binary"

	"github.com/continuumdb/continuum/internal/crc32c"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

const (
	// KeysName is the key table's file, in the store's directory.
	KeysName = "KEYS"

	keysMagic   = "CNTMKEYS"
	keysVersion = 2 // version 1, the table without additions, is read too
	// MaxKeysFile bounds KEYS: a million runs' keys and then some.
	MaxKeysFile = 1 << 30
)

// MarshalKeys encodes KEYS of store id holding table t (version 2, without
// additions).
func MarshalKeys(id [16]byte, t *seal.Table) []byte {
	table := seal.AppendTable(nil, t)
	b := make([]byte, 0, len(keysMagic)+2+16+binary.MaxVarintLen64+len(table)+4)
	b = append(b, keysMagic...)
	b = binary.LittleEndian.AppendUint16(b, keysVersion)
	b = append(b, id[:]...)
	b = binary.AppendUvarint(b, uint64(len(table)))
	b = append(b, table...)
	return binary.LittleEndian.AppendUint32(b, crc32c.Checksum(b))
}

// AppendKeysAddition appends the addition of entry e to dst: what is
// appended to KEYS (version 2) for a key added after its table.
func AppendKeysAddition(dst []byte, e seal.Entry) []byte {
	start := len(dst)
	entry := seal.AppendEntry(nil, e)
	dst = binary.AppendUvarint(dst, uint64(len(entry)))
	dst = append(dst, entry...)
	return binary.LittleEndian.AppendUint32(dst, crc32c.Checksum(dst[start:]))
}

// ParseKeys decodes KEYS (named name, for errors) of store id: its table
// and whole additions. Damage, or the KEYS of another store, is a
// *record.CorruptionError.
func ParseKeys(name string, id [16]byte, b []byte) (*seal.Table, error) {
	t, _, err := ParseKeysFile(name, id, b)
	return t, err
}

// ParseKeysFile is ParseKeys that also says where the next addition may
// be appended: at appendAt = len(b) for a whole version 2 file; -1 for a
// version 1 file or one whose last addition is torn (see the file's
// comment), which must be rewritten whole first.
func ParseKeysFile(name string, id [16]byte, b []byte) (t *seal.Table, appendAt int, err error) {
	const head = len(keysMagic) + 2 + 16
	if len(b) < head+1+4 {
		return nil, 0, record.Corruptf(name, "size %d, below the smallest key file", len(b))
	}
	if string(b[:len(keysMagic)]) != keysMagic {
		return nil, 0, record.Corruptf(name, "bad magic %q", b[:len(keysMagic)])
	}
	v := binary.LittleEndian.Uint16(b[len(keysMagic):])
	n := len(b) - 4 // version 1: the checksum ends the file
	if v == keysVersion {
		f := record.NewFields(b, head)
		f.Bytes("key table", len(b))
		if f.Err() != nil || f.Off()+4 > len(b) {
			return nil, 0, record.Corruptf(name, "the key table's length runs past the file's %d bytes", len(b))
		}
		n = f.Off()
	}
	if got, want := binary.LittleEndian.Uint32(b[n:]), crc32c.Checksum(b[:n]); got != want {
		return nil, 0, record.Corruptf(name, "checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	if v != 1 && v != keysVersion {
		return nil, 0, record.Corruptf(name, "unknown version %d", v)
	}
	var sid [16]byte
	copy(sid[:], b[len(keysMagic)+2:head])
	if sid != id {
		return nil, 0, record.Corruptf(name, "belongs to store %x, not %x", sid, id)
	}
	f := record.NewFields(b[:n], head)
	table := f.Bytes("key table", n)
	if err := f.Done("key file"); err != nil {
		return nil, 0, record.Corruptf(name, "%v", err)
	}
	if t, err = seal.DecodeTable(table); err != nil {
		return nil, 0, record.Corruptf(name, "%v", err)
	}
	good := n + 4
	if v == 1 && good != len(b) {
		return nil, 0, record.Corruptf(name, "%d bytes after the checksum of a version 1 key file", len(b)-good)
	}
	for good < len(b) {
		size, w := binary.Uvarint(b[good:])
		if w == 0 || (w > 0 && size > uint64(len(b)-good-w)) || (w > 0 && len(b)-good-w-int(size) < 4) {
			break // torn: the last addition runs past the end
		}
		if w < 0 {
			return nil, 0, record.Corruptf(name, "the addition at offset %d has a bad length", good)
		}
		end := good + w + int(size)
		if binary.LittleEndian.Uint32(b[end:]) != crc32c.Checksum(b[good:end]) {
			if end+4 == len(b) || allZero(b[good:]) {
				break // torn: the last addition, cut short
			}
			return nil, 0, record.Corruptf(name, "the addition at offset %d: checksum mismatch", good)
		}
		if err := t.AddEncoded(b[good+w : end]); err != nil {
			return nil, 0, record.Corruptf(name, "the addition at offset %d: %v", good, err)
		}
		good = end + 4
	}
	if v != keysVersion || good != len(b) {
		return t, -1, nil
	}
	return t, good, nil
}

// allZero reports whether b holds only zero bytes: what a file system
// may leave of an append that a crash cut short.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
