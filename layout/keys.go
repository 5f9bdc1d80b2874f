package layout

// KEYS, the key table of an encrypted store (docs/DESIGN.md, "Encryption
// at rest"). Frozen like the formats of format.go:
//
//	"CNTMKEYS" | version u16 LE | store id [16] | uvarint len | key table | crc32c u32 LE of all before
//
// The key table is seal.AppendTable's encoding: the store's data keys,
// each wrapped by a key of the user's keyring, erased ones kept as
// entries without a key. KEYS is not derived: without it nothing the
// store sealed can be opened. It is written whole, atomically
// (WriteFileAtomic), and made durable before anything is sealed with a
// key it adds.

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
	keysVersion = 1
	// MaxKeysFile bounds KEYS: a million runs' keys and then some.
	MaxKeysFile = 1 << 30
)

// MarshalKeys encodes KEYS of store id holding table t.
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

// ParseKeys decodes KEYS (named name, for errors) of store id. Damage,
// or the KEYS of another store, is a *record.CorruptionError.
func ParseKeys(name string, id [16]byte, b []byte) (*seal.Table, error) {
	const head = len(keysMagic) + 2 + 16
	if len(b) < head+1+4 {
		return nil, record.Corruptf(name, "size %d, below the smallest key file", len(b))
	}
	if string(b[:len(keysMagic)]) != keysMagic {
		return nil, record.Corruptf(name, "bad magic %q", b[:len(keysMagic)])
	}
	n := len(b) - 4
	if got, want := binary.LittleEndian.Uint32(b[n:]), crc32c.Checksum(b[:n]); got != want {
		return nil, record.Corruptf(name, "checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	if v := binary.LittleEndian.Uint16(b[len(keysMagic):]); v != keysVersion {
		return nil, record.Corruptf(name, "unknown version %d", v)
	}
	var sid [16]byte
	copy(sid[:], b[len(keysMagic)+2:head])
	if sid != id {
		return nil, record.Corruptf(name, "belongs to store %x, not %x", sid, id)
	}
	f := record.NewFields(b[:n], head)
	table := f.Bytes("key table", n)
	if err := f.Done("key file"); err != nil {
		return nil, record.Corruptf(name, "%v", err)
	}
	t, err := seal.DecodeTable(table)
	if err != nil {
		return nil, record.Corruptf(name, "%v", err)
	}
	return t, nil
}
