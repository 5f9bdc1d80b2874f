package ledger

import (
	"encoding/binary"
	"math"
	"time"
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
//	An action with a retry policy (Action.Retry) appends, after those,
//	a mark that no length can be and the policy's encoding (below):
//	| 0x8000000000000052 u64le | len(policy) u64le | policy |
//	An action without one hashes exactly what it did before retries.
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
// Intent record version 3: an intent whose action has a retry policy
// (Action.Retry). Version 1's fields, then the compensation's if flags bit
// 1 says so (as in version 2), then the policy and the attempt:
//
//	| ... | [ctool cargs ckey] | policy | attempt | first | started |
//	                              below     uv       vi       vi
//	policy: | max attempts | initial | multiplier | max | deadline |
//	        |     uv       | uv (ns) | f64 bits le | uv (ns) | uv (ns) |
//
//	version byte 3; flags bit 0 idempotent, bit 1 a compensation follows,
//	bit 2 the compensation is idempotent (with bit 1 only), bit 4 set
//	(a policy follows); bit 3 (undoes) and the others are zero: a
//	compensation run by a rollback has no policy. The policy is
//	normalized (multiplier 0 is written 2) and valid (bounded by attempts
//	or a deadline, multiplier within [1, 1000], durations >= 0, each <
//	2^63); attempt >= 1; first and started are Unix nanoseconds (vi: a
//	zig-zag varint, minimal), started >= first. An intent without a
//	policy is written as version 1 or 2, byte for byte as before.
//
// Certificate record:
//
//	+-------+---------+--------+-------------+-----+-------+-------+--------+-----+
//	| 'L''C'| version | status | fingerprint | seq | index | runID | result | err |
//	|  2 B  |   1 B   |  1 B   |    32 B     | uv  |  uv   |  lp   |   lp   | lp  |
//	+-------+---------+--------+-------------+-----+-------+-------+--------+-----+
//	status: 2 done, 3 failed, 4 resolved.
//
// Certificate record version 2: the failure of an attempt of an action
// with a retry policy (Certificate.Attempt). Version 1's fields with
// status 3 (failed), then:
//
//	| ... | attempt | first | at | next | gave up |
//	         uv       vi     vi    vi      1 B
//
//	attempt >= 1 is the attempt that failed; first the start of the first
//	attempt; at when the failure was recorded (at >= first); gave up 0
//	(a next attempt may start at next >= at), 1 attempts exhausted, 2
//	deadline, 3 permanent error (then next is 0). Any other certificate
//	is written as version 1, byte for byte as before.
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
//
// Table version 3 (Ledger.CheckpointAt, from 2026-12-07) has version 2's
// header (version 3, entry size 48) and entries of 48 bytes, strictly
// ascending by fingerprint:
//
//	+-------------+------------------------+------------------+
//	| fingerprint | intent loc             | cert loc         |
//	|    32 B     | seg u32, status|off u32 | seg u32, off u32 |
//	+-------------+------------------------+------------------+
//	the intent's offset is in the low 30 bits of its word (a segment is
//	at most 1 GiB) and the status less one in the top two. A table whose
//	locations do not all fit is written as version 2. The table is
//	exactly 48 + 48*count bytes.
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
	intentVersion3             = 3
	flagRetry                  = 1 << 4 // version 3 only, always set there
	certVersion2               = 2
	// retryEnvelopeMark stands where a length would in the fingerprint
	// envelope (no field is 2^63 bytes long) before a retry policy.
	retryEnvelopeMark = 1<<63 | 'R'

	tableMagic        = "CLDT"
	tableVersion      = 1
	tableVersion2     = 2
	tableVersion3     = 3
	tableHeaderSize   = 24
	tableHeaderSizeV2 = 48 // versions 2 and 3
	tableEntrySize    = 72 // versions 1 and 2
	tableEntrySizeV3  = 48
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
	if in.Retry != nil {
		version, flags = intentVersion3, flags|flagRetry
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
	if in.Retry != nil {
		dst = appendPolicy(dst, in.Retry)
		dst = binary.AppendUvarint(dst, uint64(in.Attempt))
		dst = binary.AppendVarint(dst, in.First)
		dst = binary.AppendVarint(dst, in.Started)
	}
	return dst
}

// appendPolicy appends the encoding of the normalized policy p.
func appendPolicy(dst []byte, p *RetryPolicy) []byte {
	dst = binary.AppendUvarint(dst, uint64(p.MaxAttempts))
	dst = binary.AppendUvarint(dst, uint64(p.Initial))
	dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(p.Multiplier))
	dst = binary.AppendUvarint(dst, uint64(p.Max))
	return binary.AppendUvarint(dst, uint64(p.Deadline))
}

// policy reads a policy (see appendPolicy) and checks it is normalized
// and valid.
func (d *decoder) policy() *RetryPolicy {
	off := d.off
	p := &RetryPolicy{}
	n := d.uvarint("retry max attempts")
	if d.err == nil && n > math.MaxUint32 {
		d.err = corruptf(d.what, off, "retry max attempts %d exceeds 32 bits", n)
	}
	p.MaxAttempts = uint32(n)
	p.Initial = d.duration("retry initial")
	if d.err == nil {
		if len(d.b)-d.off < 8 {
			d.err = corruptf(d.what, d.off, "truncated retry multiplier")
		} else {
			p.Multiplier = math.Float64frombits(binary.LittleEndian.Uint64(d.b[d.off:]))
			d.off += 8
		}
	}
	p.Max = d.duration("retry max")
	p.Deadline = d.duration("retry deadline")
	if d.err != nil {
		return nil
	}
	if err := p.schedule().Validate(); err != nil {
		d.err = corruptf(d.what, off, "%v", err)
		return nil
	}
	if p.Multiplier != p.schedule().Multiplier {
		d.err = corruptf(d.what, off, "retry policy not normalized")
		return nil
	}
	return p
}

func (d *decoder) duration(field string) time.Duration {
	off := d.off
	v := d.uvarint(field)
	if d.err == nil && v > math.MaxInt64 {
		d.err = corruptf(d.what, off, "%s %d exceeds 63 bits", field, v)
	}
	return time.Duration(v)
}

// varint reads a minimal zig-zag varint.
func (d *decoder) varint(field string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	switch {
	case n == 0:
		d.err = corruptf(d.what, d.off, "truncated %s", field)
	case n < 0:
		d.err = corruptf(d.what, d.off, "%s overflows 64 bits", field)
	case n != len(binary.AppendVarint(nil, v)):
		d.err = corruptf(d.what, d.off, "%s is not minimally encoded", field)
	}
	if d.err != nil {
		return 0
	}
	d.off += n
	return v
}

// attemptNumber reads an attempt number (>= 1, 32 bits).
func (d *decoder) attemptNumber() uint32 {
	off := d.off
	v := d.uvarint("attempt")
	if d.err == nil && (v == 0 || v > math.MaxUint32) {
		d.err = corruptf(d.what, off, "attempt %d is not within [1, 2^32)", v)
	}
	return uint32(v)
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
	case b[2] != recordVersion && b[2] != intentVersion2 && b[2] != intentVersion3:
		return corruptf("intent", 2, "unknown version %d", b[2])
	case b[2] == intentVersion3 && b[3]&^(flagIdempotent|flagCompensation|flagCompIdempotent|flagRetry) != 0:
		return corruptf("intent", 3, "unknown flags %#02x", b[3])
	case b[2] == intentVersion3 && b[3]&flagRetry == 0:
		return corruptf("intent", 3, "version 3 intent without a retry policy (it is written as version 1 or 2)")
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
	if b[3]&flagRetry != 0 {
		in.Retry = d.policy()
		in.Attempt = d.attemptNumber()
		in.First = d.varint("first attempt's start")
		off := d.off
		in.Started = d.varint("attempt's start")
		if d.err == nil && in.Started < in.First {
			d.err = corruptf("intent", off, "attempt %d starts at %d, before the first attempt (%d)", in.Attempt, in.Started, in.First)
		}
		if d.err == nil && in.Retry.MaxAttempts > 0 && in.Attempt > in.Retry.MaxAttempts {
			d.err = corruptf("intent", off, "attempt %d beyond the policy's %d", in.Attempt, in.Retry.MaxAttempts)
		}
	}
	return d.finish()
}

// AppendCertificate appends the binary form of c to dst and returns the
// result.
func AppendCertificate(dst []byte, c *Certificate) []byte {
	version := byte(recordVersion)
	if c.Attempt != nil {
		version = certVersion2
	}
	dst = append(dst, certMagic0, certMagic1, version, byte(c.Status))
	dst = append(dst, c.Fingerprint[:]...)
	dst = binary.AppendUvarint(dst, c.Seq)
	dst = binary.AppendUvarint(dst, uint64(c.Index))
	dst = appendLP(dst, c.RunID)
	dst = binary.AppendUvarint(dst, uint64(len(c.Result)))
	dst = append(dst, c.Result...)
	dst = appendLP(dst, c.Err)
	if a := c.Attempt; a != nil {
		dst = binary.AppendUvarint(dst, uint64(a.Number))
		dst = binary.AppendVarint(dst, a.First)
		dst = binary.AppendVarint(dst, a.At)
		dst = binary.AppendVarint(dst, a.Next)
		dst = append(dst, byte(a.GaveUp))
	}
	return dst
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
	if b[2] != recordVersion && b[2] != certVersion2 {
		return corruptf("certificate", 2, "unknown version %d", b[2])
	}
	c.Status = Status(b[3])
	if c.Status != StatusDone && c.Status != StatusFailed && c.Status != StatusResolved {
		return corruptf("certificate", 3, "bad status %d", b[3])
	}
	if b[2] == certVersion2 && c.Status != StatusFailed {
		return corruptf("certificate", 3, "version 2 certificate with status %s (only a failed attempt has one)", c.Status)
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
	if b[2] == certVersion2 {
		a := &Attempt{Number: d.attemptNumber(), First: d.varint("first attempt's start")}
		off := d.off
		a.At = d.varint("failure time")
		a.Next = d.varint("next attempt's start")
		if d.err == nil && a.At < a.First {
			d.err = corruptf("certificate", off, "attempt %d failed at %d, before the first attempt (%d)", a.Number, a.At, a.First)
		}
		if d.err == nil {
			if d.off >= len(b) {
				d.err = corruptf("certificate", d.off, "truncated give-up reason")
			} else {
				a.GaveUp = GiveUp(b[d.off])
				switch {
				case a.GaveUp > GaveUpPermanent:
					d.err = corruptf("certificate", d.off, "unknown give-up reason %d", b[d.off])
				case a.GaveUp == NotGivenUp && a.Next < a.At:
					d.err = corruptf("certificate", off, "next attempt at %d, before the failure (%d)", a.Next, a.At)
				case a.GaveUp != NotGivenUp && a.Next != 0:
					d.err = corruptf("certificate", off, "an action given up with a next attempt (%d)", a.Next)
				}
				d.off++
			}
		}
		c.Attempt = a
	}
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
