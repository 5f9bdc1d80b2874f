package engine

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/internal/history"
	jrn "github.com/continuumdb/continuum/internal/journal"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/offline"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Atom returns the decoded content of committed atom seq of the run: its
// delta and its actions with their intents and certificates, read from the
// log of the open store (the atom's position comes from the atom index, as
// for StateAt).
func (r *Run) Atom(ctx context.Context, seq uint64) (*AtomInfo, error) {
	db := r.db
	if err := db.checkOpen(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	gone := r.mu.gone
	r.mu.Unlock()
	if gone != nil {
		return nil, gone
	}
	pos, err := r.committedAtomPos(ctx, seq)
	if err != nil {
		return nil, err
	}
	if err := db.waitLedger(ctx); err != nil {
		return nil, err
	}
	return offline.ReadAtomInfo(db.comp, db.sealer, db.log, db.segmentFile, pos, r.id, seq, func(fp ledger.Fingerprint) (ActionInfo, error) {
		e, in, c, err := jrn.Action(journalCore{db}, fp)
		info := ActionInfo{Fingerprint: fp, Status: e.Status}
		if in != nil {
			info.SetIntent(in, e.IntentLoc)
		}
		if c != nil {
			info.SetCert(c, e.CertLoc)
		}
		return info, err
	})
}

// committedActions returns the fingerprints of the actions committed atom
// seq lists, read from the log and decoded with dec into buf (returned, to
// be reused; the fingerprints are in it).
func (r *Run) committedActions(ctx context.Context, seq uint64, dec *record.Decoder, buf []byte) ([]byte, []ledger.Fingerprint, error) {
	pos, err := r.committedAtomPos(ctx, seq)
	if err != nil {
		return buf, nil, err
	}
	a, err := r.db.readAtom(pos, r.id, seq)
	if err != nil {
		return buf, nil, err
	}
	buf, body, err := dec.DecodeAtom(buf, a, r.db.segmentFile(pos.Segment))
	if err != nil {
		return buf, nil, err
	}
	return buf, body.Actions, nil
}

// committedAtomPos returns the log position of committed atom seq: from
// memory for the atoms after the atom index, else from the index (as for
// StateAt).
func (r *Run) committedAtomPos(ctx context.Context, seq uint64) (wal.Pos, error) {
	r.mu.Lock()
	last, indexed := r.mu.lastSeq, r.mu.book.IndexedSeq
	var pos wal.Pos
	inMem := seq > indexed && seq <= last
	if inMem {
		i := seq - indexed - 1
		if i >= uint64(len(r.mu.book.Positions)) {
			r.mu.Unlock()
			return wal.Pos{}, fmt.Errorf("engine: run %q: no log position for seq %d", r.id, seq)
		}
		pos = r.mu.book.Positions[i]
	}
	r.mu.Unlock()
	if seq == 0 || seq > last {
		return wal.Pos{}, fmt.Errorf("%w: run %q seq %d, last seq %d", ErrSeqOutOfRange, r.id, seq, last)
	}
	if inMem {
		return pos, nil
	}
	return history.AtomPosition(ctx, r.db.stateStore(), (*capView)(r), seq)
}
