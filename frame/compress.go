package frame

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// zstdDictMagic starts a dictionary in zstd's format (entropy tables, then
// content), as TrainDict builds them. Other dictionaries are raw content.
var zstdDictMagic = []byte{0x37, 0xa4, 0x30, 0xec}

// Dicts is a registry of compression dictionaries by id. Ids are forever:
// a record compressed with dictionary N names N, so N must keep its bytes
// for as long as such a record exists. Persisting the dictionaries is the
// caller's job (the engine stores them next to the records that use them).
// Dicts is safe for concurrent use.
type Dicts struct {
	// byID is an immutable map, replaced whole (copy on write) by Add under
	// mu, so that the hot path (Compress, Decompress) reads it with one
	// atomic load and no lock. Entries are immutable once added, except
	// for their lazily built codec state (guarded by its sync.Once).
	byID atomic.Pointer[map[uint32]*dictEntry]
	mu   sync.Mutex // serializes Add
}

// dictEntry is one registered dictionary and the codec state derived from it,
// built on first use.
type dictEntry struct {
	id    uint32
	bytes []byte // as given to Add (private copy)
	// zstdDict is bytes in zstd's dictionary format with its id field set to
	// id, so that a frame's header names the registry's id.
	zstdDict []byte
	content  []byte // the history part, used by s2

	once sync.Once
	err  error
	zenc *zstd.Encoder
	zdec *zstd.Decoder
	s2   *s2.Dict
	s2t  *s2DictTable // s2's dictionary indexed for encodeS2Dict
}

// load returns the current map (nil for a zero Dicts, which reads as empty).
func (ds *Dicts) load() map[uint32]*dictEntry {
	if p := ds.byID.Load(); p != nil {
		return *p
	}
	return nil
}

// NewDicts returns an empty registry. A zero Dicts is also ready to use.
func NewDicts() *Dicts {
	d := &Dicts{}
	m := make(map[uint32]*dictEntry)
	d.byID.Store(&m)
	return d
}

// Add registers dict under id. id 0 is reserved for "no dictionary".
// dict is either a zstd-format dictionary (as TrainDict returns) or raw
// content of at least 16 bytes. Adding the same bytes under the same id
// again is a no-op; different bytes under a taken id are an error.
func (ds *Dicts) Add(id uint32, dict []byte) error {
	if id == 0 {
		return fmt.Errorf("%w: id 0 is reserved for no dictionary", ErrDict)
	}
	e := &dictEntry{id: id, bytes: bytes.Clone(dict)}
	if bytes.HasPrefix(dict, zstdDictMagic) {
		if len(dict) < 8 {
			return fmt.Errorf("%w: id %d: zstd dictionary of %d bytes has no id field", ErrDict, id, len(dict))
		}
		z := bytes.Clone(dict)
		binary.LittleEndian.PutUint32(z[4:8], id)
		info, err := zstd.InspectDictionary(z)
		if err != nil {
			return fmt.Errorf("%w: id %d: malformed zstd dictionary: %v", ErrDict, id, err)
		}
		e.zstdDict = z
		e.content = info.Content()
	} else {
		if len(dict) < s2.MinDictSize {
			return fmt.Errorf("%w: id %d: raw dictionary of %d bytes is shorter than %d", ErrDict, id, len(dict), s2.MinDictSize)
		}
		e.content = e.bytes
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	old := ds.load()
	if prev, ok := old[id]; ok {
		if bytes.Equal(prev.bytes, dict) {
			return nil
		}
		return fmt.Errorf("%w: id %d is already registered with different bytes", ErrDict, id)
	}
	m := make(map[uint32]*dictEntry, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[id] = e
	ds.byID.Store(&m)
	return nil
}

// Get returns the bytes registered under id, as given to Add. The caller
// must not modify them.
func (ds *Dicts) Get(id uint32) ([]byte, bool) {
	e := ds.entry(id)
	if e == nil {
		return nil, false
	}
	return e.bytes, true
}

// IDs returns the registered ids in increasing order.
func (ds *Dicts) IDs() []uint32 {
	m := ds.load()
	ids := make([]uint32, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (ds *Dicts) entry(id uint32) *dictEntry {
	if ds == nil || id == 0 {
		return nil
	}
	return ds.load()[id]
}

// init builds the codec state of e once.
func (e *dictEntry) init() error {
	e.once.Do(func() {
		var encOpt zstd.EOption
		var decOpt zstd.DOption
		if e.zstdDict != nil {
			encOpt = zstd.WithEncoderDict(e.zstdDict)
			decOpt = zstd.WithDecoderDicts(e.zstdDict)
		} else {
			encOpt = zstd.WithEncoderDictRaw(e.id, e.content)
			decOpt = zstd.WithDecoderDictRaw(e.id, e.content)
		}
		e.zenc, e.err = newZstdEncoder(encOpt)
		if e.err != nil {
			e.err = fmt.Errorf("%w: id %d: %v", ErrDict, e.id, e.err)
			return
		}
		e.zdec, e.err = newZstdDecoder(decOpt)
		if e.err != nil {
			e.err = fmt.Errorf("%w: id %d: %v", ErrDict, e.id, e.err)
			return
		}
		// The s2 dictionary is the last 64 KiB of the content with the
		// first repeat offset at 0. Frozen: records depend on both.
		c := e.content
		if len(c) > s2.MaxDictSize {
			c = c[len(c)-s2.MaxDictSize:]
		}
		e.s2 = s2.MakeDictManual(c, 0)
		e.s2t = newS2DictTable(c)
	})
	return e.err
}

func newZstdEncoder(opts ...zstd.EOption) (*zstd.Encoder, error) {
	opts = append([]zstd.EOption{
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		// Records are checksummed by the log that stores them.
		zstd.WithEncoderCRC(false),
		zstd.WithSingleSegment(true),
		zstd.WithLowerEncoderMem(true),
	}, opts...)
	return zstd.NewWriter(nil, opts...)
}

func newZstdDecoder(opts ...zstd.DOption) (*zstd.Decoder, error) {
	opts = append([]zstd.DOption{
		zstd.WithDecoderConcurrency(0), // one per GOMAXPROCS, for DecodeAll
		zstd.WithDecoderMaxMemory(MaxDecompressedSize),
		zstd.WithDecodeAllCapLimit(true),
		zstd.IgnoreChecksum(true),
	}, opts...)
	return zstd.NewReader(nil, opts...)
}

// TrainDict builds a zstd-format dictionary of at most maxSize bytes from
// sample records (encoded deltas, say), with klauspost/compress/dict. It
// needs at least MinTrainSamples samples holding MinTrainBytes in total.
// The dictionary's id field is left for Dicts.Add to set.
func TrainDict(samples [][]byte, maxSize int) (_ []byte, err error) {
	total := 0
	for _, s := range samples {
		total += len(s)
	}
	if len(samples) < MinTrainSamples || total < MinTrainBytes {
		return nil, fmt.Errorf("%w: %d samples of %d bytes in all (want %d samples and %d bytes)", ErrTooFewSamples, len(samples), total, MinTrainSamples, MinTrainBytes)
	}
	if maxSize < 256 || maxSize > 1<<20 {
		return nil, fmt.Errorf("%w: dictionary size %d outside [256, 1 MiB]", ErrDict, maxSize)
	}
	// The builder is third-party code fed with caller data: a panic in it
	// must reach the caller as an error, like any other bad input.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("frame: train dictionary from %d samples: builder failed: %v", len(samples), r)
		}
	}()
	d, err := dict.BuildZstdDict(samples, dict.Options{
		MaxDictSize: maxSize,
		HashBytes:   6,
		ZstdDictID:  1, // replaced by Dicts.Add
		ZstdLevel:   zstd.SpeedDefault,
	})
	if err != nil {
		return nil, fmt.Errorf("frame: train dictionary from %d samples: %w", len(samples), err)
	}
	return d, nil
}

// Training needs.
const (
	MinTrainSamples = 8
	MinTrainBytes   = 1024
)

// Compression policy.
const (
	// minCompressSize: records shorter than this are stored raw: no codec
	// saves more than its header on them.
	minCompressSize = 48
	// zstdMinSize: records shorter than this use s2. On a ~600-byte delta,
	// s2 with a dictionary takes a few microseconds where zstd takes tens
	// (zstd rebuilds entropy tables and restores its dictionary tables per
	// record), for about 15% more bytes; the commit path cannot afford zstd.
	zstdMinSize = 8 << 10
	// s2MaxSize: records at least this long try s2 first and keep it if it
	// halves them; zstd would compress them better but several times slower.
	s2MaxSize = 1 << 20
)

// Compressor compresses and decompresses records, choosing the codec per
// record. It is safe for concurrent use: the zstd encoders and decoders
// are pooled (one per GOMAXPROCS) and s2 needs no state.
type Compressor struct {
	dicts *Dicts

	zenc *zstd.Encoder // no dictionary
	zdec *zstd.Decoder // no dictionary

	// budget, if set, is charged by Decompress (WithBudget).
	budget *Budget
}

// NewCompressor returns a compressor that finds dictionaries in d (which
// may be nil: no dictionaries).
func NewCompressor(d *Dicts) *Compressor {
	zenc, err := newZstdEncoder()
	if err != nil {
		// Only invalid options fail, and these are fixed.
		panic("frame: zstd encoder options: " + err.Error())
	}
	zdec, err := newZstdDecoder()
	if err != nil {
		panic("frame: zstd decoder options: " + err.Error())
	}
	return &Compressor{dicts: d, zenc: zenc, zdec: zdec}
}

// Dicts returns the registry the compressor reads dictionaries from.
func (c *Compressor) Dicts() *Dicts { return c.dicts }

// Compress appends to dst a compressed record of src:
// [codec byte][dictionary id uvarint][payload], and returns the extended
// slice. It picks the codec by size and gain, using dictionary dictID when
// it is registered: records under 48 bytes are stored raw; records under
// 8 KiB (deltas: the commit path) use s2, fast; records from 8 KiB to 1 MiB
// (snapshots, big tool outputs) use zstd, smaller; records of 1 MiB or more
// use s2 if it halves them, else zstd. If the codec does not save at least
// 1/32 of the record, the record is stored raw.
//
// dictID 0 means no dictionary. An unknown dictID is not an error: the
// record is compressed without a dictionary (and says so, dict id 0), so it
// stays readable; use Dicts.Get beforehand to know.
//
// No record decompresses to more than MaxRatio times its size: a record
// that would (a long run of one byte, a value repeated) is written in s2
// with its last len(src)/MaxRatio bytes, rounded up, as a literal, so
// that every reader's Budget accepts what the writer wrote. A 1 MiB run of
// one byte takes 4 KiB, not a few dozen bytes. The record is a plain s2
// block, which every reader, older ones too, decodes.
func (c *Compressor) Compress(dst, src []byte, dictID uint32) []byte {
	if len(src) < minCompressSize {
		return appendRaw(dst, src)
	}
	e := c.dicts.entry(dictID)
	if e != nil && e.init() != nil {
		e = nil
	}
	if len(src) < zstdMinSize {
		out := c.compressWith(dst, src, CodecS2, e)
		if len(out)-len(dst) > len(src)-len(src)/32 {
			return appendRaw(dst, src)
		}
		return out
	}
	if len(src) >= s2MaxSize {
		out := c.compressWith(dst, src, CodecS2, e)
		if len(out)-len(dst) <= len(src)/2 {
			return out
		}
	}
	out := c.compressWith(dst, src, CodecZstd, e)
	if len(out)-len(dst) > len(src)-len(src)/32 {
		return appendRaw(dst, src)
	}
	return out
}

// withinRatio reports whether a compressed record of n bytes that
// decompresses to size bytes keeps MaxRatio.
func withinRatio(n, size int) bool {
	return int64(n)*MaxRatio >= int64(size)
}

// appendS2Tail appends to dst a record of src in s2 that keeps MaxRatio:
// the s2 block of src but its last ceil(len(src)/MaxRatio) bytes, then
// those bytes as one literal. Copies and the dictionary's references of
// the block's first part are those of a block of that part alone (offsets
// count back from where each element's output starts), so the whole
// decodes to src with or without e's dictionary.
func appendS2Tail(dst, src []byte, e *dictEntry) []byte {
	k := (len(src) + MaxRatio - 1) / MaxRatio
	head, tail := src[:len(src)-k], src[len(src)-k:]
	var id uint32
	var block []byte
	if e != nil && e.s2 != nil {
		id = e.id
		block = e.s2.Encode(nil, head)
	} else {
		block = s2.Encode(nil, head)
	}
	_, w := binary.Uvarint(block) // the head's length: the record states src's
	dst = slices.Grow(dst, 2*binary.MaxVarintLen32+len(block)+5+k)
	dst = append(dst, byte(CodecS2))
	dst = binary.AppendUvarint(dst, uint64(id))
	dst = binary.AppendUvarint(dst, uint64(len(src)))
	dst = append(dst, block[w:]...)
	// An s2 (snappy) literal element: tag 0b00, its length - 1 in the tag's
	// upper six bits below 60, else in the 1 to 4 bytes that follow.
	switch n := uint32(k - 1); {
	case n < 60:
		dst = append(dst, byte(n)<<2)
	case n < 1<<8:
		dst = append(dst, 60<<2, byte(n))
	case n < 1<<16:
		dst = append(dst, 61<<2, byte(n), byte(n>>8))
	case n < 1<<24:
		dst = append(dst, 62<<2, byte(n), byte(n>>8), byte(n>>16))
	default:
		dst = append(dst, 63<<2, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	}
	return append(dst, tail...)
}

// CompressWith is Compress with the codec chosen by the caller: no
// fallback to raw, except that an unknown dictID means no dictionary. An
// empty record or an unknown codec is stored raw. It keeps MaxRatio as
// Compress does (in s2 whatever codec was asked).
func (c *Compressor) CompressWith(dst, src []byte, codec Codec, dictID uint32) []byte {
	e := c.dicts.entry(dictID)
	if e != nil && e.init() != nil {
		e = nil
	}
	return c.compressWith(dst, src, codec, e)
}

func appendRaw(dst, src []byte) []byte {
	dst = slices.Grow(dst, 2+len(src))
	dst = append(dst, byte(CodecNone), 0)
	return append(dst, src...)
}

// compressWith compresses src with codec, within MaxRatio.
func (c *Compressor) compressWith(dst, src []byte, codec Codec, e *dictEntry) []byte {
	out := c.compressCodec(dst, src, codec, e)
	if withinRatio(len(out)-len(dst), len(src)) {
		return out
	}
	return appendS2Tail(out[:len(dst)], src, e)
}

func (c *Compressor) compressCodec(dst, src []byte, codec Codec, e *dictEntry) []byte {
	if len(src) == 0 {
		return appendRaw(dst, src) // codecs would only add their framing
	}
	var id uint32
	if e != nil {
		id = e.id
	}
	switch codec {
	case CodecS2:
		bound := s2.MaxEncodedLen(len(src))
		if bound < 0 {
			return appendRaw(dst, src)
		}
		dst = slices.Grow(dst, 1+binary.MaxVarintLen32+bound)
		dst = append(dst, byte(CodecS2))
		dst = binary.AppendUvarint(dst, uint64(id))
		tail := dst[len(dst) : len(dst)+bound]
		var out []byte
		if e != nil && e.s2 != nil && len(src) <= s2DictMaxSrc {
			// Our encoder, the same format (s2dict.go): no table cleared
			// per record.
			return encodeS2Dict(dst, src, e.s2t)
		} else if e != nil && e.s2 != nil {
			out = e.s2.Encode(tail, src)
		} else {
			if e != nil { // dictionary too small for s2: say none
				dst = append(dst[:len(dst)-uvarintLen(uint64(id))], 0)
				tail = dst[len(dst) : len(dst)+bound]
			}
			out = s2.Encode(tail, src)
		}
		return dst[:len(dst)+len(out)]
	case CodecZstd:
		dst = slices.Grow(dst, 1+binary.MaxVarintLen32+len(src)+32)
		dst = append(dst, byte(CodecZstd))
		dst = binary.AppendUvarint(dst, uint64(id))
		if e != nil {
			return e.zenc.EncodeAll(src, dst)
		}
		return c.zenc.EncodeAll(src, dst)
	}
	return appendRaw(dst, src)
}

// Decompress appends to dst the record that Compress turned into src, and
// returns the extended slice. Errors (matching ErrCorrupt, ErrUnknownCodec,
// ErrUnknownDict, ErrTooLarge or, with a budget, ErrBudget) say what is
// wrong; the size a payload claims is checked against MaxDecompressedSize
// and charged to the budget (WithBudget) before anything is allocated. It never panics.
func (c *Compressor) Decompress(dst, src []byte) ([]byte, error) {
	if len(src) == 0 {
		return dst, corruptRec(0, "empty input")
	}
	codec := Codec(src[0])
	id, n := binary.Uvarint(src[1:])
	if n <= 0 || id > 0xffffffff {
		return dst, corruptRec(1, "bad dictionary id varint")
	}
	payload := src[1+n:]
	var e *dictEntry
	if id != 0 {
		if codec == CodecNone {
			return dst, corruptRec(1, "raw record names dictionary "+strconv.FormatUint(id, 10))
		}
		if codec > CodecZstd {
			return dst, fmt.Errorf("%w %d (byte 0 of a compressed record)", ErrUnknownCodec, codec)
		}
		e = c.dicts.entry(uint32(id))
		if e == nil {
			return dst, fmt.Errorf("%w: id %d (compressed record, %s)", ErrUnknownDict, id, codec)
		}
		if err := e.init(); err != nil {
			return dst, err
		}
	}
	switch codec {
	case CodecNone:
		if len(payload) > MaxDecompressedSize {
			return dst, fmt.Errorf("%w: raw record of %d bytes", ErrTooLarge, len(payload))
		}
		if err := c.budget.charge(len(src), len(payload)); err != nil {
			return dst, err
		}
		return append(dst, payload...), nil
	case CodecS2:
		size, err := s2.DecodedLen(payload)
		if err != nil {
			return dst, corruptRec(1+n, "s2 block length: "+err.Error())
		}
		if size > MaxDecompressedSize {
			return dst, fmt.Errorf("%w: s2 block claims %d bytes (limit %d)", ErrTooLarge, size, MaxDecompressedSize)
		}
		if err := c.budget.charge(len(src), size); err != nil {
			return dst, err
		}
		dst = slices.Grow(dst, size)
		tail := dst[len(dst) : len(dst)+size]
		var out []byte
		if e != nil {
			if e.s2 == nil {
				return dst, corruptRec(1, "dictionary "+strconv.FormatUint(id, 10)+" is too small for s2")
			}
			out, err = e.s2.Decode(tail, payload)
		} else {
			out, err = s2.Decode(tail, payload)
		}
		if err != nil {
			return dst, corruptRec(1+n, "s2 payload: "+err.Error())
		}
		if len(out) != size || (size > 0 && &out[0] != &tail[0]) {
			return dst, corruptRec(1+n, "s2 payload decoded to an unexpected size")
		}
		return dst[:len(dst)+size], nil
	case CodecZstd:
		var h zstd.Header
		if err := h.Decode(payload); err != nil {
			return dst, corruptRec(1+n, "zstd frame header: "+err.Error())
		}
		if h.Skippable || !h.HasFCS {
			return dst, corruptRec(1+n, "zstd frame without a content size")
		}
		if h.FrameContentSize > MaxDecompressedSize {
			return dst, fmt.Errorf("%w: zstd frame claims %d bytes (limit %d)", ErrTooLarge, h.FrameContentSize, MaxDecompressedSize)
		}
		if h.DictionaryID != uint32(id) {
			return dst, corruptRec(1+n, "zstd frame names dictionary "+strconv.FormatUint(uint64(h.DictionaryID), 10)+", record names "+strconv.FormatUint(id, 10))
		}
		size := int(h.FrameContentSize)
		// A zstd block expands at most 128 KiB from 3 bytes of header plus
		// a byte of payload; refuse to allocate beyond that ratio.
		if size > len(payload)*32768+1024 {
			return dst, corruptRec(1+n, "zstd frame claims "+strconv.Itoa(size)+" bytes from "+strconv.Itoa(len(payload)))
		}
		if err := c.budget.charge(len(src), size); err != nil {
			return dst, err
		}
		dst = slices.Grow(dst, size)
		start := len(dst)
		dec := c.zdec
		if e != nil {
			dec = e.zdec
		}
		out, err := dec.DecodeAll(payload, dst[:start:start+size])
		if err != nil {
			return dst, corruptRec(1+n, "zstd payload: "+err.Error())
		}
		if len(out)-start != size {
			return dst, corruptRec(1+n, "zstd payload decoded to "+strconv.Itoa(len(out)-start)+" bytes, header says "+strconv.Itoa(size))
		}
		return dst[:start+size], nil
	}
	return dst, fmt.Errorf("%w %d (byte 0 of a compressed record)", ErrUnknownCodec, codec)
}

// PeekCodec returns the codec and dictionary id a compressed record names,
// without decompressing it.
func PeekCodec(src []byte) (Codec, uint32, error) {
	if len(src) == 0 {
		return 0, 0, corruptRec(0, "empty input")
	}
	id, n := binary.Uvarint(src[1:])
	if n <= 0 || id > 0xffffffff {
		return 0, 0, corruptRec(1, "bad dictionary id varint")
	}
	return Codec(src[0]), uint32(id), nil
}

// ClaimedLen returns the size a compressed record says it decompresses to,
// without decompressing it, when its codec states one (raw and s2 do;
// known is false for zstd). A reader that knows what the record must hold
// can refuse one of the wrong size before it allocates anything.
func ClaimedLen(src []byte) (n int, known bool, err error) {
	codec, _, err := PeekCodec(src)
	if err != nil {
		return 0, false, err
	}
	_, w := binary.Uvarint(src[1:])
	payload := src[1+w:]
	switch codec {
	case CodecNone:
		return len(payload), true, nil
	case CodecS2:
		n, err := s2.DecodedLen(payload)
		if err != nil {
			return 0, false, corruptRec(1+w, "s2 block length: "+err.Error())
		}
		return n, true, nil
	}
	return 0, false, nil
}

func corruptRec(off int, detail string) error {
	return &CorruptError{Record: "compressed record", Offset: off, Detail: detail, kind: ErrCorrupt}
}
