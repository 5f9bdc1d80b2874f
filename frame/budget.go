package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// ErrBudget: a reader with a Budget met records that would decompress to
// more than the budget allows for the compressed bytes it has read.
var ErrBudget = errors.New("frame: decompression budget exceeded")

// MaxRatio is the one rule of what a record may decompress to, shared by
// the writer and every reader: a compressed record (codec byte, dictionary
// id and payload) decompresses to at most MaxRatio times its own size.
// Compress and CompressWith never write a record past it (a record that
// would compress better keeps a tail of its bytes uncompressed, see
// Compress), so the records of any store the engine wrote decompress, in
// total, to at most MaxRatio times the compressed bytes read, which every
// Budget of at least this ratio allows whatever the base. A store past it
// was not written by the engine (or by one older than the rule).
const MaxRatio = 256

// The default budget of a reader of an untrusted store: every compressed
// byte read may decompress to DefaultBudgetRatio (MaxRatio) bytes, plus
// DefaultBudgetBase bytes in all. Records the engine writes are within
// MaxRatio each, so a store the engine wrote never exceeds it. A crafted
// store cannot make a reader decompress more than DefaultBudgetBase +
// DefaultBudgetRatio × the bytes actually present.
const (
	DefaultBudgetRatio = MaxRatio
	DefaultBudgetBase  = 256 << 20
)

// A Budget bounds the bytes decompressed by the compressors that charge it
// (Compressor.WithBudget), in total, to Base plus Ratio times the
// compressed bytes they were given: a decompression bomb (a few KiB that
// claim 64 MiB, repeated) makes a reader fail with ErrBudget after reading
// at most that much, instead of spending time and memory without bound on
// bytes that are not there. It is safe for concurrent use.
//
// The size a record claims is charged before anything is allocated; a
// record refused is not charged, so the records after it are judged on
// their own.
type Budget struct {
	Ratio int64 // decompressed bytes allowed per compressed byte (< 1: 1)
	Base  int64 // decompressed bytes allowed besides

	mu      sync.Mutex
	in, out int64 // compressed bytes given and decompressed bytes claimed, so far
}

// NewBudget returns a budget of DefaultBudgetBase + DefaultBudgetRatio × in.
func NewBudget() *Budget {
	return &Budget{Ratio: DefaultBudgetRatio, Base: DefaultBudgetBase}
}

// charge records a record of in compressed bytes that claims out bytes,
// and fails if the total claimed would exceed the budget.
func (b *Budget) charge(in, out int) error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ratio := max(b.Ratio, 1)
	allowed := b.Base + ratio*(b.in+int64(in))
	if b.out+int64(out) > allowed {
		return fmt.Errorf("%w: a record of %d bytes claims %d bytes decompressed; the %d bytes of records read so far "+
			"would decompress to %d bytes, more than %d× plus %d MiB: a decompression bomb, "+
			"or records more compressible than the engine writes (a reader's Budget option raises the bound)",
			ErrBudget, in, out, b.in+int64(in), b.out+int64(out), ratio, b.Base>>20)
	}
	b.in += int64(in)
	b.out += int64(out)
	return nil
}

// Used returns the compressed bytes given and the decompressed bytes
// charged so far.
func (b *Budget) Used() (in, out int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.in, b.out
}

// WithBudget returns a compressor that shares c's dictionaries and coders
// and charges every Decompress to b (nil: no budget, as NewCompressor).
// Compress is unchanged.
func (c *Compressor) WithBudget(b *Budget) *Compressor {
	c2 := *c
	c2.budget = b
	return &c2
}

// Charge charges c's budget with the size the compressed record src claims,
// without decompressing it, for a reader that keeps src to decompress later
// (the engine's replay keeps the tail's atoms compressed until a frame is
// needed): what it will decompress is bounded when it reads. Without a
// budget it does nothing. A record whose size cannot be read is left to
// Decompress to report.
func (c *Compressor) Charge(src []byte) error {
	if c.budget == nil || len(src) == 0 {
		return nil
	}
	_, n := binary.Uvarint(src[1:])
	if n <= 0 {
		return nil
	}
	payload := src[1+n:]
	size := 0
	switch Codec(src[0]) {
	case CodecNone:
		size = len(payload)
	case CodecS2:
		v, err := s2.DecodedLen(payload)
		if err != nil {
			return nil
		}
		size = v
	case CodecZstd:
		var h zstd.Header
		if err := h.Decode(payload); err != nil || !h.HasFCS || h.FrameContentSize > MaxDecompressedSize {
			return nil
		}
		size = int(h.FrameContentSize)
	default:
		return nil
	}
	return c.budget.charge(len(src), size)
}
