package replicate

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"strconv"

	"github.com/continuumdb/continuum/wal"
)

// The stream's messages. These names and layouts are frozen: a stream
// written by one version is read by every later one.
//
// Every message of a store's stream is published to one of three subjects
// under the store's prefix, with these headers:
//
//	subject          Continuum-Kind  other headers              body
//	<prefix>.fence   fence           Continuum-Epoch, -Node     empty
//	<prefix>.file    file            Continuum-Epoch, -File     file bytes | crc32c
//	<prefix>.log     log             Continuum-Epoch, -Part     group part
//
// A fence opens an epoch: the writer that took the lease publishes it
// before anything else, and every later message of the stream carries its
// epoch until the next fence. Epochs of fences increase strictly.
//
// A group commit of the engine's log is encoded once,
//
//	+-----------+---------------------------------------------------+--------+
//	| uvarint n | n appends: uvarint r, then r records: uvarint len |  crc32c |
//	|  appends  |            and the record's bytes                 |  (4 B)  |
//	+-----------+---------------------------------------------------+--------+
//
// (crc32c, little endian, over everything before it), and published in
// parts of at most the connection's payload limit: Continuum-Part is "i/n",
// part i of n, from 1. The parts of a group are consecutive messages of one
// epoch; a group whose parts a fence cuts was never acknowledged, and a
// restore drops it.
const (
	hdrKind  = "Continuum-Kind"
	hdrEpoch = "Continuum-Epoch"
	hdrNode  = "Continuum-Node"
	hdrFile  = "Continuum-File"
	hdrPart  = "Continuum-Part"

	kindFence = "fence"
	kindFile  = "file"
	kindLog   = "log"

	subjFence = "fence"
	subjFile  = "file"
	subjLog   = "log"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errFormat marks a message of the stream that does not decode.
var errFormat = errors.New("replicate: malformed message")

// encodeGroup encodes the appends of one group commit.
func encodeGroup(appends [][][]byte) []byte {
	n := binary.MaxVarintLen64 + 4
	for _, a := range appends {
		n += binary.MaxVarintLen64
		for _, r := range a {
			n += binary.MaxVarintLen64 + len(r)
		}
	}
	b := make([]byte, 0, n)
	b = binary.AppendUvarint(b, uint64(len(appends)))
	for _, a := range appends {
		b = binary.AppendUvarint(b, uint64(len(a)))
		for _, r := range a {
			b = binary.AppendUvarint(b, uint64(len(r)))
			b = append(b, r...)
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeGroup decodes a group encoded by encodeGroup. The records returned
// alias b.
func decodeGroup(b []byte) ([][][]byte, error) {
	if len(b) < 5 {
		return nil, fmt.Errorf("%w: group of %d bytes", errFormat, len(b))
	}
	body := b[:len(b)-4]
	if got, want := binary.LittleEndian.Uint32(b[len(b)-4:]), crc32.Checksum(body, castagnoli); got != want {
		return nil, fmt.Errorf("%w: group checksum %08x, computed %08x", errFormat, got, want)
	}
	next := func(what string) (uint64, error) {
		v, n := binary.Uvarint(body)
		if n <= 0 {
			return 0, fmt.Errorf("%w: bad varint (%s) at %d bytes from the end", errFormat, what, len(body))
		}
		body = body[n:]
		return v, nil
	}
	na, err := next("appends")
	if err != nil {
		return nil, err
	}
	if na > uint64(len(body)) {
		return nil, fmt.Errorf("%w: %d appends in %d bytes", errFormat, na, len(body))
	}
	appends := make([][][]byte, 0, na)
	for range na {
		nr, err := next("records")
		if err != nil {
			return nil, err
		}
		if nr == 0 || nr > uint64(len(body)) {
			return nil, fmt.Errorf("%w: an append of %d records in %d bytes", errFormat, nr, len(body))
		}
		recs := make([][]byte, 0, nr)
		for range nr {
			l, err := next("record length")
			if err != nil {
				return nil, err
			}
			if l > uint64(len(body)) {
				return nil, fmt.Errorf("%w: a record of %d bytes, %d left", errFormat, l, len(body))
			}
			recs = append(recs, body[:l:l])
			body = body[l:]
		}
		appends = append(appends, recs)
	}
	if len(body) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last append", errFormat, len(body))
	}
	return appends, nil
}

// sealFile appends the checksum to a file's bytes.
func sealFile(data []byte) []byte {
	b := make([]byte, 0, len(data)+4)
	b = append(b, data...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(data, castagnoli))
}

// openFile checks and strips the checksum sealFile added.
func openFile(b []byte) ([]byte, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: file message of %d bytes", errFormat, len(b))
	}
	data := b[:len(b)-4]
	if got, want := binary.LittleEndian.Uint32(b[len(b)-4:]), crc32.Checksum(data, castagnoli); got != want {
		return nil, fmt.Errorf("%w: file checksum %08x, computed %08x", errFormat, got, want)
	}
	return data, nil
}

// formatPart and parsePart write and read Continuum-Part.
func formatPart(i, n int) string { return strconv.Itoa(i) + "/" + strconv.Itoa(n) }

func parsePart(s string) (i, n int, err error) {
	for k := 0; k < len(s); k++ {
		if s[k] == '/' {
			i, err1 := strconv.Atoi(s[:k])
			n, err2 := strconv.Atoi(s[k+1:])
			if err1 != nil || err2 != nil || i < 1 || n < i {
				break
			}
			return i, n, nil
		}
	}
	return 0, 0, fmt.Errorf("%w: %s %q", errFormat, hdrPart, s)
}

// REPLICA, in a replicated store's directory beside the engine's files,
// says which prefix of the stream the directory's log holds, so that a
// node that opens its own copy again reads only what it lacks. It is
// written by the node (never published), atomically (a temporary file,
// fsync, rename, fsync of the directory), 118 bytes, little endian:
//
//	+----------+---------+----------+---------+-------+---------------+-----+
//	| "CNTMREPL"| version | store id | created | epoch | log position  | seq |
//	|   8 B    |  u16    |   16 B   |  i64    |  u64  | u64 seg, i64  | u64 |
//	+----------+---------+----------+---------+-------+---------------+-----+
//	| pending records u64 | pending seq u64 | pending sha256 (32 B) | crc32c |
//	+---------------------+-----------------+-----------------------+--------+
//
// (crc32c over everything before it). It states: the local log before the
// position holds exactly the records of the stream's groups among messages
// 1 to seq, in order (a group a fence cut is no group), and message seq is
// of epoch epoch. If pending records n > 0, the n records that follow the
// position in the local log, hashed as recordsHash does, are the group
// whose parts are messages seq+1 to pending seq, of the same epoch; Open
// believes that part only if the local records hash so. The store id is
// STORE's (zero: the store did not exist yet, and the position is the
// log's start); created is the stream's creation time (Unix nanoseconds),
// which tells this stream from an earlier one of the same name.
const (
	markName    = "REPLICA"
	markMagic   = "CNTMREPL"
	markVersion = 1
	markSize    = 8 + 2 + 16 + 8 + 8 + 16 + 8 + 8 + 8 + sha256.Size + 4
)

// mark is the content of REPLICA.
type mark struct {
	StoreID [16]byte
	Created int64
	Epoch   uint64
	Pos     wal.Pos
	Seq     uint64
	// Pending is the group after Pos, if PendingRecords > 0.
	PendingRecords uint64
	PendingSeq     uint64
	PendingHash    [sha256.Size]byte
}

func (m *mark) marshal() []byte {
	b := make([]byte, 0, markSize)
	b = append(b, markMagic...)
	b = binary.LittleEndian.AppendUint16(b, markVersion)
	b = append(b, m.StoreID[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.Created))
	b = binary.LittleEndian.AppendUint64(b, m.Epoch)
	b = binary.LittleEndian.AppendUint64(b, m.Pos.Segment)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.Pos.Offset))
	b = binary.LittleEndian.AppendUint64(b, m.Seq)
	b = binary.LittleEndian.AppendUint64(b, m.PendingRecords)
	b = binary.LittleEndian.AppendUint64(b, m.PendingSeq)
	b = append(b, m.PendingHash[:]...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// errMark marks a REPLICA file that does not decode.
var errMark = errors.New("replicate: malformed " + markName)

func parseMark(b []byte) (*mark, error) {
	if len(b) != markSize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", errMark, len(b), markSize)
	}
	if string(b[:8]) != markMagic {
		return nil, fmt.Errorf("%w: bad magic %q", errMark, b[:8])
	}
	if got, want := binary.LittleEndian.Uint32(b[markSize-4:]), crc32.Checksum(b[:markSize-4], castagnoli); got != want {
		return nil, fmt.Errorf("%w: checksum %08x, computed %08x", errMark, got, want)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != markVersion {
		return nil, fmt.Errorf("%w: unknown version %d", errMark, v)
	}
	m := &mark{}
	b = b[10:]
	copy(m.StoreID[:], b)
	b = b[16:]
	u := func() uint64 { v := binary.LittleEndian.Uint64(b); b = b[8:]; return v }
	m.Created = int64(u())
	m.Epoch = u()
	m.Pos.Segment = u()
	m.Pos.Offset = int64(u())
	m.Seq = u()
	m.PendingRecords = u()
	m.PendingSeq = u()
	copy(m.PendingHash[:], b)
	if m.Pos.Offset < 0 || (m.PendingRecords > 0) != (m.PendingSeq > m.Seq) || (m.PendingRecords == 0 && m.PendingSeq != 0) {
		return nil, fmt.Errorf("%w: position %v, seq %d, pending %d records to seq %d", errMark, m.Pos, m.Seq, m.PendingRecords, m.PendingSeq)
	}
	return m, nil
}

// recordsHash hashes records as REPLICA's pending hash: SHA-256 of every
// record's uvarint length and bytes, in order.
type recordsHash struct {
	h hash.Hash
	n uint64
}

func newRecordsHash() *recordsHash { return &recordsHash{h: sha256.New()} }

func (r *recordsHash) add(rec []byte) {
	var l [binary.MaxVarintLen64]byte
	r.h.Write(l[:binary.PutUvarint(l[:], uint64(len(rec)))])
	r.h.Write(rec)
	r.n++
}

func (r *recordsHash) sum() (s [sha256.Size]byte) {
	r.h.Sum(s[:0])
	return s
}
