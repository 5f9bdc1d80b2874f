package engine

// The atom record's encoding: the delta's one path from Commit to the
// log (docs/DESIGN.md, "Write path").

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/zeebo/blake3"
)

// encodedAtom is an atom record encodeAtom built, in the buffers of an
// encBuf (valid until it returns to the pool).
type encodedAtom struct {
	rec      []byte     // the record: header, compressed body
	body     []byte     // the body, uncompressed
	head     chain.Hash // the chain's head after the atom
	deltaLen int        // the stored delta's encoded size (its references made)
	grown    int        // what the frame grows by: d's encoded size, results inline
}

// encodeAtom builds the record of atom seq of run, which links to prev,
// performed actions and commits d. It is the delta's one path to the log
// (docs/DESIGN.md, "Write path"): the delta is encoded once, in place
// after the body's header, with its copies of certified results made
// references (ReferResults); hashed where it lies (the chained payload is
// the body, then the results' digests, kept apart); compressed once into
// the record, which the log copies into its group-commit buffer and
// writes. exts are the body's extensions (record/atomext.go), tags
// ascending; without them (nil) the body is version 1, as it was before
// they existed. seal, for the atom that completes a rollback, is its
// rollback record's seal (record.RollbackSeal), which the chained payload
// ends with; nil for every other atom. A body past MaxSize is an
// ErrTooLarge error.
func (db *DB) encodeAtom(buf *encBuf, run string, seq uint64, prev chain.Hash, actions []atomAction, d *frame.Delta, exts []record.AtomExt, seal []byte) (encodedAtom, error) {
	e, err := db.encodeAtomBody(buf, run, seq, actions, d, exts, seal)
	if err != nil {
		return encodedAtom{}, err
	}
	if db.sealer != nil {
		db.compressAtomBody(buf, e)
		if err := db.sealAtom(buf, &e, run, seq, prev); err != nil {
			return encodedAtom{}, err
		}
		return e, nil
	}
	e.head = db.hasher.LinkParts(run, seq, prev, e.body, buf.sums)
	rec := record.AppendAtomHeader(buf.rec[:0], run, seq, e.head)
	rec = db.comp.Compress(rec, e.body, db.curDict.Load())
	buf.rec = rec
	e.rec = rec
	return e, nil
}

// encodeAtomBody is the part of encodeAtom that depends neither on the
// atom's seq nor on its predecessor: the body (in buf.body) and the
// chained payload's tail (in buf.sums: the digests of the results, then
// seal). seq only names the atom in an error.
func (db *DB) encodeAtomBody(buf *encBuf, run string, seq uint64, actions []atomAction, d *frame.Delta, exts []record.AtomExt, seal []byte) (encodedAtom, error) {
	fps := buf.fps[:0]
	for _, act := range actions {
		fps = append(fps, act.fp)
	}
	buf.fps = fps
	// The stored delta refers to the atom's certified results instead of
	// holding a second copy of them (a tool message whose content is the
	// result it answers); the frame in memory takes d itself.
	stored := d
	if len(actions) > 0 && !inlineResults.Load() {
		results := buf.results[:0]
		for _, act := range actions {
			results = append(results, act.result)
		}
		stored = d.ReferResults(results)
		clear(results) // the pool keeps no result alive
		buf.results = results[:0]
	}
	body := record.AppendAtomBodyHeaderExt(buf.body[:0], fps, exts)
	hdr := len(body)
	body = frame.AppendDelta(body, stored)
	buf.body = body
	e := encodedAtom{body: body, deltaLen: len(body) - hdr, grown: len(body) - hdr}
	if stored != d {
		// For the snapshot policy: a replay applies the results the
		// references bring back.
		e.grown = frame.EncodedDeltaSize(d)
	}
	if err := checkRecordSize(run, seq, "the atom's record (delta and action fingerprints)", body); err != nil {
		return encodedAtom{}, err
	}
	sums := buf.sums[:0]
	for _, act := range actions {
		sum := blake3.Sum256(act.result)
		sums = append(sums, sum[:]...)
	}
	sums = append(sums, seal...)
	buf.sums = sums
	return e, nil
}

// compressAtomBody compresses e's body into buf.comp, for sealAtom: a
// branch compresses before it knows its seq, outside the run's lock. In
// an encrypted store buf.comp is the plaintext the seal covers: the
// chained payload's tail (buf.sums), then the compressed body.
func (db *DB) compressAtomBody(buf *encBuf, e encodedAtom) {
	comp := buf.comp[:0]
	if db.sealer != nil {
		comp = record.AppendAtomPlainHead(comp, buf.sums)
	}
	buf.comp = db.comp.Compress(comp, e.body, db.curDict.Load())
}

// sealAtom completes e, whose body encodeAtomBody built and
// compressAtomBody compressed, as atom seq of run after prev: the record
// encodeAtom would have built, with one more copy (of the compressed
// body, after the header). In an encrypted store (record/seal.go) the
// compressed body and the chained payload's tail are sealed together, and
// the chain links the atom over the sealed bytes; the error is the
// seal's.
func (db *DB) sealAtom(buf *encBuf, e *encodedAtom, run string, seq uint64, prev chain.Hash) error {
	if db.sealer != nil {
		sealed, err := db.sealer.SealAtomPlain(buf.sealed[:0], run, seq, buf.comp)
		if err != nil {
			return fmt.Errorf("engine: run %q seq %d: %w", run, seq, err)
		}
		buf.sealed = sealed
		e.head = db.hasher.Link(run, seq, prev, sealed)
		rec := record.AppendAtomHeader(buf.rec[:0], run, seq, e.head)
		buf.rec = append(rec, sealed...)
		e.rec = buf.rec
		return nil
	}
	e.head = db.hasher.LinkParts(run, seq, prev, e.body, buf.sums)
	rec := record.AppendAtomHeader(buf.rec[:0], run, seq, e.head)
	buf.rec = append(rec, buf.comp...)
	e.rec = buf.rec
	return nil
}

// encBuf holds the scratch buffers of one Commit.
type encBuf struct {
	fps     []ledger.Fingerprint // the atom's actions
	results [][]byte             // their certified results; cleared before the buffer returns to the pool
	body    []byte               // the atom body: version, fingerprints, the delta encoded in place
	sums    []byte               // BLAKE3 of each result: the chained payload's tail
	rec     []byte               // the record: header, compressed body
	ext     []byte               // the data of the message extensions (messageExts)
	exts    []record.AtomExt     // the body's extensions; their Data alias ext
	comp    []byte               // a branch's compressed body, before its header is known (sealAtom); sealed: tail, then compressed body
	sealed  []byte               // an encrypted store's sealed body (sealAtom)
}

func getBuf() *encBuf { return bufPool.Get().(*encBuf) }

func putBuf(b *encBuf) {
	const keep = 1 << 20 // don't pin huge buffers
	if cap(b.rec) > keep || cap(b.body) > keep || cap(b.ext) > keep || cap(b.comp) > keep || cap(b.sealed) > keep {
		return
	}
	clear(b.exts) // the pool keeps no message alive
	bufPool.Put(b)
}

// inlineResults, set, makes Commit store every delta as it is, its
// certified results inline: the baseline of the benchmarks that measure
// what references save. Never set outside them.
var inlineResults atomic.Bool

var bufPool = sync.Pool{New: func() any { return &encBuf{} }}
