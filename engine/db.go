package engine

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/blobs"
	"github.com/continuumdb/continuum/internal/checkpoint"
	"github.com/continuumdb/continuum/internal/dicttrain"
	"github.com/continuumdb/continuum/internal/durable"
	erasing "github.com/continuumdb/continuum/internal/erasure"
	"github.com/continuumdb/continuum/internal/keystore"
	"github.com/continuumdb/continuum/internal/mailbox"
	"github.com/continuumdb/continuum/internal/privfs"
	"github.com/continuumdb/continuum/internal/registry"
	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/internal/runtable"
	"github.com/continuumdb/continuum/internal/snapindex"
	"github.com/continuumdb/continuum/internal/stream"
	"github.com/continuumdb/continuum/internal/wait"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// DB is an open store. It is safe for concurrent use by many goroutines; each
// run has at most one atom running at a time.
type DB struct {
	opts  Options
	fence Fence // the writer's hold on the store, set at Open (fencing.go)
	log   *wal.Log

	storeLoc    // where the store is and how its files are reached
	recordCodec // how records are hashed, signed, sealed and compressed
	openState   // what Open found and started, and the directories' fsyncs
	health      // failures that change what Close and the writes may do

	ledger *ledger.Ledger

	// active tracks log writes between their append and the in-memory update
	// that follows it; an engine checkpoint replays from below the oldest.
	active struct {
		sync.Mutex
		next uint64
		pos  map[uint64]wal.Pos
	}

	// relaxed counts the relaxed-mode ledger records not yet durable and
	// applied; Add happens under the ledger's gate (internal/journal).
	relaxed sync.WaitGroup

	mu struct {
		sync.Mutex
		closed bool
		// runs holds the runs built so far. A restart builds a Run only for
		// the runs its log tail touches; the others stay as rows of the
		// CHECKPOINT's table in lazy until a caller asks for one
		// (runLocked) or for all of them (allRunsLocked). Every access to
		// a run by id goes through runLocked.
		runs runtable.Table[*Run]
		lazy runtable.Rows
		// deleted holds the runs the log deletes (delete.go): never built
		// nor created again.
		deleted retention.Registry
	}

	capabilityState // each capability's one field (hooks.go lists their hooks)

	bg struct {
		snapJobs chan *Run
		ckptReq  chan struct{}
		stop     chan struct{}
		wg       sync.WaitGroup
		replay   wal.Pos   // the last engine checkpoint's replay position; owned by the bg goroutine
		gen      uint64    // engine checkpoint generation; owned by the bg goroutine
		ledgerGn uint64    // generation of the ledger table on disk
		ckptAt   time.Time // when the last engine checkpoint was written; owned by the bg goroutine
		err      atomic.Pointer[error]
	}

	// useTick orders the runs' uses for the frame cache (Run.lastUse);
	// frameBudget is Options.FrameCache (tests change it).
	useTick, frameBudget atomic.Int64

	counters struct {
		atoms, fails, actions, deduped, snapshots, checkpoints atomic.Int64
		framesRebuilt, framesDropped                           atomic.Int64
	}
}

// storeLoc is where a store is and how its files are reached.
type storeLoc struct {
	dir     string
	fs      vfs.FS
	logger  *slog.Logger
	lock    *layout.StoreLock
	storeID [16]byte
	// lastSegName is the segment path segmentFile built last.
	lastSegName atomic.Pointer[segName]
}

// recordCodec is how the store's records are hashed, signed, sealed and
// compressed.
type recordCodec struct {
	hasher *chain.Hasher
	signer *chain.Signer   // nil: checkpoints are written unsigned
	keys   *keystore.Store // nil: a plaintext store (keys.go)
	sealer *record.Sealer  // seals and opens the records' payloads; nil: a plaintext store
	dicts  *frame.Dicts
	comp   *frame.Compressor
	// replayComp is comp with Open's decompression budget, for the log's
	// tail Open replays; nil after Open. Only Open's goroutine reads it.
	replayComp *frame.Compressor
	// curDict is the dictionary new records are compressed with (0 = none).
	curDict atomic.Uint32
}

// openState is what Open found and started.
type openState struct {
	// recovered is closed when Open's recovery ends; recoverErr is set
	// before that.
	recovered  chan struct{}
	recoverErr error

	// dirSync is the fsyncs of the store's directories (startDirSyncs).
	dirSync durable.DirSyncs
	// madeDirs is set by mkdirs when it created a directory, whose entry
	// needs an fsync whatever the clean-close mark says (clean.go).
	// cleanMark is set by Open when it found the mark.
	madeDirs  bool
	cleanMark bool

	// openAppends is the log's append count when Open ended: a Close that
	// finds it unchanged, with nothing replayed, has nothing to checkpoint.
	openAppends int64

	// openGen is the generation of the engine checkpoint Open started
	// from (0 = none); the snapshot store must be at least that recent.
	openGen uint64

	// reg compares CHECKPOINT's runs with the log before a run is created
	// (nil: Open did not start from a CHECKPOINT).
	reg *registry.Check

	openInfo OpenInfo
}

// health is the failures that change what Close and the writes may do.
type health struct {
	// unclean is set by a write or fsync that failed and was only logged:
	// Close then leaves no mark.
	unclean atomic.Bool
	// logErr is the log's first write or sync failure, if any (failLog).
	logErr atomic.Pointer[error]
	// closed mirrors mu.closed for the hot path's check.
	closed atomic.Bool
	// tailBytes counts bytes appended since the last engine checkpoint.
	tailBytes atomic.Int64
}

// capabilityState holds each capability's state, one field each; the
// capability's package owns what is inside.
type capabilityState struct {
	// ledgerTable is the ledger's persisted table, loaded after Open
	// (ledgertable.go; internal/checkpoint).
	ledgerTable *checkpoint.LedgerTable
	// snaps is the snapshot store over its lifecycle (snapstore.go;
	// internal/snapindex); set by Open once its recovery succeeded.
	snaps *snapindex.Keeper
	// msgs is the inbox of messages between runs (messages.go;
	// internal/mailbox).
	msgs mailbox.Box
	// streams is the index of the runs' streams out (streams.go;
	// internal/stream).
	streams *stream.Streams
	// gc is retention's state (gc.go; internal/retention): the lock that
	// serializes deletions, erasures and collections, the queue of
	// collections the bg goroutine runs, and Open's orphan records.
	gc retention.GC
	// dict trains the store's compression dictionary (dict.go;
	// internal/dicttrain).
	dict *dicttrain.Trainer
	// eraser erases runs and memory keys (its queue of erasures is served
	// by the bg goroutine), and seals erasable memory values (erase.go,
	// erasekey.go; internal/erasure).
	eraser *erasing.Eraser
	// blobs is what the engine keeps of blobs: the blobs atoms in flight
	// hold, and sweeps (blobs.go; internal/blobs).
	blobs *blobs.Set
	// waits is the index of the runs' waits and its conduct, bound to
	// the DB by Open, loaded on first use (waits.go, waitcore.go;
	// internal/wait).
	waits wait.Waits
}

const (
	lockFile       = "LOCK"
	storeFileName  = "STORE"
	checkpointName = "CHECKPOINT"
	walDir         = "wal"
	framesDir      = "frames"
	dictsDir       = "dicts"
	snapshotsDir   = "snapshots"
)

// Open opens the store in dir, creating it if dir holds none. opts may be
// nil for defaults. Only one DB may have a store open at a time, in this
// process or any other: a second Open fails with an error matching
// ErrLocked, whatever path names the store (a symlink, a relative path, a
// trailing slash): within a process the store is known by its directory's
// device and inode (on an in-memory FS, by the FS and the cleaned path).
// A store that cannot be written (a read-only LOCK file or mount) fails
// with ErrReadOnly instead, and an empty dir with ErrInvalidOptions.
//
// Open needs little free space: a new store writes its small metadata files
// and a first log segment of wal.MinPrealloc (64 KiB); a reopen
// writes nothing when the newest segment has room, and otherwise that much
// again. Close then needs room for an engine checkpoint (CHECKPOINT, the
// ledger table and the frame files of the runs written since the last one).
//
// Open replays only the log written since the last engine checkpoint; Pebble
// (the snapshot history) and the persisted ledger table load in the
// background, and the first call that needs them waits. A store gets its
// snapshot store on first need (the first snapshot due, a StateAt, a
// background engine checkpoint), not at its creation: until then it has
// none, and Close creates none.
func Open(dir string, opts *Options) (*DB, error) {
	start := time.Now()
	if dir == "" {
		return nil, fmt.Errorf("%w: the store directory is empty; pass the path of a directory (it is created if missing)", ErrInvalidOptions)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	db := &DB{
		opts: o,
		storeLoc: storeLoc{
			dir:    dir,
			fs:     privfs.Confine(o.FS, dir), // files 0600, directories 0700, only the store's own files
			logger: o.Logger.With("store", dir),
		},
		openState:       openState{recovered: make(chan struct{})},
		capabilityState: capabilityState{ledgerTable: checkpoint.NewLedgerTable()},
	}
	db.active.pos = map[uint64]wal.Pos{}
	db.mu.runs = map[string]*Run{}
	db.eraser = newEraser(db)
	db.blobs = newBlobs(db)
	db.waits.Bind(waitCore{db}, o.Clock, &waitErrs)
	db.streams = stream.NewStreams(func() stream.Source { return db.streamLog() }, db.fs, db.path(streamsName), o.NoSync)
	db.frameBudget.Store(o.FrameCache)
	db.bg.ckptAt = start
	if err := db.open(); err != nil {
		db.abandon()
		return nil, advise(err)
	}
	// An erasure a crash interrupted is finished (or undone) before the
	// store serves anything; the stale ones healed if the replay read all.
	err = db.eraser.ResumePending(gcCore{db}, db.bg.stop, db.reg == nil)
	if err == nil {
		err = db.eraser.FinishKeys()
	}
	if err != nil {
		if cerr := db.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, advise(err)
	}
	db.openInfo.Duration = time.Since(start)
	db.observeOpen()
	db.logger.Debug("engine: open", "duration", db.openInfo.Duration, "replayed", db.openInfo.Replayed,
		"torn_bytes", db.openInfo.TornBytes, "interrupted", db.openInfo.Interrupted)
	return db, nil
}

func (db *DB) path(elem ...string) string {
	return db.fs.PathJoin(append([]string{db.dir}, elem...)...)
}

// StoreID returns the store's identity, as recorded in its STORE file.
func (db *DB) StoreID() string { return hex.EncodeToString(db.storeID[:]) }

func (db *DB) checkOpen() error {
	if db.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Run opens the run named id, creating it if it does not exist. The
// creation is durable before Run returns.
func (db *DB) Run(ctx context.Context, id string) (*Run, error) {
	if err := record.CheckRunID(id); err != nil {
		return nil, err
	}
	db.mu.Lock()
	if db.mu.closed {
		db.mu.Unlock()
		return nil, ErrClosed
	}
	if r := db.runLocked(id); r != nil {
		db.mu.Unlock()
		return r, r.waitCreated(ctx)
	}
	if db.registryUnchecked() {
		// Never create a run that the log holds and CHECKPOINT omits.
		db.mu.Unlock()
		if err := db.checkRegistry(); err != nil {
			return nil, err
		}
		return db.Run(ctx, id)
	}
	if db.deletedLocked(id) {
		gone := ErrRunDeleted
		if d, _ := db.mu.deleted.Get(id); d != nil && d.Erasure != nil {
			gone = ErrRunErased
		}
		db.mu.Unlock()
		return nil, fmt.Errorf("%w: run %q: a deleted run's id is not created again", gone, id)
	}
	nonce, err := db.nonceLocked(id)
	if err != nil {
		db.mu.Unlock()
		return nil, err
	}
	r := newRun(db, id, nonce, time.Now())
	db.publishLocked(r)
	db.mu.Unlock()
	return db.create(ctx, r, record.AppendRun(nil, id, nonce, r.createdAt.UnixNano()), fmt.Sprintf("create run %q", id))
}

// Runs lists the runs of the store, sorted by id: those with one of the
// given statuses, or all of them when none is given
// (db.Runs(StatusActive) lists the runs that have not ended).
func (db *DB) Runs(status ...Status) ([]RunInfo, error) {
	db.mu.Lock()
	if db.mu.closed {
		db.mu.Unlock()
		return nil, ErrClosed
	}
	db.allRunsLocked()
	runs := db.mu.runs.Sorted()
	db.mu.Unlock()
	infos := make([]RunInfo, 0, len(runs))
	for _, r := range runs {
		if r.waitCreated(context.Background()) != nil {
			continue
		}
		info := r.Info()
		if len(status) > 0 && !slices.Contains(status, info.Status) {
			continue
		}
		infos = append(infos, info)
	}
	return infos, nil
}

// runList returns every run of the store, sorted by id.
func (db *DB) runList() []*Run {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.allRunsLocked()
	return db.mu.runs.Sorted()
}

// append writes one record durably (or, with NoSync, to the file). Only
// its enqueueing is conditional on ctx: once the record is handed to the
// log, append waits for the outcome whatever ctx does, since the record
// may become durable anyway.
func (db *DB) append(ctx context.Context, rec []byte) (wal.Pos, error) {
	if err := ctx.Err(); err != nil {
		return wal.Pos{}, err
	}
	// wal.Log.Append reads only its ctx's Done, and one without
	// (Background; WithoutCancel would allocate per record) also lets it
	// write an idle log's group itself.
	pos, err := db.log.Append(context.Background(), rec)
	if err == nil {
		// The record is durable only if the directories leading to it are.
		err = db.dirsDurable()
	}
	if err != nil {
		return pos, db.logError(err, "")
	}
	db.noteAppended(len(rec))
	return pos, nil
}

// logError is the error of a write the log refused or failed, after
// where (if not ""): a record or batch too large for the log was refused
// before anything was written (ErrTooLarge: the log is as usable as
// before, the caller's state unchanged); any other failure is final for
// the log (failLog), with what to do about it (advise).
func (db *DB) logError(err error, where string) error {
	if where != "" {
		where += ": "
	}
	if tooLargeForLog(err) {
		return fmt.Errorf("%w: %s%w", ErrTooLarge, where, err)
	}
	err = advise(err)
	db.failLog(err)
	if where == "" {
		return err
	}
	return fmt.Errorf("%s%w", where, err)
}

// failLog records that the log failed a write or sync (I8: final for the
// log). From then on no engine checkpoint is written: the in-memory state
// may hold what the log never made durable.
func (db *DB) failLog(err error) {
	db.logErr.CompareAndSwap(nil, &err)
}

// unchanged reports whether the store is exactly as Open found it: opened
// from an engine checkpoint, nothing replayed past it, nothing written to
// the log since. Close then writes no checkpoint (nor opens Pebble or
// loads the ledger table to write one).
func (db *DB) unchanged() bool {
	return db.openGen != 0 && db.openInfo.Replayed == 0 && db.log.Stats().Appends == db.openAppends
}

// logFailed returns the log's first failure, if any.
func (db *DB) logFailed() error {
	if p := db.logErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (db *DB) noteAppended(n int) {
	if db.tailBytes.Add(int64(n)) >= db.opts.RestartTail && db.opts.RestartTail > 0 {
		select {
		case db.bg.ckptReq <- struct{}{}:
		default:
		}
	}
}

// backgroundErr returns the sticky error of background work, if any.
func (db *DB) backgroundErr() error {
	if p := db.bg.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (db *DB) setBackgroundErr(err error) {
	err = advise(err)
	db.bg.err.CompareAndSwap(nil, &err)
	db.logger.Error("engine: background work failed", "err", err)
}
