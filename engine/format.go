package engine

// The engine's on-disk formats. Every constant in this file is frozen: a
// store written by one version must stay readable by every later one. A new
// format gets a new version number, never a changed meaning of an old one.
//
// A store is one directory:
//
//	DIR/
//	  LOCK                 advisory lock: one process per store
//	  STORE                identity: store id and creation time (written once,
//	                       after the log's first segment is durable)
//	  CHECKPOINT           engine checkpoint: where restart replays from, the
//	                       runs' heads (replaced atomically)
//	  ledger-<gen>.tbl     the ledger's persisted fingerprint index, named by
//	                       the checkpoint generation that wrote it
//	  frames/<h>.frame     the latest frame of each run as of some checkpoint,
//	                       h = hex of the first 16 bytes of BLAKE3(run id)
//	  dicts/<id>.dict      compression dictionaries, never removed
//	  wal/                 the write-ahead log (package wal)
//	  snapshots/           Pebble: snapshot history and the atom index
//
// # Log records
//
// Each log record (one wal record) starts with a kind byte:
//
//	run         1 | uvarint len | run id | nonce [16] | varint created (unix ns)
//	intent      2 | compressed(ledger intent)
//	certificate 3 | compressed(ledger certificate)
//	atom        4 | uvarint len | run id | uvarint seq | head [32] | compressed(body)
//	fail        5 | uvarint len | run id | uvarint seq | uvarint len | reason
//	checkpoint  6 | chain checkpoint (signed note, or unsigned)
//	store head  7 | chain store head (signed note, or unsigned)
//
// compressed(x) is frame.Compressor's format: a codec byte, a dictionary id,
// the payload. An atom body is
//
//	version 1 | uvarint n | n x fingerprint [32] | delta (frame.AppendDelta)
//
// listing the fingerprints of the actions the atom performed, in call order.
// The chain links an atom over its body followed by BLAKE3-256 of each
// action's certified result: the hash covers the content, not its
// compressed form, so a changed dictionary or a changed certificate is
// detected as surely as a changed delta.
//
// # Files
//
// STORE (40 bytes):
//
//	"CNTMSTOR" | version u16 LE | chain mode u16 LE | store id [16] | created i64 LE | crc32c u32 LE
//
// The chain mode is 1 for an unkeyed chain, 2 for a keyed one
// (Options.ChainKey); 0, what stores written before it was recorded hold
// there, says nothing (verify then tells a keyed chain by its links).
//
// CHECKPOINT, version 2:
//
//	"CNTMCKPT" | version u16 LE | uvarint gen | uvarint replay segment |
//	uvarint replay offset | uvarint ledger table gen (0 = none) | store id [16] |
//	uvarint newest dictionary id (0 = none) |
//	uvarint nruns | nruns x run | crc32c u32 LE of all before
//
// Version 1 is version 2 without the dictionary id. The dictionary id is
// the newest dictionary that existed when the checkpoint was taken: the
// log may hold records compressed with it, so Open refuses a store that
// lacks it (dictionaries cannot be rebuilt from the log).
//	run: uvarint len | id | nonce [16] | varint created | uvarint last seq |
//	     head [32] | uvarint frame seq | uvarint indexed seq | uvarint snapshot seq |
//	     uvarint checkpoint seq | checkpoint head [32] |
//	     uvarint n | n x (uvarint index | fingerprint [32])
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
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"unicode/utf8"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/ledger"
)

const (
	storeMagic      = "CNTMSTOR"
	checkpointMagic = "CNTMCKPT"
	frameFileMagic  = "CNTMFRAM"
	dictFileMagic   = "CNTMDICT"

	storeVersion      = 1
	checkpointVersion = 2 // written; version 1 is still read
	frameFileVersion  = 1
	dictFileVersion   = 1
	atomBodyVersion   = 1

	storeFileSize = 40

	// metaCheckpointGen is the snapshot store's metadata key holding the
	// generation of the last engine checkpoint it took part in.
	metaCheckpointGen = "engine/checkpoint-gen"

	// MaxRunIDLen bounds a run id, in bytes.
	MaxRunIDLen = 256
	// maxActionsPerAtom bounds the actions one atom may perform.
	maxActionsPerAtom = 1 << 16
	// maxFailReason bounds the reason stored by Fail.
	maxFailReason = 64 << 10
)

// Record kinds, the first byte of every log record.
const (
	kindRun        byte = 1
	kindIntent     byte = 2
	kindCert       byte = 3
	kindAtom       byte = 4
	kindFail       byte = 5
	kindCheckpoint byte = 6
	kindStoreHead  byte = 7
)

func kindName(k byte) string {
	switch k {
	case kindRun:
		return "run"
	case kindIntent:
		return "intent"
	case kindCert:
		return "certificate"
	case kindAtom:
		return "atom"
	case kindFail:
		return "fail"
	case kindCheckpoint:
		return "checkpoint"
	case kindStoreHead:
		return "store-head"
	}
	return fmt.Sprintf("kind-%d", k)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// validRunID reports why id cannot name a run, or nil.
func validRunID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty", ErrInvalidRunID)
	case len(id) > MaxRunIDLen:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidRunID, len(id), MaxRunIDLen)
	}
	ascii := true
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c >= 0x7f {
			ascii = false
			break
		}
	}
	if ascii { // the common case: printable ASCII
		return nil
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidRunID, id)
	}
	for i, r := range id {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: %q has a control character at byte %d", ErrInvalidRunID, id, i)
		}
	}
	return nil
}

// decoder reads the engine's varint formats with bounds checks. The first
// error sticks; every read after it returns zero values.
type decoder struct {
	b   []byte
	off int
	err error
}

var errShort = errors.New("truncated")

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("at byte %d: %s", d.off, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("%s: bad or truncated varint", what)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail("%s: bad or truncated varint", what)
		return 0
	}
	d.off += n
	return v
}

// bytes reads a uvarint length and that many bytes, at most max. The result
// aliases the input.
func (d *decoder) bytes(what string, max int) []byte {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(max) {
		d.fail("%s: length %d exceeds the bound %d", what, n, max)
		return nil
	}
	return d.fixed(what, int(n))
}

func (d *decoder) fixed(what string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b)-d.off {
		d.fail("%s: need %d bytes, %d left", what, n, len(d.b)-d.off)
		return nil
	}
	v := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return v
}

func (d *decoder) byte1(what string) byte {
	b := d.fixed(what, 1)
	if b == nil {
		return 0
	}
	return b[0]
}

func (d *decoder) hash(what string) (h [32]byte) {
	copy(h[:], d.fixed(what, 32))
	return h
}

func (d *decoder) runID() string { return string(d.runIDBytes()) }

// runIDBytes reads a run id and returns it as a slice of the input.
func (d *decoder) runIDBytes() []byte {
	id := d.bytes("run id", MaxRunIDLen)
	if d.err == nil {
		if err := validRunID(string(id)); err != nil {
			d.fail("%v", err)
		}
	}
	return id
}

func (d *decoder) done(what string) error {
	if d.err == nil && d.off != len(d.b) {
		d.fail("%s: %d trailing bytes", what, len(d.b)-d.off)
	}
	return d.err
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst []byte, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// --- log records ---

type runRecord struct {
	id      string
	nonce   chain.Nonce
	created int64
}

func appendRunRecord(dst []byte, r *runRecord) []byte {
	dst = append(dst, kindRun)
	dst = appendString(dst, r.id)
	dst = append(dst, r.nonce[:]...)
	return binary.AppendVarint(dst, r.created)
}

func decodeRunRecord(b []byte) (*runRecord, error) {
	d := decoder{b: b, off: 1}
	r := &runRecord{}
	r.id = d.runID()
	copy(r.nonce[:], d.fixed("nonce", len(r.nonce)))
	r.created = d.varint("created")
	return r, d.done("run record")
}

// atomRecord is an atom's log record. body is compressed on disk.
type atomRecord struct {
	run  string
	seq  uint64
	head chain.Hash
	body []byte // compressed body, aliases the record
}

func appendAtomHeader(dst []byte, run string, seq uint64, head chain.Hash) []byte {
	dst = append(dst, kindAtom)
	dst = appendString(dst, run)
	dst = binary.AppendUvarint(dst, seq)
	return append(dst, head[:]...)
}

func decodeAtomRecord(b []byte) (*atomRecord, error) {
	d := decoder{b: b, off: 1}
	a := &atomRecord{}
	a.run = d.runID()
	a.seq = d.uvarint("seq")
	a.head = d.hash("head")
	if d.err == nil && a.seq == 0 {
		d.fail("seq 0 is not an atom")
	}
	if d.err != nil {
		return nil, fmt.Errorf("atom record: %w", d.err)
	}
	a.body = b[d.off:]
	return a, nil
}

// atomBody is the uncompressed body of an atom record.
type atomBody struct {
	actions []ledger.Fingerprint
	delta   []byte // frame.AppendDelta encoding, aliases the input
}

func appendAtomBody(dst []byte, actions []ledger.Fingerprint, delta []byte) []byte {
	dst = append(dst, atomBodyVersion)
	dst = binary.AppendUvarint(dst, uint64(len(actions)))
	for _, fp := range actions {
		dst = append(dst, fp[:]...)
	}
	return append(dst, delta...)
}

func decodeAtomBody(b []byte) (*atomBody, error) {
	d := decoder{b: b}
	if v := d.byte1("version"); d.err == nil && v != atomBodyVersion {
		d.fail("unknown atom body version %d", v)
	}
	n := d.uvarint("action count")
	if d.err == nil && (n > maxActionsPerAtom || n*32 > uint64(len(b)-d.off)) {
		d.fail("action count %d exceeds the record", n)
	}
	if d.err != nil {
		return nil, fmt.Errorf("atom body: %w", d.err)
	}
	a := &atomBody{actions: make([]ledger.Fingerprint, n)}
	for i := range a.actions {
		a.actions[i] = ledger.Fingerprint(d.hash("fingerprint"))
	}
	a.delta = b[d.off:]
	return a, nil
}

type failRecord struct {
	run    string
	seq    uint64
	reason string
}

func appendFailRecord(dst []byte, f *failRecord) []byte {
	dst = append(dst, kindFail)
	dst = appendString(dst, f.run)
	dst = binary.AppendUvarint(dst, f.seq)
	return appendString(dst, f.reason)
}

func decodeFailRecord(b []byte) (*failRecord, error) {
	d := decoder{b: b, off: 1}
	f := &failRecord{}
	f.run = d.runID()
	f.seq = d.uvarint("seq")
	f.reason = string(d.bytes("reason", maxFailReason))
	return f, d.done("fail record")
}

// --- STORE ---

type storeFile struct {
	id      [16]byte
	created int64
	mode    uint16 // chainUnrecorded, chainUnkeyed or chainKeyed
}

// Chain modes of the STORE file.
const (
	chainUnrecorded uint16 = 0
	chainUnkeyed    uint16 = 1
	chainKeyed      uint16 = 2
)

func (s *storeFile) marshal() []byte {
	b := make([]byte, 0, storeFileSize)
	b = append(b, storeMagic...)
	b = binary.LittleEndian.AppendUint16(b, storeVersion)
	b = binary.LittleEndian.AppendUint16(b, s.mode)
	b = append(b, s.id[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(s.created))
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func parseStoreFile(name string, b []byte) (*storeFile, error) {
	if len(b) != storeFileSize {
		return nil, corruptf(name, "size %d, want %d", len(b), storeFileSize)
	}
	if string(b[:8]) != storeMagic {
		return nil, corruptf(name, "bad magic %q", b[:8])
	}
	if got, want := binary.LittleEndian.Uint32(b[36:]), crc32.Checksum(b[:36], castagnoli); got != want {
		return nil, corruptf(name, "checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != storeVersion {
		return nil, corruptf(name, "unknown version %d", v)
	}
	s := &storeFile{created: int64(binary.LittleEndian.Uint64(b[28:])), mode: binary.LittleEndian.Uint16(b[10:])}
	if s.mode > chainKeyed {
		return nil, corruptf(name, "unknown chain mode %d", s.mode)
	}
	copy(s.id[:], b[12:28])
	return s, nil
}

// --- CHECKPOINT ---

type inflightAction struct {
	index uint32
	fp    ledger.Fingerprint
}

type checkpointRun struct {
	id         string
	nonce      chain.Nonce
	created    int64
	lastSeq    uint64
	head       chain.Hash
	frameSeq   uint64     // seq of the run's frame file, 0 = none
	indexedSeq uint64     // atoms up to here have their position in Pebble
	snapSeq    uint64     // latest snapshot in Pebble
	ckptSeq    uint64     // latest chain checkpoint written
	ckptHead   chain.Hash // the head it names
	inflight   []inflightAction
}

type checkpointFile struct {
	gen       uint64
	replay    walPos
	ledgerGen uint64
	storeID   [16]byte
	dict      uint32 // newest dictionary id (version 2; 0 = none or unknown)
	runs      []checkpointRun
}

// walPos mirrors wal.Pos in the engine's formats.
type walPos struct {
	seg uint64
	off int64
}

func (c *checkpointFile) marshal() []byte {
	b := make([]byte, 0, 64+len(c.runs)*128)
	b = append(b, checkpointMagic...)
	b = binary.LittleEndian.AppendUint16(b, checkpointVersion)
	b = binary.AppendUvarint(b, c.gen)
	b = binary.AppendUvarint(b, c.replay.seg)
	b = binary.AppendUvarint(b, uint64(c.replay.off))
	b = binary.AppendUvarint(b, c.ledgerGen)
	b = append(b, c.storeID[:]...)
	b = binary.AppendUvarint(b, uint64(c.dict))
	b = binary.AppendUvarint(b, uint64(len(c.runs)))
	for i := range c.runs {
		r := &c.runs[i]
		b = appendString(b, r.id)
		b = append(b, r.nonce[:]...)
		b = binary.AppendVarint(b, r.created)
		b = binary.AppendUvarint(b, r.lastSeq)
		b = append(b, r.head[:]...)
		b = binary.AppendUvarint(b, r.frameSeq)
		b = binary.AppendUvarint(b, r.indexedSeq)
		b = binary.AppendUvarint(b, r.snapSeq)
		b = binary.AppendUvarint(b, r.ckptSeq)
		b = append(b, r.ckptHead[:]...)
		b = binary.AppendUvarint(b, uint64(len(r.inflight)))
		for _, a := range r.inflight {
			b = binary.AppendUvarint(b, uint64(a.index))
			b = append(b, a.fp[:]...)
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func parseCheckpointFile(name string, b []byte) (*checkpointFile, error) {
	if len(b) < len(checkpointMagic)+2+4 {
		return nil, corruptf(name, "%d bytes is too short", len(b))
	}
	if string(b[:8]) != checkpointMagic {
		return nil, corruptf(name, "bad magic %q", b[:8])
	}
	body := b[:len(b)-4]
	if got, want := binary.LittleEndian.Uint32(b[len(b)-4:]), crc32.Checksum(body, castagnoli); got != want {
		return nil, corruptf(name, "checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	v := binary.LittleEndian.Uint16(b[8:])
	if v != 1 && v != checkpointVersion {
		return nil, corruptf(name, "unknown version %d", v)
	}
	d := decoder{b: body, off: 10}
	c := &checkpointFile{}
	c.gen = d.uvarint("generation")
	c.replay.seg = d.uvarint("replay segment")
	c.replay.off = int64(d.uvarint("replay offset"))
	c.ledgerGen = d.uvarint("ledger generation")
	copy(c.storeID[:], d.fixed("store id", 16))
	if v >= 2 {
		if id := d.uvarint("dictionary id"); id > 0xffffffff {
			d.fail("dictionary id %d exceeds 32 bits", id)
		} else {
			c.dict = uint32(id)
		}
	}
	n := d.uvarint("run count")
	if d.err == nil && n > uint64(len(body)) {
		d.fail("run count %d exceeds the file", n)
	}
	if d.err == nil {
		c.runs = make([]checkpointRun, 0, n)
	}
	// The run ids are sliced from one string built after the loop: one
	// allocation for all of them instead of one per run.
	var ids [][]byte
	if d.err == nil {
		ids = make([][]byte, 0, n)
	}
	idBytes := 0
	for i := uint64(0); i < n && d.err == nil; i++ {
		var r checkpointRun
		id := d.runIDBytes()
		ids = append(ids, id)
		idBytes += len(id)
		copy(r.nonce[:], d.fixed("nonce", 16))
		r.created = d.varint("created")
		r.lastSeq = d.uvarint("last seq")
		r.head = d.hash("head")
		r.frameSeq = d.uvarint("frame seq")
		r.indexedSeq = d.uvarint("indexed seq")
		r.snapSeq = d.uvarint("snapshot seq")
		r.ckptSeq = d.uvarint("checkpoint seq")
		r.ckptHead = d.hash("checkpoint head")
		na := d.uvarint("in-flight count")
		if d.err == nil && na > maxActionsPerAtom {
			d.fail("in-flight count %d exceeds %d", na, maxActionsPerAtom)
		}
		for j := uint64(0); j < na && d.err == nil; j++ {
			idx := d.uvarint("in-flight index")
			fp := d.hash("in-flight fingerprint")
			r.inflight = append(r.inflight, inflightAction{index: uint32(idx), fp: fp})
		}
		if d.err == nil && (r.frameSeq > r.lastSeq || r.indexedSeq > r.lastSeq || r.snapSeq > r.lastSeq) {
			d.fail("run %q: frame/indexed/snapshot seq beyond last seq %d", id, r.lastSeq)
		}
		c.runs = append(c.runs, r)
	}
	if err := d.done("checkpoint"); err != nil {
		return nil, corruptf(name, "%v", err)
	}
	var all strings.Builder
	all.Grow(idBytes)
	for _, id := range ids {
		all.Write(id)
	}
	s, off := all.String(), 0
	for i, id := range ids {
		c.runs[i].id = s[off : off+len(id)]
		off += len(id)
	}
	return c, nil
}

// --- frames/<h>.frame ---

type frameFile struct {
	run   string
	seq   uint64
	head  chain.Hash
	frame []byte // compressed frame encoding, aliases the input
}

func (f *frameFile) marshal() []byte {
	b := make([]byte, 0, 64+len(f.run)+len(f.frame))
	b = append(b, frameFileMagic...)
	b = binary.LittleEndian.AppendUint16(b, frameFileVersion)
	b = appendString(b, f.run)
	b = binary.AppendUvarint(b, f.seq)
	b = append(b, f.head[:]...)
	b = appendBytes(b, f.frame)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func parseFrameFile(name string, b []byte) (*frameFile, error) {
	if len(b) < 8+2+4 || string(b[:8]) != frameFileMagic {
		return nil, corruptf(name, "not a frame file (bad magic or %d bytes)", len(b))
	}
	body := b[:len(b)-4]
	if got, want := binary.LittleEndian.Uint32(b[len(b)-4:]), crc32.Checksum(body, castagnoli); got != want {
		return nil, corruptf(name, "checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != frameFileVersion {
		return nil, corruptf(name, "unknown version %d", v)
	}
	d := decoder{b: body, off: 10}
	f := &frameFile{}
	f.run = d.runID()
	f.seq = d.uvarint("seq")
	f.head = d.hash("head")
	f.frame = d.bytes("frame", len(body))
	if err := d.done("frame file"); err != nil {
		return nil, corruptf(name, "%v", err)
	}
	return f, nil
}

// --- dicts/<id>.dict ---

func marshalDictFile(id uint32, dict []byte) []byte {
	b := make([]byte, 0, 32+len(dict))
	b = append(b, dictFileMagic...)
	b = binary.LittleEndian.AppendUint16(b, dictFileVersion)
	b = binary.LittleEndian.AppendUint32(b, id)
	b = appendBytes(b, dict)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func parseDictFile(name string, b []byte) (uint32, []byte, error) {
	if len(b) < 8+2+4+4 || !bytes.Equal(b[:8], []byte(dictFileMagic)) {
		return 0, nil, corruptf(name, "not a dictionary file (bad magic or %d bytes)", len(b))
	}
	body := b[:len(b)-4]
	if got, want := binary.LittleEndian.Uint32(b[len(b)-4:]), crc32.Checksum(body, castagnoli); got != want {
		return 0, nil, corruptf(name, "checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != dictFileVersion {
		return 0, nil, corruptf(name, "unknown version %d", v)
	}
	id := binary.LittleEndian.Uint32(b[10:])
	d := decoder{b: body, off: 14}
	dict := d.bytes("dictionary", len(body))
	if err := d.done("dictionary file"); err != nil {
		return 0, nil, corruptf(name, "%v", err)
	}
	if id == 0 {
		return 0, nil, corruptf(name, "dictionary id 0 is reserved")
	}
	return id, dict, nil
}
