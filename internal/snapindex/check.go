package snapindex

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// Rebuildable reports whether a snapshot store that failed to open with
// err is rebuilt from the log: it is damaged or missing, or Pebble refused
// its files for any other reason than I/O or a newer format. closed is
// the engine's ErrClosed.
func Rebuildable(err, closed error) bool {
	var ce *record.CorruptionError
	if errors.Is(err, snapshot.ErrCorrupt) || errors.As(err, &ce) {
		return true
	}
	if errors.Is(err, snapshot.ErrNewerFormat) || errors.Is(err, snapshot.ErrFailed) || (closed != nil && errors.Is(err, closed)) || layout.LockHeld(err) {
		return false
	}
	var errno syscall.Errno
	return !errors.As(err, &errno) || errors.Is(err, syscall.ENOENT)
}

// IOFailure reports whether err, from the snapshot store, is its failure
// to read or write (it has failed, already reported, and not for damage):
// not a value that disagrees with the log.
func IOFailure(err error) bool {
	return (errors.Is(err, snapshot.ErrFailed) || errors.Is(err, snapshot.ErrClosed)) && !errors.Is(err, snapshot.ErrCorrupt)
}

// Mismatch reports a value of s that disagrees with the log (err, for
// run's atom seq): it is counted, the first one is logged, and s fails
// (snapshots stop; the next Open rebuilds the store). An err that is the
// store's own I/O failure (IOFailure) is not a mismatch and is ignored.
func (k *Keeper) Mismatch(s *snapshot.Store, run string, seq uint64, err error) {
	if IOFailure(err) {
		return
	}
	n := k.mismatches.Add(1)
	if n == 1 {
		k.cfg.Logger.Error("engine: the snapshot store disagrees with the log; serving from the log, snapshots stop, and the next Open rebuilds the store",
			"run", run, "seq", seq, "err", err)
	} else {
		k.cfg.Logger.Debug("engine: snapshot store mismatch", "run", run, "seq", seq, "err", err)
	}
	s.Fail(fmt.Errorf("run %q seq %d: %w", run, seq, err))
}

// Mismatches is how many values of the store disagreed with the log.
func (k *Keeper) Mismatches() int64 { return k.mismatches.Load() }

// ScanPositions reads the log from its start for the positions of n atoms
// of run after seq base: for each seq, the first atom record of the run at
// that seq, as recovery takes it. A log that holds fewer is a
// *record.CorruptionError naming the first missing seq.
func (k *Keeper) ScanPositions(ctx context.Context, run string, base, n uint64) ([]wal.Pos, error) {
	dec := &record.Decoder{Skip: func(k record.Kind, id []byte) bool { return k != record.KindAtom || string(id) != run }}
	c, err := k.host.Cursor(dec)
	if err != nil {
		return nil, fmt.Errorf("engine: run %q: scan of the log: %w", run, err)
	}
	defer c.Close()
	pos := make([]wal.Pos, 0, min(n, 1<<16))
	for i := 0; uint64(len(pos)) < n && c.Next(); i++ {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if a := c.Record(); a.Seq == base+uint64(len(pos))+1 {
			pos = append(pos, a.Pos)
		}
	}
	if err := c.Err(); err != nil {
		return nil, fmt.Errorf("engine: run %q: scan of the log: %w", run, err)
	}
	if uint64(len(pos)) < n {
		return nil, &record.CorruptionError{File: k.path(layout.WALDir), Run: run, Seq: base + uint64(len(pos)) + 1,
			Reason: fmt.Sprintf("the log holds atoms %d..%d of the run, %d..%d are committed", base+1, base+uint64(len(pos)), base+1, base+n)}
	}
	return pos, nil
}

// ErrNotThisAtom is the mismatch of a position that points at a record
// other than the atom it is meant for.
var ErrNotThisAtom = errors.New("the position does not hold the atom record of this run and seq")

// LogReader reads a record of the log at its position: *wal.Log, or a
// reader through a wal.ReadCache.
type LogReader interface {
	ReadAt(p wal.Pos) ([]byte, error)
}

// ReadAtom reads the atom record at p of log (file names its segments;
// sealer opens a sealed store's records, nil in a plaintext one) and
// checks that it is run's atom at seq: any other record, or one that does
// not decode, is an error matching ErrNotThisAtom.
func ReadAtom(log *wal.Log, file func(seg uint64) string, sealer *record.Sealer, p wal.Pos, run string, seq uint64) (*record.Record, error) {
	return ReadAtomWith(log, AtomDecoder(sealer), file, p, run, seq)
}

// AtomDecoder is the Decoder ReadAtom decodes with: atoms, opened with
// sealer in a sealed store.
func AtomDecoder(sealer *record.Sealer) *record.Decoder {
	return &record.Decoder{Sealed: sealer != nil, Sealer: sealer}
}

// ReadAtomWith is ReadAtom decoding with dec (AtomDecoder's), for a
// reader of many atoms one after the other.
func ReadAtomWith(log LogReader, dec *record.Decoder, file func(seg uint64) string, p wal.Pos, run string, seq uint64) (*record.Record, error) {
	raw, err := log.ReadAt(p)
	if err != nil {
		return nil, err
	}
	a := &record.Record{}
	if err := dec.Decode(raw, p, file(p.Segment), a); err != nil {
		return nil, fmt.Errorf("%w: %v: %v", ErrNotThisAtom, p, err)
	}
	if a.Kind != record.KindAtom {
		return nil, fmt.Errorf("%w: %v holds no atom record", ErrNotThisAtom, p)
	}
	if a.Run != run || a.Seq != seq {
		return nil, fmt.Errorf("%w: %v holds run %q seq %d", ErrNotThisAtom, p, a.Run, a.Seq)
	}
	return a, nil
}
