package ledger

import (
	"encoding/binary"
	"math"
)

// The ledger's byte formats. Everything in this file is FROZEN: records and
// tables written with these constants are read back by every later version.
// A change of layout takes a new version number (and a decoder for the old
// one), never an edit of what is here.
//
// Fingerprint envelope (hashed, never stored):
//
//	BLAKE3-256 derive-key mode, context fingerprintContext, over
//	+----------------+------+----------------+-------+----------------+-----+
//	| len(tool) u64le| tool | len(args) u64le| args  | len(key) u64le | key |
//	+----------------+------+----------------+-------+----------------+-----+
//	args is the canonical, redacted JSON; the lengths make the envelope
//	unambiguous ({tool "a", key "bc"} and {tool "ab", key "c"} differ).
//	An action with a compensation (Action.Compensate) appends three more
//	fields, in the same form, after key:
//	| len(ctool) u64le | ctool | len(cargs) u64le | cargs | len(ckey) u64le | ckey |
//	(ckey as given, "" for the default CompensationKey). An action without
//	one hashes exactly the envelope above, as before compensations existed.
//	A compensation run by a rollback (CompensationIntent) appends one
//	field instead, the fingerprint of the action it undoes:
//	| 32 u64le | undoes [32] |
//
// Intent record (the payload the engine frames in its log):
//
//	+-------+---------+-------+-------------+-----+-------+-------+------+------+-----+
//	| 'L''I'| version | flags | fingerprint | seq | index | runID | tool | args | key |
//	|  2 B  |   1 B   |  1 B  |    32 B     | uv  |  uv   |  lp   |  lp  |  lp  | lp  |
//	+-------+---------+-------+-------------+-----+-------+-------+------+------+-----+
//	flags bit 0: idempotent; the other bits are zero.
//
// Intent record version 2: an intent whose action has a compensation
// (Action.Compensate), or which is itself a compensation (Intent.Undoes).
// Version 1's fields, then either the compensation's or the fingerprint
// of the action it undoes:
//
//	| ... version 1's fields ... | ctool | cargs | ckey |     (flags bit 1)
//	                               lp      lp      lp
//	| ... version 1's fields ... | undoes [32] |            (flags bit 3)
//
//	version byte 2; flags bit 0 idempotent, bit 1 a compensation follows,
//	bit 2 the compensation is idempotent (with bit 1 only), bit 3 the
//	intent is a compensation and undoes follows; exactly one of bits 1 and
//	3 is set, the other bits are zero. ctool is not empty; cargs is
//	canonical, redacted JSON; ckey is the compensation's key as the agent
//	gave it ("" means CompensationKey of the intent's fingerprint); undoes
//	is not zero. An intent with neither is written as version 1, byte for
//	byte as before; a version 2 intent with neither or both, or a version
//	1 intent with any bit but 0, is corrupt (one encoding per intent).
//
// Certificate record:
//
//	+-------+---------+--------+-------------+-----+-------+-------+--------+-----+
//	| 'L''C'| version | status | fingerprint | seq | index | runID | result | err |
//	|  2 B  |   1 B   |  1 B   |    32 B     | uv  |  uv   |  lp   |   lp   | lp  |
//	+-------+---------+--------+-------------+-----+-------+-------+--------+-----+
//	status: 2 done, 3 failed, 4 resolved.
//
// uv is a minimal unsigned varint (encoding/binary; a non-minimal encoding is
// corrupt, so every record has exactly one encoding); index fits in 32 bits.
// lp is a uv length followed by that many bytes. Nothing may follow the last
// field. The records carry no checksum: the engine's log frames them with
// one.
//
// Table (the persisted fingerprint index, see Ledger.AppendTable):
//
//	header, 24 B:
//	+--------+---------+------------+-------+-----------+-------------+
//	| "CLDT" | version | entry size | count | body crc  | header crc  |
//	|  4 B   | u16le   |   u16le    | u64le | u32le     | u32le       |
//	+--------+---------+------------+-------+-----------+-------------+
//	then count entries of tableEntrySize (72) bytes, strictly ascending
//	by fingerprint:
//	+-------------+--------+----------+------------------+------------------+
//	| fingerprint | status | reserved | intent loc       | cert loc         |
//	|    32 B     |  1 B   | 7 B zero | seg u64, off i64 | seg u64, off i64 |
//	+-------------+--------+----------+------------------+------------------+
//	status: 1 intent, 2 done, 3 failed, 4 resolved. Locs are little-endian.
//	header crc is CRC-32C of the header's first 20 bytes; body crc is
//	CRC-32C of all the entries. The table is exactly 24 + 72*count bytes.
//
// Table version 2 (Ledger.CheckpointAt) also names what it derives from,
// so that a copy left by another checkpoint (an older file swapped in) is
// told apart from the one wanted. Its entries are those of version 1:
//
//	header, 48 B:
//	+--------+---------+------------+-------+-------+---------+---------+----------+------------+
//	| "CLDT" | version | entry size | count | gen   | pos seg | pos off | body crc | header crc |
//	|  4 B   | u16le=2 |   u16le    | u64le | u64le | u64le   | i64le   | u32le    | u32le      |
//	+--------+---------+------------+-------+-------+---------+---------+----------+------------+
//	gen is the engine checkpoint generation that wrote it; pos the log
//	position its records end at (every intent and certificate before it
//	is reflected, none after). header crc is CRC-32C of the first 44
//	bytes. The table is exactly 48 + 72*count bytes.
const (
	fingerprintContext = "github.com/continuumdb/continuum 2026-11-29 ledger action fingerprint v1"

	intentMagic0, intentMagic1 = 'L', 'I'
	certMagic0, certMagic1     = 'L', 'C'
	recordVersion              = 1
	intentVersion2             = 2
	flagIdempotent             = 1 << 0
	flagCompensation           = 1 << 1 // version 2 only
	flagCompIdempotent         = 1 << 2 // version 2 only
	flagUndoes                 = 1 << 3 // version 2 only

	tableMagic        = "CLDT"
	tableVersion      = 1
	tableVersion2     = 2
	tableHeaderSize   = 24
	tableHeaderSizeV2 = 48
	tableEntrySize    = 72
	tableStatusOff    = 32
	tableIntentOff    = 40
	tableCertOff      = 56
	recordHeaderSize  = 4 + len(Fingerprint{})
)

// AppendIntent appends the binary form of in to dst and returns the result.
func AppendIntent(dst []byte, in *Intent) []byte {
	var flags byte
	if in.Idempotent {
		flags |= flagIdempotent
	}
	version := byte(recordVersion)
	if c := in.Compensation; c != nil {
		version, flags = intentVersion2, flags|flagCompensation
		if c.Idempotent {
			flags |= flagCompIdempotent
		}
	} else if in.Undoes != (Fingerprint{}) {
		version, flags = intentVersion2, flags|flagUndoes
	}
	dst = append(dst, intentMagic0, intentMagic1, version, flags)
	dst = append(dst, in.Fingerprint[:]...)
	dst = binary.AppendUvarint(dst, in.Seq)
	dst = binary.AppendUvarint(dst, uint64(in.Index))
	dst = appendLP(dst, in.RunID)
	dst = appendLP(dst, in.Tool)
	dst = binary.AppendUvarint(dst, uint64(len(in.Args)))
	dst = append(dst, in.Args...)
	dst = appendLP(dst, in.Key)
	if c := in.Compensation; c != nil {
		dst = appendLP(dst, c.Tool)
		dst = binary.AppendUvarint(dst, uint64(len(c.Args)))
		dst = append(dst, c.Args...)
		dst = appendLP(dst, c.Key)
	} else if in.Undoes != (Fingerprint{}) {
		dst = append(dst, in.Undoes[:]...)
	}
	return dst
}

// DecodeIntent decodes an intent record. It never panics and allocates no
// more than len(b); the returned intent shares no memory with b. A malformed
// record gives an error wrapping ErrCorrupt with the offset.
func DecodeIntent(b []byte) (*Intent, error) {
	in, err := DecodeIntentView(b)
	if err != nil {
		return nil, err
	}
	if in.Args != nil {
		in.Args = append([]byte(nil), in.Args...)
	}
	if c := in.Compensation; c != nil && c.Args != nil {
		c.Args = append([]byte(nil), c.Args...)
	}
	return in, nil
}

// DecodeIntentView is DecodeIntent without the copy: Args is a slice of b,
// valid as long as b is (see DecodeCertificateView).
func DecodeIntentView(b []byte) (*Intent, error) {
	in := new(Intent)
	if err := DecodeIntentTo(in, b, nil); err != nil {
		return nil, err
	}
	return in, nil
}

// DecodeIntentTo is DecodeIntentView into in, which it overwrites: a reader
// that decodes many intents in turn (verify) reuses one. intern, if not
// nil, makes the run id and tool strings from their bytes (which repeat
// from record to record: an interned string instead of a new one), each
// equal to string(b) and never changed afterwards; the key, different for
// every action, is always a new string. On an error in holds what was
// decoded before it.
func DecodeIntentTo(in *Intent, b []byte, intern func([]byte) string) error {
	if intern == nil {
		intern = copyString
	}
	*in = Intent{}
	d := decoder{b: b, what: "intent"}
	if len(b) < recordHeaderSize {
		return corruptf("intent", len(b), "truncated header (%d bytes, want at least %d)", len(b), recordHeaderSize)
	}
	if b[0] != intentMagic0 || b[1] != intentMagic1 {
		return corruptf("intent", 0, "bad magic %#02x%02x", b[0], b[1])
	}
	switch {
	case b[2] != recordVersion && b[2] != intentVersion2:
		return corruptf("intent", 2, "unknown version %d", b[2])
	case b[2] == recordVersion && b[3]&^flagIdempotent != 0:
		return corruptf("intent", 3, "unknown flags %#02x", b[3])
	case b[2] == intentVersion2 && b[3]&^(flagIdempotent|flagCompensation|flagCompIdempotent|flagUndoes) != 0:
		return corruptf("intent", 3, "unknown flags %#02x", b[3])
	case b[2] == intentVersion2 && b[3]&(flagCompensation|flagUndoes) == 0:
		return corruptf("intent", 3, "version 2 intent without a compensation (it is written as version 1)")
	case b[3]&flagCompensation != 0 && b[3]&flagUndoes != 0:
		return corruptf("intent", 3, "a compensation with a compensation of its own (flags %#02x)", b[3])
	case b[3]&flagCompIdempotent != 0 && b[3]&flagCompensation == 0:
		return corruptf("intent", 3, "compensation idempotent without a compensation (flags %#02x)", b[3])
	}
	in.Idempotent = b[3]&flagIdempotent != 0
	copy(in.Fingerprint[:], b[4:recordHeaderSize])
	d.off = recordHeaderSize
	in.Seq = d.uvarint("seq")
	in.Index = d.index()
	in.RunID = intern(d.bytes("run id"))
	in.Tool = intern(d.bytes("tool"))
	in.Args = d.bytes("args")
	in.Key = string(d.bytes("key"))
	if b[3]&flagCompensation != 0 {
		c := &Compensation{Idempotent: b[3]&flagCompIdempotent != 0}
		off := d.off
		c.Tool = string(d.bytes("compensation tool"))
		if d.err == nil && c.Tool == "" {
			d.err = corruptf("intent", off, "compensation without a tool")
		}
		c.Args = d.bytes("compensation args")
		c.Key = string(d.bytes("compensation key"))
		in.Compensation = c
	}
	if b[3]&flagUndoes != 0 && d.err == nil {
		off := d.off
		if len(b)-off < len(in.Undoes) {
			d.err = corruptf("intent", off, "truncated undone fingerprint")
		} else if copy(in.Undoes[:], b[off:]); in.Undoes == (Fingerprint{}) {
			d.err = corruptf("intent", off, "a compensation that undoes the zero fingerprint")
		}
		d.off += len(in.Undoes)
	}
	return d.finish()
}

// AppendCertificate appends the binary form of c to dst and returns the
// result.
func AppendCertificate(dst []byte, c *Certificate) []byte {
	dst = append(dst, certMagic0, certMagic1, recordVersion, byte(c.Status))
	dst = append(dst, c.Fingerprint[:]...)
	dst = binary.AppendUvarint(dst, c.Seq)
	dst = binary.AppendUvarint(dst, uint64(c.Index))
	dst = appendLP(dst, c.RunID)
	dst = binary.AppendUvarint(dst, uint64(len(c.Result)))
	dst = append(dst, c.Result...)
	return appendLP(dst, c.Err)
}

// DecodeCertificate decodes a certificate record, with the guarantees of
// DecodeIntent. Its status is always StatusDone, StatusFailed or
// StatusResolved. Result is non-nil (possibly empty) for those with a result.
func DecodeCertificate(b []byte) (*Certificate, error) {
	c, err := DecodeCertificateView(b)
	if err != nil {
		return nil, err
	}
	c.Result = append([]byte{}, c.Result...)
	return c, nil
}

// DecodeCertificateView is DecodeCertificate without the copy: Result is a
// slice of b, valid as long as b is. Readers that only hash or measure a
// result (verification, replay) use it so that a record of 64 MiB costs 64
// MiB, not twice that.
func DecodeCertificateView(b []byte) (*Certificate, error) {
	c := new(Certificate)
	if err := DecodeCertificateTo(c, b, nil); err != nil {
		return nil, err
	}
	return c, nil
}

// DecodeCertificateTo is DecodeCertificateView into c, which it
// overwrites, with its run id made by intern (see DecodeIntentTo).
func DecodeCertificateTo(c *Certificate, b []byte, intern func([]byte) string) error {
	if intern == nil {
		intern = copyString
	}
	*c = Certificate{}
	d := decoder{b: b, what: "certificate"}
	if len(b) < recordHeaderSize {
		return corruptf("certificate", len(b), "truncated header (%d bytes, want at least %d)", len(b), recordHeaderSize)
	}
	if b[0] != certMagic0 || b[1] != certMagic1 {
		return corruptf("certificate", 0, "bad magic %#02x%02x", b[0], b[1])
	}
	if b[2] != recordVersion {
		return corruptf("certificate", 2, "unknown version %d", b[2])
	}
	c.Status = Status(b[3])
	if c.Status != StatusDone && c.Status != StatusFailed && c.Status != StatusResolved {
		return corruptf("certificate", 3, "bad status %d", b[3])
	}
	copy(c.Fingerprint[:], b[4:recordHeaderSize])
	d.off = recordHeaderSize
	c.Seq = d.uvarint("seq")
	c.Index = d.index()
	c.RunID = intern(d.bytes("run id"))
	if res := d.bytes("result"); d.err == nil {
		c.Result = res
	}
	c.Err = string(d.bytes("error"))
	return d.finish()
}

func copyString(b []byte) string { return string(b) }

func appendLP(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// decoder reads the variable part of a record. The first error sticks and
// every later read returns zero values.
type decoder struct {
	b    []byte
	off  int
	what string
	err  error
}

func (d *decoder) uvarint(field string) uint64 { return d.uvarintOf(field, "") }

// uvarintOf reads a uvarint named field+suffix in an error (the name is
// built only then: this runs for every field of every record read).
func (d *decoder) uvarintOf(field, suffix string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	switch {
	case n == 0:
		d.err = corruptf(d.what, d.off, "truncated %s%s", field, suffix)
	case n < 0:
		d.err = corruptf(d.what, d.off, "%s%s overflows 64 bits", field, suffix)
	case n != uvarintLen(v):
		d.err = corruptf(d.what, d.off, "%s%s is not minimally encoded", field, suffix)
	}
	if d.err != nil {
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) index() uint32 {
	off := d.off
	v := d.uvarint("index")
	if d.err == nil && v > math.MaxUint32 {
		d.err = corruptf(d.what, off, "index %d exceeds 32 bits", v)
		return 0
	}
	return uint32(v)
}

// bytes reads a length-prefixed field and returns a slice of d.b (nil only
// after an error).
func (d *decoder) bytes(field string) []byte {
	off := d.off
	n := d.uvarintOf(field, " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.err = corruptf(d.what, off, "%s length %d exceeds the %d remaining bytes", field, n, len(d.b)-d.off)
		return nil
	}
	v := d.b[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return v
}

func (d *decoder) finish() error {
	if d.err == nil && d.off != len(d.b) {
		d.err = corruptf(d.what, d.off, "%d trailing bytes", len(d.b)-d.off)
	}
	return d.err
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
