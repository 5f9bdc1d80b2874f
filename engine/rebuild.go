package engine

// Derived files rebuilt from the log, and log damage named by run and seq.
//
// The log is the truth (I9). A frame file, the ledger table or CHECKPOINT
// that is damaged, missing, stale or disagrees with the log is set aside
// and what it held is rebuilt from the log: a slower restart, never a
// different answer. Damage to the log itself is the opposite case: it is
// refused, naming the segment, the offset and the run and seq it reaches.

import (
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
)

// segmentFile is the path of a log segment.
func (db *DB) segmentFile(seg uint64) string {
	return db.fs.PathJoin(db.path(walDir), wal.SegmentName(seg))
}

// logDamage turns a damaged log record met while reading into an engine
// corruption error naming the segment, the offset and, from the records
// around it, the run and seq it reaches; before holds the last seq of each
// run read before the damage (nil: unknown). Other errors are wrapped.
func (db *DB) logDamage(err error, before map[string]uint64) error {
	var ce *wal.CorruptionError
	if !errors.As(err, &ce) {
		return fmt.Errorf("engine: read log: %w", err)
	}
	run, seq, around := locateDamage(db.log, wal.Pos{Segment: ce.Segment, Offset: ce.Offset}, before)
	return &CorruptionError{File: ce.File, Offset: ce.Offset, Run: run, Seq: seq,
		Reason: ce.Reason + around, Err: err}
}

// replayedSeqs returns, during Open's replay, the last seq of every run
// known so far: built, or still a row of CHECKPOINT.
func (db *DB) replayedSeqs() map[string]uint64 {
	m := make(map[string]uint64, len(db.mu.runs)+db.mu.lazyLeft)
	for i := range db.mu.lazy {
		m[db.mu.lazy[i].id] = db.mu.lazy[i].lastSeq
	}
	for id, r := range db.mu.runs {
		m[id] = r.mu.lastSeq
	}
	return m
}

// locateDamage names the run and seq a damaged record at bad reaches: the
// first run whose next atom after the damage skips a seq past its last
// atom before it (before[run]; a run not in before had none, and before
// nil means unknown) lost that seq. If no run skips one, the damaged
// record was not an atom a later record shows missing (a ledger record,
// or the last atom of a run), and the first atom after it is named: the
// atom a damaged intent or certificate most likely belonged to.
// around describes the neighbours for the error's reason.
func locateDamage(log *wal.Log, bad wal.Pos, before map[string]uint64) (run string, seq uint64, around string) {
	firstAfter, firstRun, firstSeq := "", "", uint64(0)
	err := log.ScanAfter(bad, func(pos wal.Pos, rec []byte) bool {
		if len(rec) == 0 || rec[0] != kindAtom {
			return true
		}
		a, err := decodeAtomRecord(rec)
		if err != nil {
			return true
		}
		if firstAfter == "" {
			firstRun, firstSeq = a.run, a.seq
			firstAfter = fmt.Sprintf("; no run skips a seq across it: it is not an atom, and the first atom after it is run %q seq %d at %v (whose action records come before it)", a.run, a.seq, pos)
		}
		if before == nil {
			return false
		}
		if last := before[a.run]; a.seq > last+1 {
			run, seq = a.run, last+1
			around = fmt.Sprintf("; run %q resumes at seq %d after it (at %v), its last atom before it is seq %d", a.run, a.seq, pos, last)
			return false
		}
		before[a.run] = a.seq
		return true
	})
	if run == "" {
		run, seq, around = firstRun, firstSeq, firstAfter
		if err == nil && firstAfter == "" {
			around = "; no atom follows it"
		}
	}
	return run, seq, around
}

// rebuildFrame builds the frame of run as of seq last from the log alone:
// every atom of the run, from seq 1, must be there in order, and the last
// one's head must be head. It reads the whole log.
func (db *DB) rebuildFrame(run string, last uint64, head chain.Hash) (*frame.Frame, error) {
	rd, err := db.log.NewReader(wal.Pos{})
	if err != nil {
		return nil, fmt.Errorf("engine: rebuild frame of run %q: %w", run, err)
	}
	defer rd.Close()
	f := newFrame()
	var seq uint64
	var h chain.Hash
	seen := map[string]uint64{} // every run's last seq so far, to name damage
	for seq < last && rd.Next() {
		rec := rd.Record()
		if len(rec) == 0 || rec[0] != kindAtom {
			continue
		}
		a, err := decodeAtomRecord(rec)
		if err != nil {
			continue
		}
		if a.run != run {
			seen[a.run] = max(seen[a.run], a.seq)
			continue
		}
		switch {
		case a.seq <= seq:
			continue // a record the run's replay would skip too
		case a.seq != seq+1:
			return nil, &CorruptionError{File: db.segmentFile(rd.Pos().Segment), Offset: rd.Pos().Offset, Run: run, Seq: seq + 1,
				Reason: fmt.Sprintf("seq %d follows seq %d: the atoms between them are missing", a.seq, seq)}
		}
		if err := db.applyAtomBody(f, run, a.seq, a.body); err != nil {
			return nil, err
		}
		seq, h = a.seq, a.head
		seen[run] = seq
	}
	if err := rd.Err(); err != nil {
		return nil, db.logDamage(err, seen)
	}
	if seq != last {
		return nil, &CorruptionError{File: db.path(walDir), Run: run, Seq: seq + 1,
			Reason: fmt.Sprintf("the log holds the run's atoms up to seq %d, its last seq is %d", seq, last)}
	}
	if h != head {
		return nil, &CorruptionError{File: db.path(walDir), Run: run, Seq: seq,
			Reason: fmt.Sprintf("the log's head %x differs from the run's %x", h[:8], head[:8])}
	}
	return f, nil
}

// rebuildLedgerTable builds the ledger table as of the replay position to
// from the ledger records of the log before it, for a table that is
// missing, damaged or not the one CHECKPOINT names. The records from to
// on were applied to db.ledger by Open and keep precedence over it.
func (db *DB) rebuildLedgerTable(to wal.Pos) ([]byte, error) {
	l := ledger.New()
	rd, err := db.log.NewReader(wal.Pos{})
	if err != nil {
		return nil, fmt.Errorf("engine: rebuild ledger table: %w", err)
	}
	defer rd.Close()
	for rd.Next() {
		pos := rd.Pos()
		if !pos.Less(to) {
			break
		}
		rec := rd.Record()
		if len(rec) == 0 || (rec[0] != kindIntent && rec[0] != kindCert) {
			continue
		}
		where := func(err error) error {
			return &CorruptionError{File: db.segmentFile(pos.Segment), Offset: pos.Offset, Reason: err.Error(), Err: err}
		}
		body, err := db.comp.Decompress(nil, rec[1:])
		if err != nil {
			return nil, where(fmt.Errorf("%s: %w", kindName(rec[0]), err))
		}
		loc := ledger.Loc{Segment: pos.Segment, Offset: pos.Offset}
		if rec[0] == kindIntent {
			in, err := ledger.DecodeIntent(body)
			if err != nil {
				return nil, where(err)
			}
			l.ApplyIntent(in, loc)
		} else {
			c, err := ledger.DecodeCertificate(body)
			if err != nil {
				return nil, where(err)
			}
			l.ApplyCertificate(c, loc, false)
		}
	}
	if err := rd.Err(); err != nil {
		return nil, db.logDamage(err, nil)
	}
	return l.AppendTable(nil), nil
}

// decompressDamage reports a log record that does not decompress: a
// missing dictionary names its file, anything else the record.
func (db *DB) decompressDamage(rec []byte, pos wal.Pos, what string, err error) error {
	if d := db.dictNamed(rec[1:]); d != "" {
		return &CorruptionError{File: d, Reason: fmt.Sprintf("missing: the %s at %v needs it", what, pos), Err: err}
	}
	return &CorruptionError{File: db.segmentFile(pos.Segment), Offset: pos.Offset, Reason: fmt.Sprintf("%s: %v", what, err), Err: err}
}

// checkReadOnlyLog refuses, for the read-only tools, a log that is gone
// or lost records (as Open does: see checkLogComplete), with CHECKPOINT as
// the witness of where the log reached when it is readable.
func (db *DB) checkReadOnlyLog(l *wal.Log) error {
	var cp *checkpointFile
	if b, err := readFile(db.fs, db.path(checkpointName)); err == nil {
		cp, _ = parseCheckpointFile(db.path(checkpointName), b) // damaged: no witness
	}
	return db.checkLogComplete(l, cp)
}

// noteFrameRebuilt records that a run's frame file was not used.
func (db *DB) noteFrameRebuilt(run, why string) {
	db.counters.framesRebuilt.Add(1)
	db.logger.Warn("engine: frame file not used; rebuilding the run's frame from the log",
		"run", run, "file", db.frameFileName(run), "reason", why)
}
