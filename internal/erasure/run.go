package erasure

// Erasing a run (docs/DESIGN.md, "Erasing a run"). An erasure is a
// deletion that also destroys the run's content: its erase record
// (record.KindErase) deletes the run as a delete record does, and then the
// run's data keys are dropped from KEYS, so that every payload sealed with
// them (atom bodies, intents and certificates of its default-key actions,
// its end result and fail reasons, its frame files and snapshots, its
// erasable memory values) can never be opened again. The chain still
// verifies: it links each record over its sealed bytes, which stay.
//
// Each step is durable before the next:
//
//  1. KEYS marks the run's keys erasing (Mark): from here an interrupted
//     erasure is finished, or undone, at the next Open.
//  2. The erase record is appended and synced (Record). The run is gone
//     from the API from here on, as after a deletion.
//  3. The ledger forgets the run's default-key actions (Actions reads the
//     log for their fingerprints while the key still opens them), and an
//     engine checkpoint writes the ledger table, INBOX and CHECKPOINT
//     without them: those are sealed with the store's key, not the run's.
//  4. The run's frame file and snapshots are removed.
//  5. KEYS drops the keys (DropRun). The erasure is acknowledged here.
//
// Steps 3 and 4 reach the engine's ledger, checkpoints and derived files
// through Finisher (Finish, conduct.go). A crash before 2 leaves a mark and no erase record: Open
// removes the mark (Unmark; the erasure never happened, and was never
// acknowledged). A crash after 2 leaves the erase record and the mark
// (Pending): Open does 3 to 5 before it returns. After 5 the run is erased
// for good.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

// Erased is a run's erasure, as its erase record says (the engine's
// erasure and engine.Erasure).
type Erased struct {
	Seq    uint64     // the erasure's link: the end's seq + 1, or the deletion's + 1
	Head   chain.Hash // the erasure's link
	At     time.Time
	Reason string
}

// Begin does steps 1 and 2 of run's erasure: KEYS marks its keys erasing
// (Mark), then the erase record at seq, after the run's last link final,
// is appended and durable (Record). On an error the erasure did not
// happen: the mark is removed again (Unmark), and unmarkErr says why if
// that failed too (the next Open removes it); the caller undoes its own
// withdrawal of the run.
func (e *Eraser) Begin(ctx context.Context, run string, seq uint64, final chain.Hash, reason string) (er Erased, err, unmarkErr error) {
	if err := e.Mark(run, true); err != nil {
		return Erased{}, err, nil
	}
	if er, err = e.Record(ctx, run, seq, final, reason); err != nil {
		return Erased{}, err, e.Unmark(run)
	}
	return er, nil, nil
}

// Record does step 2 of run's erasure, whose keys Mark marked: the erase
// record at seq, after the run's last link final, durable when it
// returns. On an error the erasure did not happen.
func (e *Eraser) Record(ctx context.Context, run string, seq uint64, final chain.Hash, reason string) (Erased, error) {
	s := e.cfg.Store
	now := time.Unix(0, time.Now().UnixNano()) // as a restart reads it back
	er := Erased{Seq: seq, At: now, Reason: reason}
	sign := s.Signing()
	er.Head = sign.Hasher.Link(run, seq, final, record.AppendErasePayload(nil, now.UnixNano(), reason))
	note, err := sign.Note(run, seq, er.Head, true)
	if err != nil {
		return Erased{}, fmt.Errorf("engine: sign the deletion of run %q: %w", run, err)
	}
	if err := s.Append(ctx, [][]byte{record.AppendErase(nil, run, seq, final, er.Head, now.UnixNano(), reason, note)}); err != nil {
		return Erased{}, err
	}
	return er, nil
}

// Unmark undoes step 1 of run's erasure, whose erase record is not
// durable: its keys are live again.
func (e *Eraser) Unmark(run string) error { return e.Mark(run, false) }

// Actions reads the log, through c, for the fingerprints of run's intents
// and certificates of actions with default keys (those of explicit keys
// belong to the store and stay: ledger.Intent.ExplicitKey): step 3's
// input, read while run's keys still open them. c's decoder leaves the
// ledger's records sealed and skips all others; only the records sealed
// with run's own keys (their key number is in the clear) are decoded, by
// open. stop, called every 4096 records, ends the read with its error
// (the DB closed, or ctx done).
func (e *Eraser) Actions(run string, c *record.Cursor, open func(sealed *record.Record, into *record.Record) error, stop func() error) ([]ledger.Fingerprint, error) {
	own := e.ownNos(run)
	seen := map[ledger.Fingerprint]bool{}
	var fps []ledger.Fingerprint
	var r record.Record
	for n := 0; c.Next(); n++ {
		if n%4096 == 0 {
			if err := stop(); err != nil {
				return nil, err
			}
		}
		sealed := c.Record()
		if no, err := seal.KeyNo(sealed.Stored); err != nil || !own[no] {
			continue // another run's, or the store's (an explicit key's)
		}
		if err := open(sealed, &r); err != nil {
			return nil, err
		}
		var fp ledger.Fingerprint
		switch {
		case r.Intent != nil && r.Intent.RunID == run:
			fp = r.Intent.Fingerprint
		case r.Cert != nil && r.Cert.RunID == run:
			fp = r.Cert.Fingerprint
		default:
			continue
		}
		if !seen[fp] {
			seen[fp] = true
			fps = append(fps, fp)
		}
	}
	return fps, c.Err()
}

// OpenResult opens run's end result (its end record at seq) as
// CHECKPOINT's row holds it, sealed with the run's key. One that does not
// open is served as none: silently once the run's key was erased (what an
// erasure destroys reads as absent), with a warning otherwise. A
// plaintext store's result is stored in the clear and returned as is.
func (e *Eraser) OpenResult(run string, seq uint64, stored []byte) []byte {
	sealer := e.cfg.Store.Sealer()
	if sealer == nil {
		return stored
	}
	plain, err := sealer.Open(nil, stored, record.KindEnd, run, seq)
	if err != nil {
		if !errors.Is(err, seal.ErrErased) {
			e.cfg.Logger.Warn("engine: CHECKPOINT: the end result of a run does not open", "run", run, "err", err)
		}
		return nil
	}
	return plain
}
