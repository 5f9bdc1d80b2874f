package record

// Streams out (engine/doc.go, "Streams"; internal/stream): the chunks an
// atom appends to a named stream of its run while it works, before it
// commits, and the mark that says an atom's earlier attempts did not
// commit. Every constant in this file is frozen, like those of format.go.
//
//	stream chunk   18 | uvarint len | run id | uvarint seq | uvarint attempt
//	                  | uvarint len | stream name | uvarint offset | data
//	stream abandon 19 | uvarint len | run id | uvarint seq | uvarint attempt
//
// A chunk is the offset-th chunk (from 0) of stream name of run, appended
// by attempt attempt (from 1) of the run's atom at seq (from 1): the atom
// that was running, not committed yet. data is the rest of the record, at
// most MaxChunkSize bytes; in an encrypted store it is sealed with the
// run's data key (SealChunk), its place binding the kind, run, seq,
// stream, attempt and offset, so that a chunk moved to another place does
// not open. The name obeys CheckStreamName.
//
// An abandon record says that attempts 1 to attempt of the run's atom at
// seq did not commit: the engine writes it before the atom's own record
// when the committing attempt appended no chunk but earlier ones of the
// same seq did (they crashed), so that the log alone tells which attempt
// an atom record commits (internal/stream's rules).
//
// What the log keeps, per stream of a run, and verify checks
// (internal/stream.Checker): the offsets of its chunks are 0, 1, 2, ...
// in log order (a chunk is durable or lost with every later one, so a
// crash leaves no gap); a chunk's seq is its run's next seq (last
// committed + 1) where it stands, the run exists and has not ended;
// attempts of one seq never go down. Neither kind is chained: a chunk is
// output, not the run's state, and the atom that commits it is.

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/seal"
)

// The kinds of the stream records.
const (
	KindStreamChunk   Kind = 18
	KindStreamAbandon Kind = 19
)

const (
	// MaxChunkSize bounds a stream chunk's data, in bytes.
	MaxChunkSize = 1 << 20
	// MaxStreamNameLen bounds a stream's name, in bytes.
	MaxStreamNameLen = 128
)

// ErrInvalidStreamName is what CheckStreamName's errors wrap.
var ErrInvalidStreamName = errors.New("invalid stream name")

// CheckStreamName reports why name cannot name a stream, or nil: 1 to
// MaxStreamNameLen bytes of ASCII letters, digits, '.', '_', ':' and '-'
// (a name goes in a URL's path as it is).
func CheckStreamName(name string) error {
	if name == "" || len(name) > MaxStreamNameLen {
		return fmt.Errorf("%w: stream name of %d bytes, want 1 to %d", ErrInvalidStreamName, len(name), MaxStreamNameLen)
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return fmt.Errorf("%w: stream name %q: byte %d (%#x) is not a letter, digit, '.', '_', ':' or '-'", ErrInvalidStreamName, name, i, c)
		}
	}
	return nil
}

// AppendStreamChunkHeader appends a stream chunk record up to its data,
// which the caller appends (or, in an encrypted store, SealChunk).
func AppendStreamChunkHeader(dst []byte, run string, seq, attempt uint64, stream string, offset uint64) []byte {
	dst = append(dst, byte(KindStreamChunk))
	dst = AppendString(dst, run)
	dst = binary.AppendUvarint(dst, seq)
	dst = binary.AppendUvarint(dst, attempt)
	dst = AppendString(dst, stream)
	return binary.AppendUvarint(dst, offset)
}

// AppendStreamChunk appends a whole stream chunk record of a plaintext
// store.
func AppendStreamChunk(dst []byte, run string, seq, attempt uint64, stream string, offset uint64, data []byte) []byte {
	return append(AppendStreamChunkHeader(dst, run, seq, attempt, stream, offset), data...)
}

// AppendStreamAbandon appends an abandon record: attempts 1 to attempt of
// run's atom at seq did not commit.
func AppendStreamAbandon(dst []byte, run string, seq, attempt uint64) []byte {
	dst = append(dst, byte(KindStreamAbandon))
	dst = AppendString(dst, run)
	dst = binary.AppendUvarint(dst, seq)
	return binary.AppendUvarint(dst, attempt)
}

// chunkAAD appends the place of a sealed chunk: AppendAAD's, then the
// stream, attempt and offset.
func chunkAAD(dst []byte, store [16]byte, run string, seq, attempt uint64, stream string, offset uint64) []byte {
	dst = AppendAAD(dst, store, KindStreamChunk, run, seq)
	dst = binary.AppendUvarint(dst, attempt)
	dst = AppendString(dst, stream)
	return binary.AppendUvarint(dst, offset)
}

// SealChunk appends data sealed with run's data key for its place.
func (s *Sealer) SealChunk(dst, data []byte, run string, seq, attempt uint64, stream string, offset uint64) ([]byte, error) {
	key, ok := s.Keys.Scope(run)
	if !ok {
		return dst, fmt.Errorf("record: run %q has no data key in the key table", run)
	}
	var aad [320]byte
	return key.Seal(dst, data, chunkAAD(aad[:0], s.Store, run, seq, attempt, stream, offset))
}

// decodeStream decodes the fields of a stream chunk or abandon record
// after its kind; a sealed chunk's data is opened if d can.
func (d *Decoder) decodeStream(f *Fields, file string, r *Record, names *runNames) error {
	r.Run = names.runID(f, true)
	r.Seq = f.Uvarint("seq")
	r.Attempt = f.Uvarint("attempt")
	if f.err == nil && (r.Seq == 0 || r.Attempt == 0) {
		f.Fail("seq %d attempt %d: both start at 1", r.Seq, r.Attempt)
	}
	if r.Kind == KindStreamAbandon {
		f.Done("stream abandon record")
		return nil
	}
	name := f.Bytes("stream name", MaxStreamNameLen)
	r.Offset = f.Uvarint("offset")
	if f.err != nil {
		return nil
	}
	r.Stream = string(name)
	if err := CheckStreamName(r.Stream); err != nil {
		f.Fail("%v", err)
		return nil
	}
	data := f.Rest()
	if !d.Sealed {
		if len(data) > MaxChunkSize {
			f.Fail("chunk data of %d bytes, the limit is %d", len(data), MaxChunkSize)
		}
		r.Chunk = data
		return nil
	}
	if len(data) > MaxChunkSize+MaxSealOverhead {
		f.Fail("sealed chunk data of %d bytes, the limit is %d", len(data), MaxChunkSize+MaxSealOverhead)
		return nil
	}
	r.Stored = data
	if !seal.IsSealed(data) {
		return d.sealDamage(file, r, "stream chunk", errors.New("not sealed, in an encrypted store"))
	}
	if d.Sealer == nil {
		return nil
	}
	plain, err := d.Sealer.OpenChunk(r)
	if err != nil {
		if errors.Is(err, seal.ErrErased) {
			r.Erased = true
			return nil
		}
		return d.sealDamage(file, r, "stream chunk", err)
	}
	r.Chunk, r.Opened = plain, true
	return nil
}

// OpenChunk opens the sealed data of stream chunk r (r.Stored). A chunk
// whose run's key was erased matches seal.ErrErased.
func (s *Sealer) OpenChunk(r *Record) ([]byte, error) {
	var aad [320]byte
	plain, err := seal.Open(nil, r.Stored, chunkAAD(aad[:0], s.Store, r.Run, r.Seq, r.Attempt, r.Stream, r.Offset), s.Keys.Key)
	if err == nil && plain == nil {
		plain = []byte{}
	}
	return plain, err
}
