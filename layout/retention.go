package layout

// RETENTION: what garbage collection removed from the log. Every constant
// here is frozen like those of format.go.
//
// RETENTION (64 bytes):
//
//	"CNTMRETN" | version u16 LE | 0 u16 | store id [16] | floor u64 LE |
//	segments u64 LE | bytes u64 LE | updated i64 LE | crc32c u32 LE of all before
//
// floor is the first segment the log keeps: segments 1..floor-1 were
// removed, their records all dead (records of runs a delete record
// deleted, store heads a later one superseded). segments and bytes count
// what all collections removed so far, updated is when the last one wrote
// the file (unix nanoseconds).
//
// The file is written (atomically, durably) before the segments below its
// floor are removed, so a log that starts past segment 1 is explained by
// it; one that starts past its floor, or past 1 without it, lost
// segments. Segments below the floor that are still there (a crash
// between the file and the removal) are dead and removed by the next
// collection. It is not derived: like STORE it cannot be rebuilt, and a
// damaged one is refused.

import (
	"encoding/binary"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/crc32c"
	"github.com/continuumdb/continuum/record"
)

const (
	// RetentionName is the file's name in the store's directory.
	RetentionName = "RETENTION"
	// RetentionFileSize is its size.
	RetentionFileSize = 64

	retentionMagic   = "CNTMRETN"
	retentionVersion = 1
)

// Retention is the content of RETENTION.
type Retention struct {
	StoreID  [16]byte
	Floor    uint64 // first segment the log keeps (>= 1)
	Segments uint64 // segments removed so far
	Bytes    uint64 // bytes of segment files removed so far
	Updated  int64  // unix nanoseconds
}

// Marshal encodes r.
func (r *Retention) Marshal() []byte {
	b := make([]byte, 0, RetentionFileSize)
	b = append(b, retentionMagic...)
	b = binary.LittleEndian.AppendUint16(b, retentionVersion)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = append(b, r.StoreID[:]...)
	b = binary.LittleEndian.AppendUint64(b, r.Floor)
	b = binary.LittleEndian.AppendUint64(b, r.Segments)
	b = binary.LittleEndian.AppendUint64(b, r.Bytes)
	b = binary.LittleEndian.AppendUint64(b, uint64(r.Updated))
	return binary.LittleEndian.AppendUint32(b, crc32c.Checksum(b))
}

// ParseRetention decodes the RETENTION file name holding b.
func ParseRetention(name string, b []byte) (*Retention, error) {
	if len(b) != RetentionFileSize {
		return nil, record.Corruptf(name, "size %d, want %d", len(b), RetentionFileSize)
	}
	if string(b[:8]) != retentionMagic {
		return nil, record.Corruptf(name, "bad magic %q", b[:8])
	}
	if got, want := binary.LittleEndian.Uint32(b[60:]), crc32c.Checksum(b[:60]); got != want {
		return nil, record.Corruptf(name, "checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != retentionVersion {
		return nil, record.Corruptf(name, "unknown version %d", v)
	}
	if z := binary.LittleEndian.Uint16(b[10:]); z != 0 {
		return nil, record.Corruptf(name, "reserved field is %d, want 0", z)
	}
	r := &Retention{
		Floor:    binary.LittleEndian.Uint64(b[28:]),
		Segments: binary.LittleEndian.Uint64(b[36:]),
		Bytes:    binary.LittleEndian.Uint64(b[44:]),
		Updated:  int64(binary.LittleEndian.Uint64(b[52:])),
	}
	copy(r.StoreID[:], b[12:28])
	if r.Floor == 0 {
		return nil, record.Corruptf(name, "floor 0: segments are numbered from 1")
	}
	return r, nil
}

// ReadRetention reads the RETENTION file of the store in dir: nil, nil
// when there is none (nothing was ever removed), a *record.CorruptionError
// when it is damaged or belongs to another store than id (nil: not
// checked).
func ReadRetention(fs vfs.FS, dir string, id *[16]byte) (*Retention, error) {
	name := fs.PathJoin(dir, RetentionName)
	b, err := ReadFile(fs, name)
	if NotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r, err := ParseRetention(name, b)
	if err != nil {
		return nil, err
	}
	if id != nil && r.StoreID != *id {
		return nil, record.Corruptf(name, "belongs to store %x, not %x", r.StoreID, id)
	}
	return r, nil
}
