package wait

// The pieces of the conduct of waits (Waits, and the engine's replay):
// WAITS's writing at a checkpoint, the check of a replayed record against
// its run, the records to write with an event's plaintext.

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// WriteFile captures the index (Capture) for the checkpoint of generation
// gen at replay position replay, rows as row says, and writes it as WAITS
// at path in fs: sealed per block with sealer (layout.SealWaits) when the
// store seals, renamed into place without the directory's sync (the
// CHECKPOINT written next makes it durable), synced unless noSync. Then,
// if install, the index reads its table from the file (Installed): the
// engine's Close, which lets go of the index just after, does not.
func (x *Index) WriteFile(fs vfs.FS, path string, sealer *record.Sealer, gen uint64, replay wal.Pos, row Row, noSync, install bool) error {
	b, err := x.Capture(gen, replay, row)
	if err != nil {
		return fmt.Errorf("engine: checkpoint: waits: %w", err)
	}
	if sealer != nil {
		if b, err = layout.SealWaits(b, sealer, gen); err != nil {
			return fmt.Errorf("engine: checkpoint: waits: %w", err)
		}
	}
	if err := layout.WriteFileRenamed(fs, path, b, noSync); err != nil {
		return err
	}
	if install {
		x.Installed(gen)
	}
	return nil
}

// CheckReplayed says what is wrong with rec, a wait, event or wake record
// of Open's replay, against its run: its link (link, as the store's
// hasher computes it over the record) is its own, and it follows the
// run's last atom (last, of head; ended: the run ended) or an earlier
// one, with that atom's head. "" if nothing.
func CheckReplayed(rec *record.Record, link chain.Hash, last uint64, head chain.Hash, ended bool) string {
	switch {
	case link != rec.Head:
		return fmt.Sprintf("the %s record's link %x is not its own (%x)", rec.Kind, rec.Head[:8], link[:8])
	case rec.Seq > last:
		return fmt.Sprintf("a %s record after seq %d, and the run's last atom is %d", rec.Kind, rec.Seq, last)
	case rec.Seq == last && rec.Final != head && !ended:
		return fmt.Sprintf("a %s record names head %x at seq %d, the run's is %x", rec.Kind, rec.Final[:8], rec.Seq, head[:8])
	}
	return ""
}

// Rec is a record of waits to write, and an event's plaintext payload
// (Plain: what the index applies; the record holds it sealed in an
// encrypted store).
type Rec struct {
	Rec   *record.Record
	Plain []byte
}

// Recs is recs to write; plain, an event's plaintext payload.
func Recs(recs []*record.Record, plain []byte) []Rec {
	out := make([]Rec, len(recs))
	for i, rec := range recs {
		out[i].Rec = rec
		if rec.Kind == record.KindEvent {
			out[i].Plain = plain
		}
	}
	return out
}

// Stale reports whether w is no wait to act on any more, its run's last
// seq being last: the run moved on (an atom took it), ended, or is gone;
// the index then forgets it (Taken, Gone).
func (x *Index) Stale(w *Wait, last uint64, ended, gone bool) bool {
	switch {
	case gone || ended:
		x.Gone(w.Run)
		return true
	case last > w.Seq:
		x.Taken(w.Run, last)
		return true
	}
	return false
}

// DeclareFields returns the fields of a wait for name until deadline (zero:
// none), or why they are not valid.
func DeclareFields(name string, deadline time.Time) (record.WaitFields, error) {
	w := record.WaitFields{Name: name}
	if !deadline.IsZero() {
		if w.Deadline = deadline.UnixNano(); w.Deadline <= 0 {
			return w, fmt.Errorf("a deadline at or before 1970 (%v)", deadline)
		}
	}
	if err := record.CheckWaitFields(record.KindWait, &w); err != nil {
		return w, fmt.Errorf("wait: %v", err)
	}
	return w, nil
}
