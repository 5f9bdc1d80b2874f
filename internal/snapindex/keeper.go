package snapindex

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
)

// MetaCheckpointGen is the snapshot store's metadata key holding the
// generation of the last engine checkpoint it took part in (layout's
// format.go describes it).
const MetaCheckpointGen = "engine/checkpoint-gen"

// LockWait is how long the Keeper waits for the snapshot store's lock when
// another holder has it: a verify --deep of a closed store, which holds it
// for the length of its check.
const LockWait = 5 * time.Second

// ErrIndexing is what Get returns while the snapshot store is being
// re-indexed or rebuilt from the log.
var ErrIndexing = errors.New("engine: the snapshot store is being indexed from the log")

// Host is what the Keeper needs of the engine (see the package's doc).
type Host interface {
	ResetIndexed() map[string]uint64
	Cursor(dec *record.Decoder) (*record.Cursor, error)
	Stopping() <-chan struct{}
	Unclean()
}

// Config is a Keeper's store and settings.
type Config struct {
	FS     vfs.FS
	Dir    string // the store's directory: the snapshot store is layout.SnapshotsDir in it
	NoSync bool
	Logger *slog.Logger
	// MemTableSize is Pebble's memtable size (0: package snapshot's default).
	MemTableSize uint64
	// OnNeed: the store is created on first need (Get), not by Start, and
	// SkipAbsent settles an absent one as closed.
	OnNeed bool
	// CheckpointGen is the generation of the engine checkpoint Open
	// started from (0: none); the store must be at least that recent.
	CheckpointGen uint64
	// Closed is the error Get returns once the Keeper is closed (the
	// engine's ErrClosed); an open that fails with it is not rebuilt.
	Closed error
}

// Keeper is the snapshot store over its lifecycle.
type Keeper struct {
	cfg  Config
	host Host

	// ready is closed once Pebble is open and indexed (or failed to
	// open); snap and err are set before that and read only after.
	ready chan struct{}
	snap  *snapshot.Store
	err   error
	once  sync.Once // starts the goroutine that opens Pebble and closes ready
	// indexing is closed (once, by indexingOnce) when the open must
	// re-index or rebuild the store from the log (Get does not wait).
	indexing     chan struct{}
	indexingOnce sync.Once

	mismatches atomic.Int64 // Mismatch
}

// New returns the Keeper of cfg's store; it opens nothing yet.
func New(cfg Config, h Host) *Keeper {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Keeper{cfg: cfg, host: h, ready: make(chan struct{}), indexing: make(chan struct{})}
}

func (k *Keeper) path(elem ...string) string {
	return k.cfg.FS.PathJoin(append([]string{k.cfg.Dir}, elem...)...)
}

func (k *Keeper) open() {
	defer close(k.ready)
	dir := k.path(layout.SnapshotsDir)
	created := !k.Exists()
	s, err := k.openStore(dir)
	if err == nil {
		if err = k.checkGen(s, created); err != nil {
			s.Close()
		}
	}
	if err != nil && Rebuildable(err, k.cfg.Closed) {
		// Pebble holds only what the log can rebuild: snapshots and the atom
		// index. Keep the damaged directory for inspection, start a fresh
		// one and re-index the log into it. (A rebuilt store is of the
		// checkpoint's generation: reindex records it.)
		k.cfg.Logger.Error("engine: snapshots unreadable; rebuilding them from the log", "dir", dir, "err", err)
		s, err = k.rebuild(dir, err)
	}
	if err != nil {
		k.err = fmt.Errorf("engine: open snapshots: %w", err)
		k.host.Unclean()
		k.cfg.Logger.Error("engine: snapshot store unavailable; snapshots stop and StateAt reads the log until the next Open", "err", err)
		return
	}
	k.snap = s
}

// openStore opens the snapshot store in dir, waiting up to LockWait for
// its lock.
func (k *Keeper) openStore(dir string) (*snapshot.Store, error) {
	deadline := time.Now().Add(LockWait)
	for {
		s, err := snapshot.Open(dir, &snapshot.Options{FS: k.cfg.FS, Logger: k.cfg.Logger, MemTableSize: k.cfg.MemTableSize})
		if err == nil || !layout.LockHeld(err) || time.Now().After(deadline) {
			return s, err
		}
		select {
		case <-k.host.Stopping():
			return nil, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// moveAside renames the snapshot store's directory dir to a
// snapshots.broken-<time> beside it, after removing any older such copy,
// and syncs the store directory.
func (k *Keeper) moveAside(dir string) (string, error) {
	if names, err := k.cfg.FS.List(k.cfg.Dir); err == nil {
		for _, n := range names {
			if strings.HasPrefix(n, layout.SnapshotsDir+".broken-") {
				if err := k.cfg.FS.RemoveAll(k.path(n)); err != nil {
					k.host.Unclean()
					k.cfg.Logger.Warn("engine: remove an old copy of the snapshot store", "dir", k.path(n), "err", err)
				}
			}
		}
	}
	aside := fmt.Sprintf("%s.broken-%d", dir, time.Now().UnixNano())
	if err := k.cfg.FS.Rename(dir, aside); err != nil {
		return "", err
	}
	if !k.cfg.NoSync {
		if err := layout.SyncDir(k.cfg.FS, k.cfg.Dir); err != nil {
			return "", err
		}
	}
	return aside, nil
}

// checkGen re-indexes the log into s if s is older than the engine
// checkpoint Open started from. Every checkpoint that has a usable store
// commits its snapshot batch, synced, before it replaces CHECKPOINT, so an
// older store is one just created (created: the checkpoints so far went
// without one, as a store without snapshots does) or one that lost its
// contents: a crash after a rebuild moved the damaged store aside and
// created a new one, but before the re-index reached it, or a checkpoint
// written while the store was failed.
func (k *Keeper) checkGen(s *snapshot.Store, created bool) error {
	want := k.cfg.CheckpointGen
	if want == 0 {
		return nil // no checkpoint yet: nothing was indexed
	}
	gen, err := k.gen(s)
	if err != nil {
		return err
	}
	if gen >= want {
		return nil
	}
	if created {
		k.cfg.Logger.Info("engine: snapshot store created on first need; indexing the log into it",
			"checkpoint_gen", want)
	} else {
		k.cfg.Logger.Warn("engine: snapshot store is older than CHECKPOINT; re-indexing the log",
			"snapshot_gen", gen, "checkpoint_gen", want)
	}
	k.startIndexing()
	return k.reindex(s)
}

// gen returns the engine checkpoint generation recorded in s (0 if none
// is).
func (k *Keeper) gen(s *snapshot.Store) (uint64, error) {
	v, err := s.Meta(MetaCheckpointGen)
	if errors.Is(err, snapshot.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, record.Corruptf(k.path(layout.SnapshotsDir), "metadata %q holds %d bytes, want 8", MetaCheckpointGen, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// PutGen records in b that it belongs to engine checkpoint gen.
func PutGen(b *snapshot.Batch, gen uint64) error {
	return b.PutMeta(MetaCheckpointGen, binary.BigEndian.AppendUint64(nil, gen))
}

// rebuild moves a Pebble directory that failed to open aside and rebuilds
// the atom index from the log into a new one.
func (k *Keeper) rebuild(dir string, cause error) (*snapshot.Store, error) {
	k.startIndexing()
	aside, err := k.moveAside(dir)
	if err != nil {
		return nil, fmt.Errorf("%w (and moving it aside failed: %v)", cause, err)
	}
	s, err := k.openStore(dir)
	if err != nil {
		return nil, err
	}
	if err := k.reindex(s); err != nil {
		s.Close()
		return nil, err
	}
	k.cfg.Logger.Warn("engine: snapshot store rebuilt from the log", "old", aside)
	return s, nil
}

// reindex writes the log position of every atom the runs had indexed into
// s, from one scan of the whole log. Snapshots come back with the next
// ones.
func (k *Keeper) reindex(s *snapshot.Store) error {
	want := k.host.ResetIndexed() // run -> atoms indexed before the damage
	pos := map[string][]snapshot.Pos{}
	dec := &record.Decoder{Skip: func(k record.Kind, _ []byte) bool { return k != record.KindAtom }}
	c, err := k.host.Cursor(dec)
	if err != nil {
		return err
	}
	defer c.Close()
	for c.Next() {
		a := c.Record()
		if p := pos[a.Run]; a.Seq <= want[a.Run] && a.Seq == uint64(len(p))+1 {
			pos[a.Run] = append(p, a.Pos)
		}
	}
	if err := c.Err(); err != nil {
		return err
	}
	b := s.NewBatch()
	for run, p := range pos {
		if uint64(len(p)) != want[run] {
			return record.Corruptf(k.path(layout.WALDir), "run %q: the log holds %d of its %d indexed atoms", run, len(p), want[run])
		}
		if err := b.PutPositions(run, 1, p); err != nil {
			return err
		}
	}
	if err := PutGen(b, k.cfg.CheckpointGen); err != nil {
		return err
	}
	return b.Commit(!k.cfg.NoSync)
}

// Close closes Pebble if it was opened, waiting for an open in progress,
// and makes sure it is never opened afterwards. A store found damaged is
// moved aside: the next Open builds a new one from the log.
func (k *Keeper) Close() error {
	k.once.Do(func() {
		k.err = k.cfg.Closed
		close(k.ready)
	})
	<-k.ready
	if k.snap == nil {
		return nil
	}
	// Closing a failed store reports nothing (Err did) and returns within
	// snapshot.CloseTimeout.
	err := k.snap.Close()
	if f := k.snap.Err(); errors.Is(f, snapshot.ErrCorrupt) {
		dir := k.path(layout.SnapshotsDir)
		if aside, merr := k.moveAside(dir); merr != nil {
			k.host.Unclean()
			k.cfg.Logger.Warn("engine: could not move the damaged snapshot store aside; the next Open re-checks it", "dir", dir, "err", merr)
		} else {
			k.cfg.Logger.Warn("engine: damaged snapshot store moved aside; the next Open rebuilds it from the log", "old", aside)
		}
	}
	return err
}

// Exists reports whether the store has a snapshot store directory (a Stat
// that fails otherwise than "not there" counts as present: opening it
// then reports the error).
func (k *Keeper) Exists() bool {
	_, err := k.cfg.FS.Stat(k.path(layout.SnapshotsDir))
	return !layout.NotExist(err)
}

// Start starts opening Pebble, once, if the snapshot store exists (or
// always, without Config.OnNeed); one that does not is created on first
// need (Get).
func (k *Keeper) Start() {
	if k.cfg.OnNeed && !k.Exists() {
		return
	}
	k.OpenOnce()
}

// OpenOnce starts opening Pebble (creating the store if it has none),
// once.
func (k *Keeper) OpenOnce() {
	k.once.Do(func() {
		go k.open()
	})
}

// SkipAbsent, called once the engine's background work has stopped,
// settles the snapshot store as closed if nothing has started opening it
// and it does not exist: the final checkpoint then goes without its batch
// instead of creating the store. Unless create, asked only then, says the
// store is worth creating for that checkpoint: then it is opened.
func (k *Keeper) SkipAbsent(create func() bool) {
	if !k.cfg.OnNeed || k.Exists() {
		return
	}
	if create() {
		k.OpenOnce()
		return
	}
	k.once.Do(func() {
		k.err = k.cfg.Closed
		close(k.ready)
	})
}

// startIndexing records that the open in progress re-indexes or rebuilds
// the store: from then on Get stops waiting for it.
func (k *Keeper) startIndexing() {
	k.indexingOnce.Do(func() { close(k.indexing) })
}

// Get waits for Pebble and returns it, opening it first (and creating the
// store if it has none) if nothing has yet. It does not wait for a
// re-index or a rebuild, which scans the whole log and takes every run's
// lock, while its caller may hold one (a fork's first Begin reads its
// parent's state under its own lock): it returns ErrIndexing, and the
// caller reads the log instead, as without a usable store.
func (k *Keeper) Get(ctx context.Context) (*snapshot.Store, error) {
	k.OpenOnce()
	select {
	case <-k.ready:
		return k.snap, k.err
	case <-k.indexing:
		select {
		case <-k.ready:
			return k.snap, k.err
		default:
			return nil, ErrIndexing
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Usable waits for the snapshot store to open and returns it, or nil if
// there is none to use: it failed to open or has failed since. Only ctx's
// end is an error.
func (k *Keeper) Usable(ctx context.Context) (*snapshot.Store, error) {
	s, err := k.Get(ctx)
	if ctxErr := ctx.Err(); ctxErr != nil && err != nil {
		return nil, ctxErr
	}
	if err != nil || s == nil || s.Err() != nil {
		return nil, nil
	}
	return s, nil
}

// Opened returns the store once its open has ended (ok false before):
// the store (nil if none) and why there is none.
func (k *Keeper) Opened() (s *snapshot.Store, ok bool, err error) {
	select {
	case <-k.ready:
		return k.snap, true, k.err
	default:
		return nil, false, nil
	}
}

// Err returns why the snapshot store is not in use, or nil if it is (or
// is still opening, or was closed).
func (k *Keeper) Err() error {
	s, ok, err := k.Opened()
	switch {
	case !ok:
		return nil
	case err != nil:
		if errors.Is(err, k.cfg.Closed) {
			return nil
		}
		return err
	case s != nil:
		return s.Err()
	}
	return nil
}
