package engine

// The ledger's journal: intents and certificates written to the log (and
// read back by position) for the ledger, in strict or relaxed durability.

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/wal"
)

// journal is the ledger's durable side, over the engine's log. The ledger
// runs each write and applies its outcome under its checkpoint gate, so an
// engine checkpoint never sees a record written but not applied.
type journal struct {
	db      *DB
	relaxed bool
	// landed is closed when the ledger call this journal serves returned,
	// so the ledger has applied what the journal wrote.
	landed chan struct{}
	// atom, if set, is told of each intent written (Atom.noteStarted).
	atom *Atom
}

// ledgerBuf is the scratch of one ledger record's encoding: its body and
// its compressed body, dead once write returns (a record the log or a
// relaxed write's goroutine holds after that is allocated apart, at its
// size).
type ledgerBuf struct{ body, comp []byte }

var ledgerBufs = sync.Pool{New: func() any { return new(ledgerBuf) }}

func putLedgerBuf(b *ledgerBuf) {
	const keep = 64 << 10 // don't pin the buffers of a huge record
	if cap(b.body) <= keep && cap(b.comp) <= keep {
		ledgerBufs.Put(b)
	}
}

// write appends an intent or a certificate of run, whose body is in
// lb.body. explicit says the action's key is explicit
// (ledger.Intent.ExplicitKey): in an encrypted store its records are
// sealed with the store's key, not the run's, since another run may
// repeat the action and need them after this run is erased.
func (j *journal) write(ctx context.Context, kind record.Kind, run string, explicit bool, lb *ledgerBuf, c *ledger.Certificate, wait bool) (ledger.Loc, error) {
	db := j.db
	body := lb.body
	if err := ctx.Err(); err != nil {
		return ledger.Loc{}, err
	}
	if len(body) > MaxSize {
		return ledger.Loc{}, fmt.Errorf("%w: %s record of %d bytes, the limit is %d (engine.MaxSize); nothing was written",
			ErrTooLarge, kind, len(body), MaxSize)
	}
	// kind | compressed body, or in an encrypted store kind |
	// sealed(compressed body) (record/seal.go): compressed into the
	// scratch. A write that waits hands the scratch itself to the log,
	// which copies it once into the segment before Append returns; an
	// asynchronous one copies it into a record of its size, which the log
	// holds after write returns; a sealed one is sealed into such a record.
	lb.comp = record.AppendLedger(lb.comp[:0], kind, body, db.comp, db.curDict.Load())
	comp := lb.comp[1:]
	var rec []byte
	if db.sealer == nil && wait {
		rec = lb.comp
	} else if db.sealer == nil {
		rec = append(make([]byte, 0, len(lb.comp)), lb.comp...)
	} else {
		rec = append(make([]byte, 0, 1+seal.Overhead+binary.MaxVarintLen64+len(comp)), byte(kind))
		var err error
		scope := run
		if explicit {
			scope = ""
		}
		if rec, err = db.sealer.SealLedger(rec, comp, kind, scope); err != nil {
			return ledger.Loc{}, fmt.Errorf("engine: %s record of run %q: %w; nothing was written", kind, run, err)
		}
	}
	db.sample(body)
	if !wait {
		// Relaxed: enqueue and return at once. The fsync of the atom's
		// commit covers this record (one ordered log); the goroutine tells
		// the ledger where the certificate landed. An engine checkpoint
		// waits for these goroutines before it takes the ledger's table, so
		// the table never names a record that is not durable.
		db.relaxed.Add(1)
		w := db.log.AppendAsync(rec)
		landed := j.landed
		go func() {
			defer db.relaxed.Done()
			ps, err := w.Wait(context.Background())
			if err != nil {
				// The log's error is sticky: the commit reports it. The ledger
				// holds this certificate without a location, so no engine
				// checkpoint may persist its table from now on. (A record too
				// large for a segment is the same: the ledger believes it.)
				db.failLog(err)
				return
			}
			db.noteAppended(len(rec))
			if c != nil {
				// After the ledger applied the certificate itself, or it
				// would ignore this update of an action still in flight.
				<-landed
				db.ledger.ApplyCertificate(c, ps[0], true)
			}
		}()
		return ledger.Loc{}, nil
	}
	pos, err := db.append(ctx, rec)
	if err != nil {
		return ledger.Loc{}, err
	}
	return pos, nil
}

func (j *journal) WriteIntent(ctx context.Context, in *ledger.Intent) (ledger.Loc, error) {
	lb := ledgerBufs.Get().(*ledgerBuf)
	defer putLedgerBuf(lb)
	lb.body = ledger.AppendIntent(lb.body[:0], in)
	// An attempt of an action with a retry policy is durable before its
	// exec in either mode: its number is what a restart counts from.
	loc, err := j.write(ctx, record.KindIntent, in.RunID, in.ExplicitKey(), lb, nil, !(j.relaxed && in.Idempotent && in.Retry == nil))
	if err == nil && j.atom != nil {
		j.atom.noteStarted(in)
	}
	return loc, err
}

func (j *journal) WriteCertificate(ctx context.Context, c *ledger.Certificate) (ledger.Loc, error) {
	lb := ledgerBufs.Get().(*ledgerBuf)
	defer putLedgerBuf(lb)
	lb.body = ledger.AppendCertificate(lb.body[:0], c)
	// A failed attempt (Certificate.Attempt) is durable before the wait
	// for the next in either mode (retry.go).
	return j.write(ctx, record.KindCert, c.RunID, c.ExplicitKey, lb, c, !j.relaxed || c.Attempt != nil)
}

func (j *journal) ReadCertificate(loc ledger.Loc) (*ledger.Certificate, error) {
	return j.db.readCertificate(loc)
}

// readRecord reads and decodes the record of kind at pos; the ledger's
// records are decoded too. The record is the caller's.
func (db *DB) readRecord(pos wal.Pos, kind record.Kind) (*record.Record, error) {
	raw, err := db.log.ReadAt(pos)
	if err != nil {
		return nil, fmt.Errorf("engine: read %s at %v: %w", kind, pos, err)
	}
	var r record.Record
	if err := db.decoder(true).Decode(raw, pos, db.segmentFile(pos.Segment), &r); err != nil {
		return nil, err
	}
	if r.Kind != kind {
		return nil, &CorruptionError{File: db.segmentFile(pos.Segment), Offset: pos.Offset, Run: r.Run, Seq: r.Seq,
			Reason: fmt.Sprintf("the record is a %s, not the %s the index names", r.Kind, kind)}
	}
	return &r, nil
}

func (db *DB) readCertificate(loc ledger.Loc) (*ledger.Certificate, error) {
	r, err := db.readRecord(loc, record.KindCert)
	if err != nil {
		return nil, err
	}
	return r.Cert, nil // a view of r.Plain, which is this call's own
}

func (db *DB) readIntent(loc ledger.Loc) (*ledger.Intent, error) {
	r, err := db.readRecord(loc, record.KindIntent)
	if err != nil {
		return nil, err
	}
	return r.Intent, nil
}

// applyAtomBody decompresses the body of atom record a and applies its
// delta to f, resolving the certified results it refers to from the
// ledger (certifiedResult). file names the segment a is in, for an error
// (the log's directory when its position is not known).
func (db *DB) applyAtomBody(f *frame.Frame, a *record.Record, file func(seg uint64) string) error {
	return record.ApplyAtom(db.comp, f, a, file, db.certifiedResult)
}

// certifiedResult returns the certified result of action fp, for an atom's
// delta that refers to it: the ledger's copy in memory, or the certificate
// the ledger's index locates in the log. A certificate the ledger already
// knows (this process wrote it, or Open replayed it from the log's tail:
// after a crash, the certificates of the atoms replayed are there) is
// final, since a done or resolved action is never certified again; only
// for another one does it wait for the ledger's persisted table.
func (db *DB) certifiedResult(fp ledger.Fingerprint) ([]byte, error) {
	e, ok := db.ledger.Lookup(fp)
	if !ok || (e.Status != ledger.StatusDone && e.Status != ledger.StatusResolved) {
		if err := db.waitLedger(context.Background()); err != nil {
			return nil, err
		}
		e, ok = db.ledger.Lookup(fp)
	}
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: the ledger does not know action %x", record.ErrNoCertificate, fp[:8])
	case e.Status != ledger.StatusDone && e.Status != ledger.StatusResolved:
		return nil, fmt.Errorf("%w: action %x is %s in the ledger", record.ErrNoCertificate, fp[:8], e.Status)
	case e.Result != nil:
		return e.Result, nil
	case e.CertLoc == (ledger.Loc{}):
		return nil, fmt.Errorf("engine: action %x is certified, but the ledger holds neither its result nor where its certificate is", fp[:8])
	}
	c, err := db.readCertificate(e.CertLoc)
	if err != nil {
		return nil, err
	}
	if c.Fingerprint != fp {
		return nil, &CorruptionError{File: db.segmentFile(e.CertLoc.Segment), Offset: e.CertLoc.Offset, Run: c.RunID, Seq: c.Seq,
			Reason: fmt.Sprintf("the ledger's index names this certificate for action %x; it certifies action %x", fp[:8], c.Fingerprint[:8])}
	}
	return c.Result, nil
}
