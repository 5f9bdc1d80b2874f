package runstate

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/checkpoint"
	"github.com/continuumdb/continuum/internal/history"
	jrn "github.com/continuumdb/continuum/internal/journal"
	"github.com/continuumdb/continuum/internal/snapindex"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// Store is Core (and history.Store) over the store's files: its log, its
// snapshot store and its frame files, given as values by the engine
// (engine/runview.go's stateStore). Each field is the engine's own; Store
// only reads them.
//
// A Store serves one call of the engine's (a StateAt, a materialization,
// a frame file read) on one goroutine: the engine makes one per call. Its
// reads of atoms and of the certificates their deltas refer to go through
// one wal.ReadCache, as a replay reads them in log order, near each
// other, and decode with one record.Decoder each.
type Store struct {
	FS     vfs.FS
	Dir    string // the store's directory
	Log    *wal.Log
	Snaps  *snapindex.Keeper
	Sealer *record.Sealer // nil: a plaintext store
	Comp   *frame.Compressor
	// File names a segment of the log for errors; Decoder decodes the
	// log's records (not the ledger's: Rebuild skips them).
	File    func(seg uint64) string
	Decoder *record.Decoder
	// Decode decodes (and opens, in an encrypted store) a stored frame of
	// run at seq; where names it in errors.
	Decode func(b []byte, run string, seq uint64, where string) (*frame.Frame, error)
	// Journal gives an atom delta's certified results
	// (journal.CertifiedResult).
	Journal jrn.Core
	Logger  *slog.Logger
	// Rebuilt counts the frames rebuilt from the log (FrameRebuilt).
	Rebuilt *atomic.Int64
	reads   cachedJournal // the reads of one call
}

// cachedJournal is a journal's Core that reads the log through one
// ReadCache and decodes with one Decoder, made on first use; atoms is the
// one the Store reads atoms with. The Store's reads are one after the
// other (a Decoder is no more than its settings and the buffers of the
// last record it decoded), and a Decoder per read was three allocations
// of a replayed atom's two dozen, one of them of about a kilobyte.
type cachedJournal struct {
	jrn.Core
	log   *wal.Log
	c     wal.ReadCache
	dec   *record.Decoder
	atoms *record.Decoder
}

// journal is the Store's reads of the log, set up on first use.
func (s *Store) journal() *cachedJournal {
	if s.reads.log == nil {
		s.reads.Core, s.reads.log = s.Journal, s.Log
	}
	return &s.reads
}

func (j *cachedJournal) ReadAt(p wal.Pos) ([]byte, error) { return j.log.ReadAtCache(p, &j.c) }

func (j *cachedJournal) Decoder() *record.Decoder {
	if j.dec == nil {
		j.dec = j.Core.Decoder()
	}
	return j.dec
}

var (
	_ Core          = (*Store)(nil)
	_ history.Store = (*Store)(nil)
)

// Snapshots implements history.Store: snapindex.Keeper.Usable.
func (s *Store) Snapshots(ctx context.Context) (*snapshot.Store, error) { return s.Snaps.Usable(ctx) }

// Mismatch implements history.Store: snapindex.Keeper.Mismatch.
func (s *Store) Mismatch(st *snapshot.Store, run string, seq uint64, err error) {
	s.Snaps.Mismatch(st, run, seq, err)
}

// ScanPositions implements history.Store: snapindex.Keeper.ScanPositions.
func (s *Store) ScanPositions(ctx context.Context, run string, base, n uint64) ([]wal.Pos, error) {
	return s.Snaps.ScanPositions(ctx, run, base, n)
}

// ReadAtom implements history.Store: snapindex.ReadAtom.
func (s *Store) ReadAtom(p wal.Pos, run string, seq uint64) (*record.Record, error) {
	j := s.journal()
	if j.atoms == nil {
		j.atoms = snapindex.AtomDecoder(s.Sealer)
	}
	return snapindex.ReadAtomWith(j, j.atoms, s.File, p, run, seq)
}

// Apply implements history.Store: record.ApplyAtom, errors naming a's
// segment.
func (s *Store) Apply(f *frame.Frame, a *record.Record) error { return s.apply(f, a, s.File) }

func (s *Store) apply(f *frame.Frame, a *record.Record, file func(seg uint64) string) error {
	return record.ApplyAtom(s.Comp, f, a, file, func(fp ledger.Fingerprint) ([]byte, error) { return jrn.CertifiedResult(s.journal(), fp) })
}

// LogDir implements history.Store.
func (s *Store) LogDir() string { return s.FS.PathJoin(s.Dir, layout.WALDir) }

// Warn implements history.Store.
func (s *Store) Warn(msg string, args ...any) {
	s.Logger.Log(context.Background(), slog.LevelWarn, msg, args...)
}

// SnapshotFrame implements history.Store. A plain snapshot (the raw
// encoding, reassembled from the store's chunks, whose hashes the store
// checked) is decoded in place, without a copy; an opaque one is
// decompressed (and opened, in an encrypted store) as a frame file's is.
// A plain snapshot in an encrypted store, or one over
// frame.MaxDecompressedSize (what no frame file's frame may decompress
// to), is damage.
func (s *Store) SnapshotFrame(snap *snapshot.Snapshot, run string, seq uint64) (*frame.Frame, error) {
	where := "snapshot of run " + run
	if !snap.Plain {
		return s.Decode(snap.Frame, run, seq, where)
	}
	if s.Sealer != nil {
		return nil, record.Corruptf(where, "frame: stored in the clear in an encrypted store")
	}
	if len(snap.Frame) > frame.MaxDecompressedSize {
		return nil, record.Corruptf(where, "frame: %d bytes, over the %d-byte limit", len(snap.Frame), frame.MaxDecompressedSize)
	}
	return layout.DecodeRawFrame(snap.Frame, where) // the store's buffer, ours alone
}

func (s *Store) frameFileName(run string) string {
	return s.FS.PathJoin(s.Dir, layout.FramesDir, layout.FrameFileBase(run))
}

// ReadFrameFile implements Core.
func (s *Store) ReadFrameFile(run string) (string, []byte, error) {
	name := s.frameFileName(run)
	b, err := layout.ReadFile(s.FS, name)
	return name, b, err
}

// DecodeFrame implements Core.
func (s *Store) DecodeFrame(b []byte, run string, seq uint64, where string) (*frame.Frame, error) {
	return s.Decode(b, run, seq, where)
}

// ApplyReplayed implements Core: its errors name the log's directory, as
// an atom replayed at Open keeps its body alone, not its segment.
func (s *Store) ApplyReplayed(f *frame.Frame, a *record.Record) error {
	return s.apply(f, a, func(uint64) string { return s.LogDir() })
}

// Rebuild implements Core over checkpoint.ReplayRun. It reads the whole
// log.
func (s *Store) Rebuild(run string, base uint64, f *frame.Frame, last uint64, head chain.Hash) (*frame.Frame, error) {
	dec := *s.Decoder
	dec.Skip = func(k record.Kind, id []byte) bool { return k != record.KindAtom || string(id) != run }
	c, err := record.NewCursor(s.Log, s.File, wal.Pos{}, &dec)
	if err != nil {
		return nil, fmt.Errorf("engine: rebuild frame of run %q: %w", run, err)
	}
	defer c.Close()
	err = checkpoint.ReplayRun(c, run, base, last, head, s.LogDir(), s.File,
		func(a *record.Record) error { return s.apply(f, a, s.File) })
	if err != nil {
		return nil, err
	}
	return f, nil // with no atom after base (a fork with none of its own), f is the frame
}

// FrameRebuilt implements Core: counted in Rebuilt and logged.
func (s *Store) FrameRebuilt(run, why string) {
	s.Rebuilt.Add(1)
	s.Logger.Warn("engine: frame file not used; rebuilding the run's frame from the log",
		"run", run, "file", s.frameFileName(run), "reason", why)
}
