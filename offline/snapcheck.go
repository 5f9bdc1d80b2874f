package offline

// verify --deep's check of the snapshot store against the log: every
// snapshot's chain head and frame, and every position of the atom index.
//
// The store is opened read-only through Pebble, which takes the store's
// lock even so (it must: a read-only open beside a writer would see the
// writer's compactions remove files under it). So beside a running agent
// the check does not happen, and the report says so (Report.Unchecked): the
// engine itself checks every value it reads from the store against the log
// (internal/history), so what a running agent reads is right either way. When no
// process has the store open, the check holds the lock for its duration; an
// engine opening the snapshot store meanwhile waits for it (openSnapshots).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// notCheckedSnapshots is what a verify without --deep says of the store.
// (The engine checks every value it reads from the store against the log
// anyway, and rebuilds the store when one disagrees.)
const notCheckedSnapshots = "the snapshot store (its snapshots and atom index)"

// indexEntry is one position of the atom index.
type indexEntry struct {
	seq uint64
	pos wal.Pos
}

// checkSnapshotStore checks the snapshot store against the log, adding
// what disagrees to vr's failures and what it could not check to
// vr.unchecked.
func (vr *verifyRun) checkSnapshotStore(ctx context.Context, log *wal.Log) {
	db := vr.db
	dir := db.path(layout.SnapshotsDir)
	if _, err := db.fs.Stat(dir); layout.NotExist(err) {
		return // none: the engine builds it from the log
	}
	// Pebble creates its LOCK file even when it opens read-only, and verify
	// writes nothing into the store: without one, the store is not opened.
	// (The engine creates it at its next Open; its absence is harmless.)
	if _, err := db.fs.Stat(db.fs.PathJoin(dir, "LOCK")); layout.NotExist(err) {
		vr.unchecked = append(vr.unchecked, "the snapshot store (it has no LOCK file, which opening it would create: verify writes nothing)")
		return
	}
	s, err := snapshot.Open(dir, &snapshot.Options{FS: db.fs, ReadOnly: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		if layout.LockHeld(err) {
			vr.unchecked = append(vr.unchecked, "the snapshot store (a running process has it open, so not even with --deep: verify the store once it is closed)")
			return
		}
		vr.fail("", 0, dir, "snapshot store does not open: %v (the engine moves it aside and rebuilds it from the log)", err)
		return
	}
	defer s.Close()

	// What the store holds: the seqs of the snapshots and the positions of
	// the index, per run, in seq order.
	snaps := map[string][]uint64{}
	index := map[string][]indexEntry{}
	bad := func(run string, seq uint64, what string, err error) {
		vr.fail(run, seq, dir, "snapshot store: %s of run %q seq %d: %v (the engine ignores it and rebuilds the store)", what, run, seq, err)
	}
	err = s.EachSnapshot(func(run string, seq uint64, _ *snapshot.Snapshot, err error) error {
		if err != nil {
			bad(run, seq, "snapshot", err)
			return nil
		}
		snaps[run] = append(snaps[run], seq)
		return ctx.Err()
	})
	if err == nil {
		err = s.EachPosition(func(run string, seq uint64, p snapshot.Pos, err error) error {
			if err != nil {
				bad(run, seq, "atom position", err)
				return nil
			}
			index[run] = append(index[run], indexEntry{seq: seq, pos: p})
			return ctx.Err()
		})
	}
	if err != nil {
		if ctx.Err() == nil {
			vr.fail("", 0, dir, "snapshot store: %v (the engine rebuilds it from the log)", err)
		}
		return
	}
	vr.compareSnapshotStore(ctx, log, s, snaps, index)
}

// compareSnapshotStore reads the log once, rebuilding the frames of the runs
// that have snapshots, and compares each snapshot (head and frame) and each
// index position with it.
func (vr *verifyRun) compareSnapshotStore(ctx context.Context, log *wal.Log, s *snapshot.Store, snaps map[string][]uint64, index map[string][]indexEntry) {
	db := vr.db
	dir := db.path(layout.SnapshotsDir)
	frames := map[string]*frame.Frame{}
	last := map[string]uint64{} // run -> last seq of the log's first records of it
	for run := range snaps {
		frames[run] = newFrame()
		if rs := vr.runs[run]; rs != nil && rs.parent != "" {
			// A fork's frames start from its parent's state at its fork
			// point (rebuilt from the log when verify is deep).
			last[run] = rs.base
			if f, err := vr.frameAt(log, rs.parent, rs.base); err == nil {
				frames[run] = f
			} else {
				delete(frames, run)
			}
		}
	}
	for run, rs := range vr.runs {
		last[run] = rs.base
	}
	// The atoms' bodies are applied: opened from their seals in an
	// encrypted store.
	dec := &record.Decoder{Sealed: db.sealed, Sealer: db.sealer, Skip: func(k record.Kind, _ []byte) bool { return k != record.KindAtom }}
	c, err := record.NewCursor(log, db.segmentFile, wal.Pos{}, dec)
	if err != nil {
		vr.unchecked = append(vr.unchecked, fmt.Sprintf("the snapshot store (the log cannot be read: %v)", err))
		return
	}
	defer c.Close()
	c.OnDamage(func(wal.Pos, []byte, error) {}) // the log's own check reports it
	for n := 0; c.Next(); n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return
		}
		a := c.Record()
		if a.Seq != last[a.Run]+1 {
			continue // the log's own check reports it
		}
		last[a.Run] = a.Seq
		if ix := index[a.Run]; len(ix) > 0 && ix[0].seq == a.Seq {
			if ix[0].pos != a.Pos {
				vr.fail(a.Run, a.Seq, dir, "snapshot store: the atom index puts run %q seq %d at %v; the log has it at %v (the engine ignores it and rebuilds the store)", a.Run, a.Seq, ix[0].pos, a.Pos)
			}
			index[a.Run] = ix[1:]
		}
		f := frames[a.Run]
		if f == nil {
			continue
		}
		if err := db.applyAtomBody(f, a, vr.results); err != nil {
			delete(frames, a.Run) // the log's own check reports it
			continue
		}
		if ss := snaps[a.Run]; len(ss) > 0 && ss[0] == a.Seq {
			snaps[a.Run] = ss[1:]
			vr.compareSnapshot(s, a.Run, a.Seq, [32]byte(a.Head), f)
		}
	}
	if err := c.Err(); err != nil {
		return // the log's own check reports it
	}
	runs := make([]string, 0, len(snaps)+len(index))
	for run := range snaps {
		runs = append(runs, run)
	}
	for run := range index {
		runs = append(runs, run)
	}
	sort.Strings(runs)
	for _, run := range runs {
		if ss := snaps[run]; len(ss) > 0 {
			vr.fail(run, ss[0], dir, "snapshot store: a snapshot of run %q at seq %d, beyond the run's %d atoms in the log (the engine never reads it)", run, ss[0], last[run])
			snaps[run] = nil
		}
		if ix := index[run]; len(ix) > 0 {
			vr.fail(run, ix[0].seq, dir, "snapshot store: the atom index holds run %q seq %d, beyond the run's %d atoms in the log (the engine never reads it)", run, ix[0].seq, last[run])
			index[run] = nil
		}
	}
}

// compareSnapshot compares the store's snapshot of run at seq with the
// chain head and frame the log gives.
func (vr *verifyRun) compareSnapshot(s *snapshot.Store, run string, seq uint64, head [32]byte, want *frame.Frame) {
	dir := vr.db.path(layout.SnapshotsDir)
	snap, err := s.AtOrBelow(run, seq)
	if err == nil && snap.Seq != seq {
		err = fmt.Errorf("read back at seq %d", snap.Seq)
	}
	if err != nil {
		vr.fail(run, seq, dir, "snapshot store: snapshot of run %q seq %d: %v", run, seq, err)
		return
	}
	if snap.Head != head {
		vr.fail(run, seq, dir, "snapshot store: snapshot of run %q seq %d has head %x, the log's is %x (the engine ignores it and rebuilds the store)", run, seq, snap.Head[:8], head[:8])
		return
	}
	enc := frame.AppendFrame(nil, want)
	if snap.Plain {
		// The raw encoding (the store checked each chunk's hash): it must
		// be the frame's, byte for byte, and in an encrypted store there
		// must be none.
		switch {
		case vr.db.sealed:
			vr.fail(run, seq, dir, "snapshot store: snapshot of run %q seq %d holds its frame in the clear in an encrypted store (the engine ignores it and rebuilds the store)", run, seq)
		case !bytes.Equal(enc, snap.Frame):
			vr.fail(run, seq, dir, "snapshot store: snapshot of run %q seq %d differs from the frame rebuilt from the log (%d bytes, the frame's encoding is %d)", run, seq, len(snap.Frame), len(enc))
		}
		return
	}
	if n, known, err := frame.ClaimedLen(snap.Frame); err == nil && known && n != len(enc) {
		// Not decompressed: a value claiming another size than the frame's
		// differs, and may be a decompression bomb.
		vr.fail(run, seq, dir, "snapshot store: snapshot of run %q seq %d differs from the frame rebuilt from the log (it decompresses to %d bytes, the frame's encoding is %d)", run, seq, n, len(enc))
		return
	}
	got, err := vr.db.decodeFrame(snap.Frame, run, seq, fmt.Sprintf("%s: snapshot of run %q seq %d", dir, run, seq))
	if err != nil {
		vr.fail(run, seq, dir, "%v", err)
		return
	}
	if !bytes.Equal(enc, frame.AppendFrame(nil, got)) {
		vr.fail(run, seq, dir, "snapshot store: snapshot of run %q seq %d differs from the frame rebuilt from the log", run, seq)
	}
}
