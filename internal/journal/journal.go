package journal

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/wal"
)

// Core is what the engine implements for a Journal (doc.go).
type Core interface {
	Encode(dst []byte, kind record.Kind, body []byte) []byte
	Sealer() *record.Sealer
	Sample(body []byte)
	Append(ctx context.Context, rec []byte) (wal.Pos, error)
	AppendAsync(rec []byte) *wal.Waiter
	Go(f func())
	Failed(err error)
	Appended(n int)
	ReadAt(pos wal.Pos) ([]byte, error)
	Decoder() *record.Decoder
	File(seg uint64) string
	Ledger() *ledger.Ledger
	WaitLedger(ctx context.Context) error
}

// Journal is the journal of one ledger call (ledger.Journal): the ledger
// runs each write and applies its outcome under its checkpoint gate, so an
// engine checkpoint never sees a record written but not applied.
type Journal struct {
	Core    Core
	Relaxed bool
	// Landed is closed when the ledger call this journal serves returned,
	// so the ledger has applied what the journal wrote (Relaxed only).
	Landed <-chan struct{}
	// Max bounds a record's body; a larger one fails with ErrTooLarge.
	Max         int
	ErrTooLarge error
}

// buf is the scratch of one record's encoding: its body and its
// compressed body, dead once write returns (a record the log or a relaxed
// write's goroutine holds after that is allocated apart, at its size).
type buf struct{ body, comp []byte }

var bufs = sync.Pool{New: func() any { return new(buf) }}

func putBuf(b *buf) {
	const keep = 64 << 10 // don't pin the buffers of a huge record
	if cap(b.body) <= keep && cap(b.comp) <= keep {
		bufs.Put(b)
	}
}

// WriteIntent implements ledger.Journal.
func (j Journal) WriteIntent(ctx context.Context, in *ledger.Intent) (ledger.Loc, error) {
	b := bufs.Get().(*buf)
	defer putBuf(b)
	b.body = ledger.AppendIntent(b.body[:0], in)
	// An attempt of an action with a retry policy is durable before its
	// exec in either mode: its number is what a restart counts from.
	return j.write(ctx, record.KindIntent, in.RunID, in.ExplicitKey(), b, nil, !(j.Relaxed && in.Idempotent && in.Retry == nil))
}

// WriteCertificate implements ledger.Journal.
func (j Journal) WriteCertificate(ctx context.Context, c *ledger.Certificate) (ledger.Loc, error) {
	b := bufs.Get().(*buf)
	defer putBuf(b)
	b.body = ledger.AppendCertificate(b.body[:0], c)
	// A failed attempt (Certificate.Attempt) is durable before the wait
	// for the next in either mode.
	return j.write(ctx, record.KindCert, c.RunID, c.ExplicitKey, b, c, !j.Relaxed || c.Attempt != nil)
}

// write appends an intent or a certificate (c) of run, whose body is in
// b.body, and waits for it to be durable if wait. explicit says the
// action's key is explicit (doc.go, "Guarantees": its sealing).
func (j Journal) write(ctx context.Context, kind record.Kind, run string, explicit bool, b *buf, c *ledger.Certificate, wait bool) (ledger.Loc, error) {
	core := j.Core
	body := b.body
	if err := ctx.Err(); err != nil {
		return ledger.Loc{}, err
	}
	if len(body) > j.Max {
		return ledger.Loc{}, fmt.Errorf("%w: %s record of %d bytes, the limit is %d (engine.MaxSize); nothing was written",
			j.ErrTooLarge, kind, len(body), j.Max)
	}
	// kind | compressed body, or in an encrypted store kind |
	// sealed(compressed body) (record/seal.go): compressed into the
	// scratch. A write that waits hands the scratch itself to the log,
	// which copies it once into the segment before Append returns; an
	// asynchronous one copies it into a record of its size, which the log
	// holds after write returns; a sealed one is sealed into such a record.
	b.comp = core.Encode(b.comp[:0], kind, body)
	comp := b.comp[1:]
	var rec []byte
	sealer := core.Sealer()
	switch {
	case sealer == nil && wait:
		rec = b.comp
	case sealer == nil:
		rec = append(make([]byte, 0, len(b.comp)), b.comp...)
	default:
		rec = append(make([]byte, 0, 1+seal.Overhead+binary.MaxVarintLen64+len(comp)), byte(kind))
		scope := run
		if explicit {
			scope = ""
		}
		var err error
		if rec, err = sealer.SealLedger(rec, comp, kind, scope); err != nil {
			return ledger.Loc{}, fmt.Errorf("engine: %s record of run %q: %w; nothing was written", kind, run, err)
		}
	}
	core.Sample(body)
	if wait {
		pos, err := core.Append(ctx, rec)
		if err != nil {
			return ledger.Loc{}, err
		}
		return pos, nil
	}
	// Relaxed: enqueue and return at once. The fsync of the atom's commit
	// covers this record (one ordered log); the goroutine tells the ledger
	// where the certificate landed. An engine checkpoint waits for these
	// goroutines before it takes the ledger's table, so the table never
	// names a record that is not durable.
	w := core.AppendAsync(rec)
	landed := j.Landed
	core.Go(func() {
		ps, err := w.Wait(context.Background())
		if err != nil {
			// The log's error is sticky: the commit reports it. The ledger
			// holds this certificate without a location, so no engine
			// checkpoint may persist its table from now on. (A record too
			// large for a segment is the same: the ledger believes it.)
			core.Failed(err)
			return
		}
		core.Appended(len(rec))
		if c != nil {
			// After the ledger applied the certificate itself, or it
			// would ignore this update of an action still in flight.
			<-landed
			core.Ledger().ApplyCertificate(c, ps[0], true)
		}
	})
	return ledger.Loc{}, nil
}

// read reads the record of kind at pos, the ledger's records decoded; the
// record is the caller's.
func read(core Core, pos wal.Pos, kind record.Kind) (*record.Record, error) {
	raw, err := core.ReadAt(pos)
	if err != nil {
		return nil, fmt.Errorf("engine: read %s at %v: %w", kind, pos, err)
	}
	r := new(record.Record)
	if err := core.Decoder().Decode(raw, pos, core.File(pos.Segment), r); err != nil {
		return nil, err
	}
	if r.Kind != kind {
		return nil, &record.CorruptionError{File: core.File(pos.Segment), Offset: pos.Offset, Run: r.Run, Seq: r.Seq,
			Reason: fmt.Sprintf("the record is a %s, not the %s the index names", r.Kind, kind)}
	}
	return r, nil
}

// ReadCertificate reads the certificate at loc (ledger.Journal).
func ReadCertificate(core Core, loc ledger.Loc) (*ledger.Certificate, error) {
	r, err := read(core, loc, record.KindCert)
	if err != nil {
		return nil, err
	}
	return r.Cert, nil // a view of r.Plain, which is this call's own
}

// ReadIntent reads the intent at loc (ledger.IntentReader).
func ReadIntent(core Core, loc ledger.Loc) (*ledger.Intent, error) {
	r, err := read(core, loc, record.KindIntent)
	if err != nil {
		return nil, err
	}
	return r.Intent, nil
}

// Action returns the ledger's entry of action fp (the zero Entry when the
// ledger knows none) and the intent and certificate it locates, read back
// (nil where it locates none). An error is a read's.
func Action(core Core, fp ledger.Fingerprint) (e ledger.Entry, in *ledger.Intent, c *ledger.Certificate, err error) {
	e, _ = core.Ledger().Lookup(fp)
	if e.IntentLoc != (ledger.Loc{}) {
		if in, err = ReadIntent(core, e.IntentLoc); err != nil {
			return e, nil, nil, err
		}
	}
	if e.CertLoc != (ledger.Loc{}) {
		if c, err = ReadCertificate(core, e.CertLoc); err != nil {
			return e, in, nil, err
		}
	}
	return e, in, c, nil
}

// CertifiedResult returns the certified result of action fp, for an
// atom's delta that refers to it: the ledger's copy in memory, or the
// certificate the ledger's index locates in the log. A certificate the
// ledger already knows (this process wrote it, or Open replayed it from
// the log's tail: after a crash, the certificates of the atoms replayed
// are there) is final, since a done or resolved action is never certified
// again; only for another one does it wait for the ledger's persisted
// table.
func CertifiedResult(core Core, fp ledger.Fingerprint) ([]byte, error) {
	l := core.Ledger()
	certified := func(e ledger.Entry) bool { return e.Status == ledger.StatusDone || e.Status == ledger.StatusResolved }
	e, ok := l.Lookup(fp)
	if !ok || !certified(e) {
		if err := core.WaitLedger(context.Background()); err != nil {
			return nil, err
		}
		e, ok = l.Lookup(fp)
	}
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: the ledger does not know action %x", record.ErrNoCertificate, fp[:8])
	case !certified(e):
		return nil, fmt.Errorf("%w: action %x is %s in the ledger", record.ErrNoCertificate, fp[:8], e.Status)
	case e.Result != nil:
		return e.Result, nil
	case e.CertLoc == (ledger.Loc{}):
		return nil, fmt.Errorf("engine: action %x is certified, but the ledger holds neither its result nor where its certificate is", fp[:8])
	}
	c, err := ReadCertificate(core, e.CertLoc)
	if err != nil {
		return nil, err
	}
	if c.Fingerprint != fp {
		return nil, &record.CorruptionError{File: core.File(e.CertLoc.Segment), Offset: e.CertLoc.Offset, Run: c.RunID, Seq: c.Seq,
			Reason: fmt.Sprintf("the ledger's index names this certificate for action %x; it certifies action %x", fp[:8], c.Fingerprint[:8])}
	}
	return c.Result, nil
}

// ReadCertificate implements ledger.Journal.
func (j Journal) ReadCertificate(loc ledger.Loc) (*ledger.Certificate, error) {
	return ReadCertificate(j.Core, loc)
}

// ReadIntent implements ledger.IntentReader.
func (j Journal) ReadIntent(loc ledger.Loc) (*ledger.Intent, error) { return ReadIntent(j.Core, loc) }

var (
	_ ledger.Journal      = Journal{}
	_ ledger.IntentReader = Journal{}
)
