package offline

// Verify's checks of the stream records (record/stream.go; the rules are
// internal/stream.Checker's): per stream of a run, offsets 0, 1, 2, ...
// in log order, no gap and no repeat; a chunk of the run's next atom,
// before the run's end; attempts of a seq that never go down, and none
// appending after a fail or abandon record settled it.

import (
	"github.com/continuumdb/continuum/internal/stream"
	"github.com/continuumdb/continuum/record"
)

// streamNote feeds the stream checker r, any record of the scan, and
// reports where it breaks a rule of streams.
func (vr *verifyRun) streamNote(r *record.Record, loc func() string) {
	if vr.streams == nil {
		vr.streams = &stream.Checker{Trimmed: vr.trimmed()}
	}
	if why := vr.streams.Note(r); why != "" {
		vr.fail(r.Run, r.Seq, loc(), "%s", why)
	}
}

// trimmed reports whether garbage collection removed records from the
// log (its first segments, or records of a compacted one).
func (vr *verifyRun) trimmed() bool {
	segs := vr.log.Segments()
	return len(segs) > 0 && (segs[0].ID > 1 || vr.log.AnyCompacted())
}

// finishStreams reports the stream records of runs the log neither
// created nor deleted (a trimmed log).
func (vr *verifyRun) finishStreams() {
	if vr.streams == nil {
		return
	}
	for run, why := range vr.streams.Finish() {
		if d := vr.deletions[run]; d == nil || !d.valid {
			vr.fail(run, 0, "wal", "%s", why)
		}
	}
}
