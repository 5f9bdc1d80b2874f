package engine

// What a rollback undoes: saga.Plan over the run's history (sagaStore).

import (
	"context"
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/internal/saga"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// planRollback lists what a rollback to to, completed by the atom at seq,
// undoes, newest first (saga.Plan; inflight: the actions of the atom a
// crash interrupted at seq).
func (r *Run) planRollback(ctx context.Context, to, seq uint64, inflight []layout.InflightAction) ([]record.Undo, error) {
	db := r.db
	if err := db.waitLedger(ctx); err != nil {
		return nil, err
	}
	fps := make([]ledger.Fingerprint, len(inflight))
	for i, in := range inflight {
		fps[i] = in.FP
	}
	undo, err := saga.Plan(ctx, &sagaStore{r: r, dec: db.decoder(false)}, r.id, to, seq, fps)
	if tm := (*saga.TooManyError)(nil); errors.As(err, &tm) {
		return nil, fmt.Errorf("%w: %w", ErrTooLarge, err)
	}
	return undo, err
}

// sagaStore is run r's history as saga.Plan reads it: the DB's ledger and
// log. One plan's: it reuses its decoder's buffer from one atom to the
// next.
type sagaStore struct {
	r   *Run
	dec *record.Decoder
	buf []byte // the decoded body of the last atom read
}

func (s *sagaStore) Lookup(fp ledger.Fingerprint) (ledger.Entry, bool) {
	return s.r.db.ledger.Lookup(fp)
}

func (s *sagaStore) Intent(loc ledger.Loc) (*ledger.Intent, error) { return s.r.db.readIntent(loc) }

func (s *sagaStore) Certificate(loc ledger.Loc) (*ledger.Certificate, error) {
	return s.r.db.readCertificate(loc)
}

// Actions reads committed atom seq from the log; the slice it returns is
// valid until the next call.
func (s *sagaStore) Actions(ctx context.Context, seq uint64) (fps []ledger.Fingerprint, err error) {
	s.buf, fps, err = s.r.committedActions(ctx, seq, s.dec, s.buf)
	return fps, err
}

// Certified reads the log from atom to's record (the run's start when to
// is its fork point) to its end.
func (s *sagaStore) Certified(ctx context.Context, to uint64) ([]saga.Certified, error) {
	r, db := s.r, s.r.db
	from := wal.Pos{}
	if to > r.base {
		p, err := r.committedAtomPos(ctx, to)
		if err != nil {
			return nil, fmt.Errorf("atom %d: %w", to, err)
		}
		from = p
	}
	dec := db.decoder(true)
	dec.Skip = func(k record.Kind, _ []byte) bool { return k != record.KindCert }
	c, err := record.NewCursor(db.log, db.segmentFile, from, dec)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return saga.ScanCertified(ctx, c, r.id, to)
}
