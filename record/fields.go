package record

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/internal/runid"
)

// MaxRunIDLen bounds a run id, in bytes (runid.MaxLen).
const MaxRunIDLen = runid.MaxLen

// ErrInvalidRunID is what CheckRunID's errors wrap.
var ErrInvalidRunID = errors.New("engine: invalid run id")

// CheckRunID reports why id cannot name a run, or nil: the store's one
// run-id rule (package runid), with ErrInvalidRunID as its sentinel. The
// engine checks it on every run it creates, the decoders on every run id
// they read.
func CheckRunID(id string) error {
	err := runid.Check(id)
	if err == nil {
		return nil // without the errors.As target, which escapes: no allocation for a good id
	}
	var e *runid.Error
	if errors.As(err, &e) {
		return fmt.Errorf("%w: %s", ErrInvalidRunID, e.Reason)
	}
	return fmt.Errorf("%w: %v", ErrInvalidRunID, err)
}

// Fields reads the fields of one encoded structure (a log record, a file of
// the store) with bounds checks. It is the one decoder of the store's
// formats and holds their rules: a varint is minimal (the shortest
// encoding of its value, what encoding/binary appends), a length is
// bounded by the caller and by the input, a run id obeys CheckRunID. The
// first error sticks: every read after it returns zero values, and Err or
// Done reports it with the byte offset where it happened.
type Fields struct {
	b   []byte
	off int
	err error
}

// NewFields returns a Fields reading b from byte off.
func NewFields(b []byte, off int) *Fields { return &Fields{b: b, off: off} }

// Off is the offset of the next byte to read.
func (d *Fields) Off() int { return d.off }

// Rest returns the bytes not read yet (a slice of the input) and consumes
// them.
func (d *Fields) Rest() []byte {
	if d.err != nil {
		return nil
	}
	r := d.b[d.off:]
	d.off = len(d.b)
	return r
}

// Err is the first error, or nil.
func (d *Fields) Err() error { return d.err }

// Fail records an error at the current offset, unless one is recorded.
func (d *Fields) Fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("at byte %d: %s", d.off, fmt.Sprintf(format, args...))
	}
}

// Uvarint reads a minimal unsigned varint.
func (d *Fields) Uvarint(what string) uint64 { return d.uvarintOf(what, "") }

// uvarintOf is Uvarint of the field named what+suffix, a name built only
// for an error: Bytes reads a length per call, and a name concatenated
// for each was an allocation per record.
func (d *Fields) uvarintOf(what, suffix string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.Fail("%s%s: bad or truncated varint", what, suffix)
		return 0
	}
	if n != uvarintLen(v) {
		d.Fail("%s%s: varint of %d bytes is not minimal (%d)", what, suffix, n, uvarintLen(v))
		return 0
	}
	d.off += n
	return v
}

// Varint reads a minimal signed (zigzag) varint.
func (d *Fields) Varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.Fail("%s: bad or truncated varint", what)
		return 0
	}
	if ux := uint64(v) << 1; n != uvarintLen(ux^uint64(v>>63)) {
		d.Fail("%s: varint of %d bytes is not minimal", what, n)
		return 0
	}
	d.off += n
	return v
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// Bytes reads a uvarint length and that many bytes, at most max. The
// result aliases the input.
func (d *Fields) Bytes(what string, max int) []byte {
	n := d.uvarintOf(what, " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(max) {
		d.Fail("%s: length %d exceeds the bound %d", what, n, max)
		return nil
	}
	return d.Fixed(what, int(n))
}

// Fixed reads n bytes. The result aliases the input.
func (d *Fields) Fixed(what string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b)-d.off {
		d.Fail("%s: need %d bytes, %d left", what, n, len(d.b)-d.off)
		return nil
	}
	v := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return v
}

// Byte reads one byte.
func (d *Fields) Byte(what string) byte {
	b := d.Fixed(what, 1)
	if b == nil {
		return 0
	}
	return b[0]
}

// Hash reads 32 bytes.
func (d *Fields) Hash(what string) (h [32]byte) {
	copy(h[:], d.Fixed(what, 32))
	return h
}

// RunID reads a run id (uvarint length, bytes) and checks it.
func (d *Fields) RunID() string { return string(d.RunIDBytes()) }

// RunIDBytes is RunID without the copy: a slice of the input.
func (d *Fields) RunIDBytes() []byte {
	id := d.Bytes("run id", MaxRunIDLen)
	if d.err == nil && !printableASCII(id) {
		// The rule in full (runid.Check) for the rare id that is not
		// printable ASCII, or empty; the copy to a string costs an
		// allocation, which the common case spares.
		if err := CheckRunID(string(id)); err != nil {
			d.Fail("%v", err)
		}
	}
	return id
}

// printableASCII reports whether id is non-empty and all printable ASCII
// (0x20 to 0x7e): an id runid.Check accepts when Bytes bounded its length.
func printableASCII(id []byte) bool {
	for _, c := range id {
		if c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return len(id) > 0
}

// Done reports the first error, or an error if bytes are left.
func (d *Fields) Done(what string) error {
	if d.err == nil && d.off != len(d.b) {
		d.Fail("%s: %d trailing bytes", what, len(d.b)-d.off)
	}
	return d.err
}

// AppendString appends s with its uvarint length.
func AppendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// AppendBytes appends b with its uvarint length.
func AppendBytes(dst []byte, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}
