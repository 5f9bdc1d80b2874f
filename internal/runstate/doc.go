// Package runstate builds a run's state after a restart, on its first
// need: its frame file (checked against what CHECKPOINT and the replayed
// log tail say of the run), then the atoms after it found through the atom
// index, then the replayed tail; and, when the frame file cannot be used,
// the run's base frame plus the log (docs/DESIGN.md, "Recovery"). It also
// chooses which idle runs' frames the frame cache drops, and keeps the
// two measures of a run's frame that walk all of it (Sizes). It writes
// nothing and holds no lock: package engine calls it with the run's lock
// held (engine/runstate.go's materializeLocked), handing it a copy of what
// the run knows (Run) and applying what it returns (Built).
//
// # The interface
//
// What the package reads of the store (Core, which is also
// internal/history's Store). Store implements it over the store's files;
// the engine hands it the values once per read (engine/runview.go's
// stateStore: its filesystem and directory, log, snapshot Keeper, sealer,
// compressor, record decoder, frame decoder, journal.Core, logger and a
// counter of frames rebuilt):
//
//	type Core interface {
//		history.Store // ReadAtom, Snapshots, Mismatch, Apply, LogDir, Warn, ...
//		// ReadFrameFile returns the name of run's frame file and its bytes;
//		// an error matching layout.NotExist when there is none.
//		ReadFrameFile(run string) (name string, b []byte, err error)
//		// DecodeFrame decodes (and opens, in an encrypted store) the frame
//		// of a frame file of run at seq; where names it in errors.
//		DecodeFrame(b []byte, run string, seq uint64, where string) (*frame.Frame, error)
//		// ApplyReplayed applies a's delta to f, a an atom replayed at Open
//		// (its segment unknown: errors name the log's directory).
//		ApplyReplayed(f *frame.Frame, a *record.Record) error
//		// Rebuild builds run's frame at seq last from the whole log, from
//		// f, its frame at base; the last atom's head must be head.
//		Rebuild(run string, base uint64, f *frame.Frame, last uint64, head chain.Hash) (*frame.Frame, error)
//		// FrameRebuilt logs and counts that run's frame file was not used.
//		FrameRebuilt(run, why string)
//	}
//
// What the engine calls:
//
//	Store{FS, Dir, Log, Snaps, ...}  // Core over the store's files
//	Materialize(core, run)       // the frame at run.LastSeq (Built), or why not
//	ReadFile(core, run)          // the frame file alone, checked (history's FrameFile)
//	Sweep(runs, budget, visit)     // the frame cache's sweep: Drop over one visit of a run's Frame, under its lock
//	DecodeFrame(comp, sealer, b, run, seq, where) // a stored frame opened and decoded (Core.DecodeFrame's body)
//	var s Sizes                  // held in the run's fields, under its lock:
//	s.Encoded(f, seq); s.Heap(f, seq) // its frame's encoded size and heap, measured once per frame and seq
//	s.NoteEncoded(n, f, seq); s.Drop() // a size a commit computed; the frame dropped
//
// # Guarantees
//
//   - A frame file is used only when it is the run's, at a seq and head
//     the log holds; a frame file past the log's last seq of the run is
//     damage of the log (a *record.CorruptionError), never a reason to
//     rebuild.
//   - Every position the atom index gives is checked against the log; one
//     that disagrees is reported (Core.Mismatch) and the frame is rebuilt
//     from the log instead.
//   - Built.Frame is at Run.LastSeq or Materialize fails.
//
// # Caveats
//
// Rebuilding from the log (a frame file missing or damaged, and no atom
// index to reach it) reads the whole log.
package runstate
