package offline

// The restart files (frame files, CHECKPOINT's rows) against the chain
// verify read: what they say of a run must be what its records say.

import (
	"bytes"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
)

// loadRestartFiles reads CHECKPOINT and the frame files, to compare them
// with the chain once it is verified.
func (vr *verifyRun) loadRestartFiles() error {
	db := vr.db
	b, err := layout.ReadFile(db.fs, db.path(layout.CheckpointName))
	if err == nil {
		cp, err := layout.ParseCheckpoint(db.path(layout.CheckpointName), b)
		if err != nil {
			return err
		}
		vr.dc.cp, vr.dc.replay = cp, cp.Replay
		if cp.LedgerGen != 0 && vr.deep {
			if t, err := layout.ReadFile(db.fs, db.ledgerTableName(cp.LedgerGen)); err == nil {
				vr.dc.table = db.openStoreFile(t, record.PlaceLedgerTable, cp.LedgerGen)
			}
		}
		for i := range cp.Runs {
			vr.run(cp.Runs[i].ID).ckpt = &cp.Runs[i]
		}
	} else if !layout.NotExist(err) {
		return err
	}
	names, err := db.fs.List(db.path(layout.FramesDir))
	if err != nil {
		return nil // no frame files
	}
	// Without Deep only a frame file's run, seq and head are compared (its
	// checksum is checked as it is parsed): the files can share one
	// buffer, and none is kept. A store's frame files can hold as many
	// bytes as a tenth of its log, and a new buffer for each cost more
	// than reading them into one.
	var buf []byte
	for _, n := range names {
		if len(n) < 6 || n[len(n)-6:] != ".frame" {
			continue
		}
		name := db.fs.PathJoin(db.path(layout.FramesDir), n)
		var b []byte
		if vr.deep {
			b, err = layout.ReadFile(db.fs, name)
		} else {
			b, err = layout.ReadFileTo(db.fs, name, buf[:0])
			buf = b
		}
		if moved(err) {
			return err // the engine replaced or removed it: verify again (retryVanished)
		}
		if err != nil {
			vr.fail("", 0, name, "%v", err)
			continue
		}
		ff, err := layout.ParseFrameFile(name, b)
		if err != nil {
			vr.fail("", 0, name, "%v", err)
			continue
		}
		if layout.FrameFileBase(ff.Run) != n {
			vr.fail(ff.Run, ff.Seq, name, "frame file of run %q under another run's name", ff.Run)
			continue
		}
		if !vr.deep {
			ff.Frame = nil // a slice of buf, which the next file overwrites
		}
		vr.run(ff.Run).frameFile = ff
	}
	return nil
}

func (vr *verifyRun) compareFrame(run string, want *frame.Frame, ff *layout.FrameFile) {
	name := vr.db.frameFileName(run)
	enc := frame.AppendFrame(nil, want)
	if n, known, err := frame.ClaimedLen(ff.Frame); err == nil && known && n != len(enc) {
		// Not decompressed (a bomb would be): its size alone differs.
		vr.fail(run, ff.Seq, name, "frame file differs from the frame rebuilt from the log (it decompresses to %d bytes, the frame's encoding is %d)", n, len(enc))
		return
	}
	got, err := vr.db.decodeFrame(ff.Frame, ff.Run, ff.Seq, name)
	if err != nil {
		vr.fail(run, ff.Seq, name, "%v", err)
		return
	}
	if !bytes.Equal(enc, frame.AppendFrame(nil, got)) {
		vr.fail(run, ff.Seq, name, "frame file differs from the frame rebuilt from the log")
	}
}

// finish compares the restart files with the verified chains and adds what
// it found to the report.
func (vr *verifyRun) finish(rep *chain.Report) {
	verified := map[string]chain.RunReport{}
	for _, rr := range rep.Runs {
		verified[rr.RunID] = rr
	}
	headAt := func(run string, seq uint64) (chain.Hash, bool) {
		rs := vr.runs[run]
		if rs == nil || seq < rs.base || seq == 0 || seq > verified[run].LastSeq {
			return chain.Hash{}, false
		}
		return vr.headAt(run, seq)
	}
	for id, rs := range vr.runs {
		if ff := rs.frameFile; ff != nil {
			name := vr.db.frameFileName(id)
			if h, ok := headAt(id, ff.Seq); !ok {
				vr.fail(id, ff.Seq, name, "frame file at seq %d, beyond the run's verified chain", ff.Seq)
			} else if h != ff.Head {
				vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCheckpointMismatch, RunID: id, Seq: ff.Seq,
					Expected: h, Actual: ff.Head, Location: name, Detail: "frame file head differs from the chain"})
			} else if vr.deep && rs.frame != nil && rs.base+rs.heads.len() < ff.Seq {
				vr.fail(id, ff.Seq, name, "frame file beyond the log")
			}
		}
		if c := rs.ckpt; c != nil && c.Status != 0 {
			name := vr.db.path(layout.CheckpointName)
			if h, ok := headAt(id, c.LastSeq+1); !ok || !rs.ended {
				vr.fail(id, c.LastSeq+1, name, "engine checkpoint says the run ended at seq %d; the log does not end it there", c.LastSeq+1)
			} else if h != c.EndHead {
				vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCheckpointMismatch, RunID: id, Seq: c.LastSeq + 1,
					Expected: h, Actual: c.EndHead, Location: name, Detail: "engine checkpoint's end head differs from the chain"})
			} else if e := rs.end; e.Status != c.Status || e.Ended != c.Ended || !bytes.Equal(e.Result, c.Result) {
				// RunInfo serves the row's status, time and result for a
				// run not replayed: they must be the end record's.
				vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCheckpointMismatch, RunID: id, Seq: c.LastSeq + 1,
					Location: name, Detail: "engine checkpoint's end (status, time or result) differs from the run's end record"})
			}
		}
		if c := rs.ckpt; c != nil && (c.Created != rs.created || c.Parent != rs.parent ||
			c.Parent != "" && (c.ForkedAt != rs.base || c.BaseHead != rs.genesis)) {
			// RunInfo serves these from the row for a run not replayed.
			vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCheckpointMismatch, RunID: id, Location: vr.db.path(layout.CheckpointName),
				Detail: "engine checkpoint's creation time or fork origin (parent, fork point, fork genesis) differs from the run's creation record"})
		}
		if c := rs.ckpt; c != nil && c.LastSeq > 0 {
			name := vr.db.path(layout.CheckpointName)
			if h, ok := headAt(id, c.LastSeq); !ok {
				vr.fail(id, c.LastSeq, name, "engine checkpoint at seq %d, beyond the run's verified chain", c.LastSeq)
			} else if h != c.Head {
				vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCheckpointMismatch, RunID: id, Seq: c.LastSeq,
					Expected: h, Actual: c.Head, Location: name, Detail: "engine checkpoint head differs from the chain"})
			}
		}
	}
	vr.finishDerived(rep)
	vr.finishMessages() // verify_messages.go
	vr.finishWaits()    // verify_waits.go
	vr.finishStreams()  // verify_stream.go
	if len(vr.extra) == 0 {
		return
	}
	rep.OK = false
	rep.Failures = append(rep.Failures, vr.extra...)
	for i := range rep.Runs {
		for j := range vr.extra {
			if f := vr.extra[j]; f.RunID == rep.Runs[i].RunID && rep.Runs[i].Failure == nil {
				rep.Runs[i].OK = false
				rep.Runs[i].Failure = &f
			}
		}
	}
}
