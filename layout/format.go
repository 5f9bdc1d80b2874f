package layout

// The files of a store besides its log. Every constant in this file is
// frozen: a store written by one version must stay readable by every later
// one. A new format gets a new version number, never a changed meaning of
// an old one.
//
// STORE (40 bytes):
//
//	"CNTMSTOR" | version u16 LE | chain mode u16 LE | store id [16] | created i64 LE | crc32c u32 LE
//
// The chain mode is 1 for an unkeyed chain, 2 for a keyed one
// (Options.ChainKey); 0, what stores written before it was recorded hold
// there, says nothing (verify then tells a keyed chain by its links).
// An encrypted store (Options.Keyring) adds ChainSealed (0x0100) to 1 or 2:
// its payloads are sealed (package seal), its key table is KEYS (keys.go),
// and its chain links each record over its stored, sealed bytes.
//
// CHECKPOINT, version 3 (written):
//
//	"CNTMCKPT" | version u16 LE | uvarint gen | uvarint replay segment |
//	uvarint replay offset | uvarint ledger table gen (0 = none) | store id [16] |
//	uvarint newest dictionary id (0 = none) |
//	uvarint nruns | nruns x run | crc32c u32 LE of all before
//
// Version 2 is version 3 without a run's end and fork fields; version 1
// is version 2 without the dictionary id. Both are still read. The dictionary id is
// the newest dictionary that existed when the checkpoint was taken: the
// log may hold records compressed with it, so Open refuses a store that
// lacks it (dictionaries cannot be rebuilt from the log).
//	run: uvarint len | id | nonce [16] | varint created | uvarint last seq |
//	     head [32] | uvarint frame seq | uvarint indexed seq | uvarint snapshot seq |
//	     uvarint checkpoint seq | checkpoint head [32] |
//	     uvarint n | n x (uvarint index | fingerprint [32]) |
//	     status (version 3: 0 active, else an end record's status) |
//	     [status != 0: varint ended | end head [32] | uvarint len | result] |
//	     uvarint len | parent id (0: not a fork) | [parent: uvarint fork point | base head [32]]
//
// An ended run's end head is h(last seq + 1), the end record's link; a
// fork's head at its fork point (last seq, before its first atom) is its
// fork genesis, which base head holds too (the run's head at its fork
// point, whatever its last seq).
//
// The n pairs list the actions of the atom that was running when the
// checkpoint was taken (seq = last seq + 1), so a crash after it still
// reports them.
//
// frames/<h>.frame:
//
//	"CNTMFRAM" | version u16 LE | uvarint len | run id | uvarint seq | head [32] |
//	uvarint len | compressed(frame.AppendFrame) | crc32c u32 LE of all before
//
// dicts/<id>.dict:
//
//	"CNTMDICT" | version u16 LE | id u32 LE | uvarint len | dictionary | crc32c u32 LE
//
// snapshots/ (Pebble, package snapshot) holds one engine metadata key:
//
//	"engine/checkpoint-gen" -> gen u64 BE
//
// the generation of the last engine checkpoint whose batch it holds. A
// checkpoint commits that batch (synced) before it replaces CHECKPOINT, so
// a snapshot store whose generation is below CHECKPOINT's lost what it had
// (a rebuild interrupted by a crash leaves a new, empty one) and is
// re-indexed from the log.

import (
	"encoding/binary"
	"math"
	"strings"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/crc32c"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

const (
	storeMagic      = "CNTMSTOR"
	checkpointMagic = "CNTMCKPT"
	frameFileMagic  = "CNTMFRAM"
	dictFileMagic   = "CNTMDICT"

	storeVersion = 1
	// CheckpointVersion is the version of CHECKPOINT written; version 1 is
	// still read.
	CheckpointVersion = 3
	frameFileVersion  = 1
	dictFileVersion   = 1

	// StoreFileSize is the size of STORE.
	StoreFileSize = 40
)

// --- STORE ---

type Store struct {
	ID      [16]byte
	Created int64
	Mode    uint16 // ChainUnrecorded, ChainUnkeyed or ChainKeyed, plus ChainSealed
}

// Chain modes of the STORE file.
const (
	ChainUnrecorded uint16 = 0
	ChainUnkeyed    uint16 = 1
	ChainKeyed      uint16 = 2
	// ChainSealed, added to ChainUnkeyed or ChainKeyed, marks an
	// encrypted store.
	ChainSealed uint16 = 0x0100
)

// Sealed reports whether the store is encrypted.
func (s *Store) Sealed() bool { return s.Mode&ChainSealed != 0 }

// Keyed reports whether the store's chain is keyed.
func (s *Store) Keyed() bool { return s.Mode&^ChainSealed == ChainKeyed }

func (s *Store) Marshal() []byte {
	b := make([]byte, 0, StoreFileSize)
	b = append(b, storeMagic...)
	b = binary.LittleEndian.AppendUint16(b, storeVersion)
	b = binary.LittleEndian.AppendUint16(b, s.Mode)
	b = append(b, s.ID[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(s.Created))
	return binary.LittleEndian.AppendUint32(b, crc32c.Checksum(b))
}

func ParseStore(name string, b []byte) (*Store, error) {
	if len(b) != StoreFileSize {
		return nil, record.Corruptf(name, "size %d, want %d", len(b), StoreFileSize)
	}
	if string(b[:8]) != storeMagic {
		return nil, record.Corruptf(name, "bad magic %q", b[:8])
	}
	if got, want := binary.LittleEndian.Uint32(b[36:]), crc32c.Checksum(b[:36]); got != want {
		return nil, record.Corruptf(name, "checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != storeVersion {
		return nil, record.Corruptf(name, "unknown version %d", v)
	}
	s := &Store{Created: int64(binary.LittleEndian.Uint64(b[28:])), Mode: binary.LittleEndian.Uint16(b[10:])}
	if base := s.Mode &^ ChainSealed; base > ChainKeyed || (base == ChainUnrecorded && s.Mode != base) {
		return nil, record.Corruptf(name, "unknown chain mode %d", s.Mode)
	}
	copy(s.ID[:], b[12:28])
	return s, nil
}

// --- CHECKPOINT ---

type InflightAction struct {
	Index uint32
	FP    ledger.Fingerprint
}

type CheckpointRun struct {
	ID         string
	Nonce      chain.Nonce
	Created    int64
	LastSeq    uint64
	Head       chain.Hash
	FrameSeq   uint64     // seq of the run's frame file, 0 = none
	IndexedSeq uint64     // atoms up to here have their position in Pebble
	SnapSeq    uint64     // latest snapshot: in Pebble, or the frame file at FrameSeq
	CkptSeq    uint64     // latest chain checkpoint written
	CkptHead   chain.Hash // the head it names
	Inflight   []InflightAction
	// Version 3: how the run ended (Status 0: it has not), and the run it
	// was forked from and where (Parent "": none).
	Status   uint8
	Ended    int64      // unix nanoseconds
	EndHead  chain.Hash // h(LastSeq+1), the end record's link
	Result   []byte
	Parent   string
	ForkedAt uint64
	BaseHead chain.Hash // a fork's head at ForkedAt: its fork genesis
}

type Checkpoint struct {
	Gen       uint64
	Replay    wal.Pos
	LedgerGen uint64
	StoreID   [16]byte
	Dict      uint32 // newest dictionary id (version 2; 0 = none or unknown)
	Runs      []CheckpointRun
}

func (c *Checkpoint) Marshal() []byte {
	b := make([]byte, 0, 64+len(c.Runs)*128)
	b = append(b, checkpointMagic...)
	b = binary.LittleEndian.AppendUint16(b, CheckpointVersion)
	b = binary.AppendUvarint(b, c.Gen)
	b = binary.AppendUvarint(b, c.Replay.Segment)
	b = binary.AppendUvarint(b, uint64(c.Replay.Offset))
	b = binary.AppendUvarint(b, c.LedgerGen)
	b = append(b, c.StoreID[:]...)
	b = binary.AppendUvarint(b, uint64(c.Dict))
	b = binary.AppendUvarint(b, uint64(len(c.Runs)))
	for i := range c.Runs {
		r := &c.Runs[i]
		b = record.AppendString(b, r.ID)
		b = append(b, r.Nonce[:]...)
		b = binary.AppendVarint(b, r.Created)
		b = binary.AppendUvarint(b, r.LastSeq)
		b = append(b, r.Head[:]...)
		b = binary.AppendUvarint(b, r.FrameSeq)
		b = binary.AppendUvarint(b, r.IndexedSeq)
		b = binary.AppendUvarint(b, r.SnapSeq)
		b = binary.AppendUvarint(b, r.CkptSeq)
		b = append(b, r.CkptHead[:]...)
		b = binary.AppendUvarint(b, uint64(len(r.Inflight)))
		for _, a := range r.Inflight {
			b = binary.AppendUvarint(b, uint64(a.Index))
			b = append(b, a.FP[:]...)
		}
		b = append(b, r.Status)
		if r.Status != 0 {
			b = binary.AppendVarint(b, r.Ended)
			b = append(b, r.EndHead[:]...)
			b = record.AppendBytes(b, r.Result)
		}
		b = record.AppendString(b, r.Parent)
		if r.Parent != "" {
			b = binary.AppendUvarint(b, r.ForkedAt)
			b = append(b, r.BaseHead[:]...)
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32c.Checksum(b))
}

func ParseCheckpoint(name string, b []byte) (*Checkpoint, error) {
	if len(b) < len(checkpointMagic)+2+4 {
		return nil, record.Corruptf(name, "%d bytes is too short", len(b))
	}
	if string(b[:8]) != checkpointMagic {
		return nil, record.Corruptf(name, "bad magic %q", b[:8])
	}
	body := b[:len(b)-4]
	if got, want := binary.LittleEndian.Uint32(b[len(b)-4:]), crc32c.Checksum(body); got != want {
		return nil, record.Corruptf(name, "checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	v := binary.LittleEndian.Uint16(b[8:])
	if v < 1 || v > CheckpointVersion {
		return nil, record.Corruptf(name, "unknown version %d", v)
	}
	d := record.NewFields(body, 10)
	c := &Checkpoint{}
	c.Gen = d.Uvarint("generation")
	c.Replay.Segment = d.Uvarint("replay segment")
	if off := d.Uvarint("replay offset"); off > math.MaxInt64 {
		d.Fail("replay offset %d exceeds the largest file offset", off)
	} else {
		c.Replay.Offset = int64(off)
	}
	c.LedgerGen = d.Uvarint("ledger generation")
	copy(c.StoreID[:], d.Fixed("store id", 16))
	if v >= 2 {
		if id := d.Uvarint("dictionary id"); id > 0xffffffff {
			d.Fail("dictionary id %d exceeds 32 bits", id)
		} else {
			c.Dict = uint32(id)
		}
	}
	n := d.Uvarint("run count")
	if d.Err() == nil && n > uint64(len(body)) {
		d.Fail("run count %d exceeds the file", n)
	}
	if d.Err() == nil {
		c.Runs = make([]CheckpointRun, 0, n)
	}
	// The run ids are sliced from one string built after the loop: one
	// allocation for all of them instead of one per run.
	var ids [][]byte
	if d.Err() == nil {
		ids = make([][]byte, 0, n)
	}
	idBytes := 0
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		var r CheckpointRun
		id := d.RunIDBytes()
		ids = append(ids, id)
		idBytes += len(id)
		copy(r.Nonce[:], d.Fixed("nonce", 16))
		r.Created = d.Varint("created")
		r.LastSeq = d.Uvarint("last seq")
		r.Head = d.Hash("head")
		r.FrameSeq = d.Uvarint("frame seq")
		r.IndexedSeq = d.Uvarint("indexed seq")
		r.SnapSeq = d.Uvarint("snapshot seq")
		r.CkptSeq = d.Uvarint("checkpoint seq")
		r.CkptHead = d.Hash("checkpoint head")
		na := d.Uvarint("in-flight count")
		if d.Err() == nil && na > record.MaxActionsPerAtom {
			d.Fail("in-flight count %d exceeds %d", na, record.MaxActionsPerAtom)
		}
		for j := uint64(0); j < na && d.Err() == nil; j++ {
			idx := d.Uvarint("in-flight index")
			if d.Err() == nil && idx > math.MaxUint32 {
				d.Fail("in-flight index %d exceeds 32 bits", idx)
			}
			fp := d.Hash("in-flight fingerprint")
			r.Inflight = append(r.Inflight, InflightAction{Index: uint32(idx), FP: fp})
		}
		if v >= 3 {
			r.Status = d.Byte("status")
			if d.Err() == nil && r.Status > record.EndCancelled {
				d.Fail("run %q: unknown status %d", id, r.Status)
			}
			if r.Status != 0 {
				r.Ended = d.Varint("ended")
				r.EndHead = d.Hash("end head")
				r.Result = d.Bytes("result", record.MaxEndResult)
			}
			if p := d.Bytes("parent", record.MaxRunIDLen); len(p) > 0 {
				r.Parent = string(p)
				if err := record.CheckRunID(r.Parent); err != nil {
					d.Fail("run %q: parent: %v", id, err)
				}
				r.ForkedAt = d.Uvarint("fork point")
				r.BaseHead = d.Hash("base head")
				if d.Err() == nil && r.ForkedAt > r.LastSeq {
					d.Fail("run %q: fork point %d beyond its last seq %d", id, r.ForkedAt, r.LastSeq)
				}
			}
		}
		if d.Err() == nil && (r.FrameSeq > r.LastSeq || r.IndexedSeq > r.LastSeq || r.SnapSeq > r.LastSeq) {
			d.Fail("run %q: frame/indexed/snapshot seq beyond last seq %d", id, r.LastSeq)
		}
		c.Runs = append(c.Runs, r)
	}
	if err := d.Done("checkpoint"); err != nil {
		return nil, record.Corruptf(name, "%v", err)
	}
	var all strings.Builder
	all.Grow(idBytes)
	for _, id := range ids {
		all.Write(id)
	}
	s, off := all.String(), 0
	for i, id := range ids {
		c.Runs[i].ID = s[off : off+len(id)]
		off += len(id)
	}
	return c, nil
}

// --- frames/<h>.frame ---

type FrameFile struct {
	Run   string
	Seq   uint64
	Head  chain.Hash
	Frame []byte // compressed frame encoding, aliases the input
}

func (f *FrameFile) Marshal() []byte {
	b := make([]byte, 0, 64+len(f.Run)+len(f.Frame))
	b = append(b, frameFileMagic...)
	b = binary.LittleEndian.AppendUint16(b, frameFileVersion)
	b = record.AppendString(b, f.Run)
	b = binary.AppendUvarint(b, f.Seq)
	b = append(b, f.Head[:]...)
	b = record.AppendBytes(b, f.Frame)
	return binary.LittleEndian.AppendUint32(b, crc32c.Checksum(b))
}

func ParseFrameFile(name string, b []byte) (*FrameFile, error) {
	body, err := checkedBody(name, b, frameFileMagic, 8+2+4, "a frame file", frameFileVersion)
	if err != nil {
		return nil, err
	}
	d := record.NewFields(body, 10)
	f := &FrameFile{}
	f.Run = d.RunID()
	f.Seq = d.Uvarint("seq")
	f.Head = d.Hash("head")
	f.Frame = d.Bytes("frame", len(body))
	if err := d.Done("frame file"); err != nil {
		return nil, record.Corruptf(name, "%v", err)
	}
	return f, nil
}

// --- dicts/<id>.dict ---

func MarshalDict(id uint32, dict []byte) []byte {
	b := make([]byte, 0, 32+len(dict))
	b = append(b, dictFileMagic...)
	b = binary.LittleEndian.AppendUint16(b, dictFileVersion)
	b = binary.LittleEndian.AppendUint32(b, id)
	b = record.AppendBytes(b, dict)
	return binary.LittleEndian.AppendUint32(b, crc32c.Checksum(b))
}

func ParseDict(name string, b []byte) (uint32, []byte, error) {
	body, err := checkedBody(name, b, dictFileMagic, 8+2+4+4, "a dictionary file", dictFileVersion)
	if err != nil {
		return 0, nil, err
	}
	id := binary.LittleEndian.Uint32(b[10:])
	d := record.NewFields(body, 14)
	dict := d.Bytes("dictionary", len(body))
	if err := d.Done("dictionary file"); err != nil {
		return 0, nil, record.Corruptf(name, "%v", err)
	}
	if id == 0 {
		return 0, nil, record.Corruptf(name, "dictionary id 0 is reserved")
	}
	return id, dict, nil
}

// DecodeFrame decompresses and decodes the frame of a frame file (its
// Frame field) with comp. Damage is a *record.CorruptionError of where.
func DecodeFrame(comp record.Compressor, compressed []byte, where string) (*frame.Frame, error) {
	raw, err := comp.Decompress(nil, compressed)
	if err != nil {
		return nil, record.Corruptf(where, "frame: %v", err)
	}
	return DecodeRawFrame(raw, where) // raw is this call's own
}

// DecodeRawFrame decodes a frame's raw (uncompressed) encoding, which the
// caller hands over: the frame aliases raw. A malformed encoding is a
// corruption error naming where.
func DecodeRawFrame(raw []byte, where string) (*frame.Frame, error) {
	f, err := frame.DecodeFrameOwned(raw)
	if err != nil {
		return nil, record.Corruptf(where, "frame: %v", err)
	}
	if f.Memory == nil {
		f.Memory = map[string][]byte{}
	}
	return f, nil
}

// checkedBody checks a file laid out as an 8-byte magic, a 2-byte
// version, its fields and a CRC-32C of all before it: at least min bytes,
// the magic, the checksum and the version. It returns the file without
// its checksum; damage is a *record.CorruptionError naming name and what
// the file should have been ("a frame file").
func checkedBody(name string, b []byte, magic string, min int, what string, version uint16) ([]byte, error) {
	if len(b) < min || string(b[:8]) != magic {
		return nil, record.Corruptf(name, "not %s (bad magic or %d bytes)", what, len(b))
	}
	body := b[:len(b)-4]
	if got, want := binary.LittleEndian.Uint32(b[len(b)-4:]), crc32c.Checksum(body); got != want {
		return nil, record.Corruptf(name, "checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != version {
		return nil, record.Corruptf(name, "unknown version %d", v)
	}
	return body, nil
}
