// Package history reads a run's state at an earlier seq back (Run.StateAt
// below the run's last seq, an atom's log position): through the snapshot
// store, which is derived from the log and may be damaged, stale, missing
// or failed, and else from the log itself. Every value the snapshot store
// gives (a snapshot's head, an atom-index position) is checked against the
// log before use; a value that fails its check is reported (Store.Mismatch:
// it fails the snapshot store until the next Open) and the state is built
// from the log instead (docs/DESIGN.md, "Crash safety, operation by
// operation", the snapshot store). It writes nothing: package engine calls
// it (engine/runstate.go's stateAt, engine/atominfo.go) once it has read,
// under the run's lock, which positions the run holds in memory.
//
// # The interface
//
// What the engine provides (internal/runstate's Store, over the values
// engine/runview.go's stateStore hands it):
//
//	type Store interface {
//		// Snapshots returns the snapshot store, or nil when there is none
//		// to use (snapindex.Keeper.Usable).
//		Snapshots(ctx context.Context) (*snapshot.Store, error)
//		// Mismatch reports that a value of s for run at seq failed its
//		// check against the log (snapindex.Keeper.Mismatch).
//		Mismatch(s *snapshot.Store, run string, seq uint64, err error)
//		// ScanPositions scans the log for the positions of run's atoms
//		// base+1..base+n (snapindex.Keeper.ScanPositions).
//		ScanPositions(ctx context.Context, run string, base, n uint64) ([]wal.Pos, error)
//		// ReadAtom reads the atom record at p and checks that it is run's
//		// atom at seq; a record that is not matches snapindex.ErrNotThisAtom.
//		ReadAtom(p wal.Pos, run string, seq uint64) (*record.Record, error)
//		// SnapshotFrame decodes the frame of snap, run's snapshot at seq.
//		SnapshotFrame(snap *snapshot.Snapshot, run string, seq uint64) (*frame.Frame, error)
//		// Apply applies atom a's delta to f.
//		Apply(f *frame.Frame, a *record.Record) error
//		// LogDir names the log's directory, for an error of a position
//		// that holds another record.
//		LogDir() string
//		// Warn logs a disagreement that the log settles.
//		Warn(msg string, args ...any)
//	}
//
// and over one run (engine/runview.go's capView), a runview.Run and:
//
//	type Run interface {
//		runview.Run
//		// BaseFrame returns the run's state at Base: the empty frame, or a
//		// fork's parent's state at the fork point. The caller's.
//		BaseFrame(ctx context.Context) (*frame.Frame, error)
//		// FrameFile returns the run's frame file's frame, seq and head when
//		// the file is sound and its seq is in Base+1..seq; nil otherwise.
//		FrameFile(seq uint64) (*frame.Frame, uint64, chain.Hash)
//		// Scanned is the run's cache of positions found by a log scan.
//		Scanned() *Scanned
//	}
//
// What the engine calls:
//
//	State(ctx, st, r, seq, indexed, fileSeq, mem)  // the state at seq (Base < seq < last)
//	AtomPosition(ctx, st, r, seq)                  // the position of an indexed atom
//
// where indexed is the run's last atom whose position the snapshot store
// holds, fileSeq its frame file's seq, and mem the positions of atoms
// indexed+1.. that the run holds in memory (mem[i] is atom indexed+1+i).
//
// # Guarantees
//
//   - The state is built only from values checked against the log: a
//     snapshot whose head is not the log's atom's, a position that holds
//     another record, is never used.
//   - A mismatch of the snapshot store is never an error of the read: the
//     read goes on from the log. An error is ctx's end or damage of the
//     log itself.
//
// # Caveats
//
// A read that the snapshot store cannot serve reads the log from the
// run's first atom (its positions scanned once per run and kept, since a
// committed atom never moves): a run with a long history and no snapshot
// store pays a scan of the log on its first StateAt.
package history
