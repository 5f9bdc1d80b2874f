package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/privfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// DB is an open store. It is safe for concurrent use by many goroutines; each
// run has at most one atom running at a time.
type DB struct {
	opts    Options
	dir     string
	fs      vfs.FS
	logger  *slog.Logger
	lock    *layout.StoreLock
	storeID [16]byte

	log    *wal.Log
	hasher *chain.Hasher
	signer *chain.Signer // nil: checkpoints are written unsigned
	dicts  *frame.Dicts
	comp   *frame.Compressor

	// curDict is the dictionary new records are compressed with (0 = none).
	curDict atomic.Uint32

	ledger *ledger.Ledger
	// ledgerReady is closed once the persisted ledger table is loaded;
	// ledgerErr is set before that and read only after.
	ledgerReady chan struct{}
	ledgerStart func()    // starts the table's load; nil if there is none
	ledgerOnce  sync.Once // runs ledgerStart once
	ledgerErr   error

	// snapReady is closed once Pebble is open (or failed to open); snap and
	// snapErr are set before that and read only after.
	snapReady chan struct{}
	snap      *snapshot.Store
	snapErr   error
	snapOnce  sync.Once // starts the goroutine that opens Pebble and closes snapReady

	// recovered is closed when Open's recovery ends; recoverErr is set
	// before that.
	recovered  chan struct{}
	recoverErr error

	// dirsSynced is closed when the fsyncs of the store's directories have
	// ended (startDirSyncs); dirsErr is set before that. dirsOnce starts them.
	dirsSynced chan struct{}
	dirsErr    error
	dirsOnce   sync.Once

	// openAppends is the log's append count when Open ended: a Close that
	// finds it unchanged, with nothing replayed, has nothing to checkpoint.
	openAppends int64

	// openGen is the generation of the engine checkpoint Open started
	// from (0 = none); the snapshot store must be at least that recent.
	openGen uint64

	// active tracks log writes between their append and the in-memory update
	// that follows it; an engine checkpoint replays from below the oldest.
	active struct {
		sync.Mutex
		next uint64
		pos  map[uint64]wal.Pos
	}

	// relaxed counts the relaxed-mode ledger records not yet durable and
	// applied; Add happens under the ledger's gate (see journal.write).
	relaxed sync.WaitGroup

	// closed mirrors mu.closed for the hot path's check.
	closed atomic.Bool

	mu struct {
		sync.Mutex
		closed bool
		// runs holds the runs built so far. A restart builds a Run only for
		// the runs its log tail touches; the others stay as rows of the
		// CHECKPOINT's table in lazy (sorted by id) until a caller asks for
		// one (runLocked) or for all of them (allRunsLocked). Every access
		// to a run by id goes through runLocked.
		runs     map[string]*Run
		lazy     []layout.CheckpointRun
		lazyLeft int // rows of lazy not built yet
		// dropped names rows of lazy that the log showed wrong (registry.go):
		// never built from lazy.
		dropped  map[string]bool
		lazyTime time.Time // when Open read them: the runs' clocks start there
	}

	dict struct {
		sync.Mutex
		samples  [][]byte // copies of the first record bodies, for training
		bytes    int
		training bool          // a training goroutine is running or has finished
		done     chan struct{} // closed when training ends; nil if it never started
	}

	// logErr is the log's first write or sync failure, if any (failLog).
	logErr atomic.Pointer[error]

	// tailBytes counts bytes appended since the last engine checkpoint.
	tailBytes atomic.Int64

	bg struct {
		snapJobs chan *Run
		ckptReq  chan struct{}
		stop     chan struct{}
		wg       sync.WaitGroup
		gen      uint64 // engine checkpoint generation; owned by the bg goroutine
		ledgerGn uint64 // generation of the ledger table on disk
		err      atomic.Pointer[error]
	}

	// reg compares CHECKPOINT's runs with the log before a run is created
	// (nil: Open did not start from a CHECKPOINT).
	reg *registryCheck

	openInfo OpenInfo
	counters struct {
		atoms, fails, actions, deduped, snapshots, checkpoints atomic.Int64
		framesRebuilt                                          atomic.Int64
		snapMismatches                                         atomic.Int64 // snapshotMismatch
	}
	// ledgerRebuilt says why the ledger table was rebuilt from the log;
	// set before ledgerReady is closed.
	ledgerRebuilt string
}

// OpenInfo describes what Open found and did.
type OpenInfo struct {
	Duration       time.Duration // wall time of Open
	Created        bool          // the store was created by this Open
	Replayed       int           // log records replayed (the tail since the last engine checkpoint)
	ReplayedBytes  int64
	TornBytes      int64 // bytes of an incomplete record trimmed from the log tail
	Interrupted    int   // runs whose atom was running at the crash
	CheckpointGen  uint64
	LedgerDeferred bool // the persisted ledger table loads after Open, in the background
	// CheckpointIgnored says why CHECKPOINT was not used (damaged, of
	// another store, or disagreeing with the log): Open then replayed the
	// whole log. "" when it was used or there was none.
	CheckpointIgnored string
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
// and a first log segment of wal.MinPrealloc bytes; a reopen writes nothing
// when the newest segment has room, and otherwise that much again. Close
// then needs room for an engine checkpoint (CHECKPOINT, the ledger table
// and the frame files of the runs written since the last one).
//
// Open replays only the log written since the last engine checkpoint; Pebble
// (the snapshot history) and the persisted ledger table load in the
// background, and the first call that needs them waits.
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
		opts:        o,
		dir:         dir,
		fs:          privfs.Confine(o.FS, dir), // files 0600, directories 0700, only the store's own files
		logger:      o.Logger.With("store", dir),
		ledgerReady: make(chan struct{}),
		snapReady:   make(chan struct{}),
		recovered:   make(chan struct{}),
	}
	db.active.pos = map[uint64]wal.Pos{}
	db.mu.runs = map[string]*Run{}
	if err := db.open(); err != nil {
		db.abandon()
		return nil, advise(err)
	}
	db.openInfo.Duration = time.Since(start)
	db.logger.Debug("engine: open", "duration", db.openInfo.Duration, "replayed", db.openInfo.Replayed,
		"torn_bytes", db.openInfo.TornBytes, "interrupted", db.openInfo.Interrupted)
	return db, nil
}

func (db *DB) path(elem ...string) string {
	return db.fs.PathJoin(append([]string{db.dir}, elem...)...)
}

func (db *DB) open() error {
	fs := db.fs
	// Nothing is written into an existing store before it is validated: a
	// refused Open leaves it as it found it. Only the store's directory is
	// created here, for a new store (the lock file lives in it).
	if _, err := fs.Stat(db.dir); layout.NotExist(err) {
		if err := fs.MkdirAll(db.dir, 0o700); err != nil {
			return fmt.Errorf("engine: create directory %s: %w", db.dir, err)
		}
	}
	// The store's identity in this process, then LOCK (seen by
	// storeHolder, for inspect).
	lock, err := layout.LockStore(db.opts.FS, fs, db.dir, db.path(layout.LockName))
	if err != nil {
		return err
	}
	db.lock = lock
	db.dirsSynced = make(chan struct{})

	fresh, err := db.openStoreFile()
	if err != nil {
		return err
	}
	db.hasher, err = chain.NewHasher(db.opts.ChainKey)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if db.opts.SigningKey != nil {
		db.signer, err = chain.NewSigner(chain.OriginName(hex.EncodeToString(db.storeID[:])), db.opts.SigningKey)
		if err != nil {
			return fmt.Errorf("engine: signing key: %w", err)
		}
	}
	db.dicts = frame.NewDicts()
	if err := db.loadDicts(); err != nil {
		return err
	}
	// What Open reads (CHECKPOINT's frames, the log's tail) decompresses
	// within a budget proportional to its bytes (frame.NewBudget): a
	// crafted tail of decompression bombs fails Open instead of costing
	// unbounded time. After Open the engine reads one record at a time,
	// when it needs it, without a budget.
	live := frame.NewCompressor(db.dicts)
	db.comp = live.WithBudget(frame.NewBudget())
	defer func() { db.comp = live }()

	cp, err := db.readCheckpoint()
	if err != nil {
		return err
	}
	if fresh && cp != nil {
		return record.Corruptf(db.path(layout.StoreName), "missing, but %s exists", db.path(layout.CheckpointName))
	}
	if cp != nil && cp.Dict > db.curDict.Load() {
		// The log may hold records compressed with it: log damage.
		return record.Corruptf(db.fs.PathJoin(db.path(layout.DictsDir), layout.DictFileName(cp.Dict)),
			"missing: %s (generation %d) was written after it existed, and the log's records may need it",
			db.path(layout.CheckpointName), cp.Gen)
	}
	if n, err := db.removeLeftovers(cp); err != nil {
		db.logger.Warn("engine: open: leftover files of failed writes could not be removed; they take disk space", "err", err)
	} else if n > 0 {
		db.logger.Info("engine: open: removed leftover files of failed writes", "files", n)
	}
	scanFrom := wal.Pos{}
	if cp != nil {
		scanFrom = cp.Replay
		db.bg.gen = cp.Gen
		db.bg.ledgerGn = cp.LedgerGen
		db.openGen = cp.Gen
		db.openInfo.CheckpointGen = cp.Gen
	}
	if fresh {
		if err := db.mkdirs(); err != nil {
			return err
		}
	}

	// Pebble's own open costs milliseconds of I/O and CPU: it starts on
	// first need or a moment after Open returns (see background), never on
	// the restart path.

	db.log, err = wal.Open(db.path(layout.WALDir), &wal.Options{
		FS:              fs,
		SegmentSize:     db.opts.SegmentSize,
		NoSync:          db.opts.NoSync,
		MinSyncInterval: db.opts.MinSyncInterval,
		ScanFrom:        scanFrom,
		// CHECKPOINT's replay position is below the log's durable end when
		// it is taken (replayFloor), and no checkpoint is written once the
		// log has failed.
		ScanFromDurable: cp != nil,
		// The log writes nothing (no trimmed tail, no new segment) until
		// recovery has found the store sound; a damaged newest segment is
		// read up to the damage so that the refusal names the run and seq.
		DeferWrites: true,
		ReadDamaged: true,
		Logger:      db.logger,
	})
	if err != nil {
		if layout.NotExist(err) && !fresh {
			return record.Corruptf(db.path(layout.WALDir), "missing: the log is gone, but %s says a store was here", db.path(layout.StoreName))
		}
		var ce *wal.CorruptionError
		if errors.As(err, &ce) {
			return &CorruptionError{File: ce.File, Offset: ce.Offset, Reason: ce.Reason, Err: err}
		}
		return fmt.Errorf("engine: open log: %w", err)
	}
	if err := db.checkLogPresent(fresh, cp); err != nil {
		return err
	}
	db.openInfo.TornBytes = db.log.Recovery().TornBytes

	db.ledger = ledger.New()
	err = db.recover(cp, scanFrom)
	if err == nil {
		if dmg := db.log.Recovery().Damage; dmg != nil {
			err = db.logDamage(dmg, db.replayedSeqs())
		}
	}
	if err == nil && !fresh {
		err = db.mkdirs() // frames/ or dicts/ may be missing; both are derived
	}
	if err == nil {
		if err = db.log.StartWriting(); err != nil {
			err = fmt.Errorf("engine: open log: %w", err)
		}
	}
	if err == nil && fresh {
		// STORE is written once the first segment exists (StartWriting
		// made it durable): a store that has STORE has a log, and one
		// that crashed before this point is new (see openStoreFile).
		err = db.writeStoreFile()
	}
	db.recoverErr = err
	close(db.recovered)
	if err != nil {
		return err
	}
	db.openAppends = db.log.Stats().Appends
	if cp != nil && db.openInfo.CheckpointIgnored == "" {
		db.reg = &registryCheck{rows: cp.Runs, to: scanFrom}
	}
	if cp != nil && cp.LedgerGen != 0 && db.openInfo.CheckpointIgnored == "" {
		// Like Pebble, the table loads after the restart: on the first call
		// that needs it, or a moment after Open (see background).
		db.openInfo.LedgerDeferred = true
		gen, at := cp.LedgerGen, scanFrom
		db.ledgerStart = func() { go db.loadLedgerTable(gen, at) }
	} else {
		close(db.ledgerReady)
	}

	db.bg.snapJobs = make(chan *Run, 1024)
	db.bg.ckptReq = make(chan struct{}, 1)
	db.bg.stop = make(chan struct{})
	db.bg.wg.Add(1)
	go db.background()
	return nil
}

// checkLogPresent refuses a store whose log is not whole at its ends: no
// segment at all (STORE says a store was here), a first segment other
// than 1 (nothing is removed from the log), or a log that ends before the
// position CHECKPOINT replays from (segments or records lost after it was
// written). Gaps between segments are refused by the log itself.
func (db *DB) checkLogPresent(fresh bool, cp *layout.Checkpoint) error {
	if fresh {
		return nil
	}
	return db.checkLogComplete(db.log, cp)
}

// checkLogComplete is checkLogPresent for a log l (nil: the log directory
// is missing) of an existing store.
func (db *DB) checkLogComplete(l *wal.Log, cp *layout.Checkpoint) error {
	return layout.CheckLog(db.fs, db.dir, l, cp)
}

// abandon releases what a failed Open acquired.
func (db *DB) abandon() {
	if db.log != nil {
		db.log.Close()
	}
	// Wait for the background Pebble open so that its lock is released too.
	select {
	case <-db.recovered:
	default:
		db.recoverErr = errors.New("engine: open failed")
		close(db.recovered)
	}
	db.closeSnapshots()
	if db.dirsSynced != nil {
		db.settleDirSyncs() // never leave fsyncs running past a failed Open
	}
	if db.lock != nil {
		db.lock.Close()
	}
}

// mkdirs creates the store's directories that are missing. startDirSyncs makes
// their entries durable.
func (db *DB) mkdirs() error {
	for _, d := range db.dirs()[1:] {
		if _, err := db.fs.Stat(d); err == nil {
			continue
		}
		if err := db.fs.MkdirAll(d, 0o700); err != nil {
			if errors.Is(err, syscall.EROFS) {
				return fmt.Errorf("%w: create directory %s: the filesystem is mounted read-only", ErrReadOnly, d)
			}
			return fmt.Errorf("engine: create directory %s: %w", d, layout.UnwrapPathErr(err))
		}
	}
	return nil
}

// dirs lists the directories whose entries recovery relies on: the store's
// parent (the store's own entry), the store, its log, frames and
// dictionaries.
func (db *DB) dirs() []string {
	return []string{db.fs.PathDir(db.dir), db.dir, db.path(layout.WALDir), db.path(layout.FramesDir), db.path(layout.DictsDir)}
}

// startDirSyncs starts, once, an fsync of every directory of dirs, in the
// background, one after the other. Nothing is acknowledged before they
// succeed: append and checkpoint wait for them (dirsDurable), and their
// failure fails the log like a write error.
//
// They run at every Open, not only at the Open that creates the
// directories: a process that met a failed fsync, or died before one, may
// leave entries that exist only in the page cache (the store directory
// itself, STORE, a dictionary, a segment), and the next Open would build on
// them and acknowledge work whose files a power loss then takes away.
//
// They start on the first Begin, append or checkpoint, or a moment after
// Open (with Pebble), never during the restart: five device cache flushes
// beside Open and State cost them 0.3 ms here even in the background.
// An agent's first commit after a restart comes after its Begin and a
// model call, by which time they are done.
func (db *DB) startDirSyncs() {
	db.dirsOnce.Do(func() {
		if db.opts.NoSync {
			close(db.dirsSynced)
			return
		}
		dirs := db.dirs()
		go func() {
			defer close(db.dirsSynced)
			var errs []error
			for _, d := range dirs {
				if err := layout.SyncDir(db.fs, d); err != nil {
					errs = append(errs, err)
				}
			}
			db.dirsErr = errors.Join(errs...)
		}()
	})
}

// settleDirSyncs waits for the directory fsyncs if they started, and
// otherwise makes sure they never start: dirsDurable reports ErrClosed, so
// nothing can be acknowledged any more.
func (db *DB) settleDirSyncs() {
	db.dirsOnce.Do(func() { db.dirsErr = ErrClosed; close(db.dirsSynced) })
	<-db.dirsSynced
}

// dirsDurable starts the directory fsyncs if they have not started, waits
// for them and returns their error.
func (db *DB) dirsDurable() error {
	db.startDirSyncs()
	<-db.dirsSynced
	return db.dirsErr
}

// openStoreFile reads STORE, or decides that the store is new (fresh):
// STORE is missing and so is the log, or the log holds nothing but an
// empty first segment (a creation that crashed before it wrote STORE,
// which is written only once the first segment exists). A new store gets
// its id here; writeStoreFile writes it once the log exists. A store
// without STORE whose log holds records was damaged, not new.
func (db *DB) openStoreFile() (fresh bool, err error) {
	name := db.path(layout.StoreName)
	b, err := layout.ReadFile(db.fs, name)
	if err == nil {
		s, err := layout.ParseStore(name, b)
		if err != nil {
			return false, err
		}
		switch keyed := db.opts.ChainKey != nil; {
		case s.Mode == layout.ChainKeyed && !keyed:
			return false, fmt.Errorf("engine: %s: the store's chain is keyed: open it with its Options.ChainKey", name)
		case s.Mode == layout.ChainUnkeyed && keyed:
			return false, fmt.Errorf("engine: %s: the store's chain is not keyed: open it without Options.ChainKey", name)
		}
		db.storeID = s.ID
		return false, nil
	}
	if !layout.NotExist(err) {
		return false, fmt.Errorf("engine: read %s: %w", name, err)
	}
	if segs, _ := db.fs.List(db.path(layout.WALDir)); len(segs) > 0 {
		empty, err := db.logIsEmpty()
		if err != nil {
			// An I/O error reading the log says nothing of STORE: it is
			// reported as itself, and the next Open decides again.
			return false, fmt.Errorf("engine: %s is missing and its log could not be read: %w", name, err)
		}
		if !empty {
			return false, record.Corruptf(name, "missing, but %s holds a log", db.path(layout.WALDir))
		}
	}
	if _, err := rand.Read(db.storeID[:]); err != nil {
		return false, fmt.Errorf("engine: store id: %w", err)
	}
	db.openInfo.Created = true
	return true, nil
}

// logIsEmpty reports whether the log directory holds no record: at most
// one segment, the first, with nothing after its header.
func (db *DB) logIsEmpty() (bool, error) {
	l, err := wal.Open(db.path(layout.WALDir), &wal.Options{FS: db.fs, ReadOnly: true})
	if err != nil {
		return false, err
	}
	defer l.Close()
	segs := l.Segments()
	return len(segs) == 0 || (len(segs) == 1 && segs[0].ID == 1 && l.End() == segs[0].First), nil
}

// writeStoreFile writes STORE for a new store, once the entries of the
// log directory and of its first segment are durable: a crash may then
// leave a log without STORE (a new store, see openStoreFile), never STORE
// without a log.
func (db *DB) writeStoreFile() error {
	if !db.opts.NoSync {
		for _, d := range []string{db.path(layout.WALDir), db.dir} {
			if err := layout.SyncDir(db.fs, d); err != nil {
				return err
			}
		}
	}
	s := layout.Store{ID: db.storeID, Created: time.Now().UnixNano(), Mode: layout.ChainUnkeyed}
	if db.opts.ChainKey != nil {
		s.Mode = layout.ChainKeyed
	}
	return layout.WriteFileAtomic(db.fs, db.path(layout.StoreName), s.Marshal(), db.opts.NoSync)
}

// StoreID returns the store's identity, as recorded in its STORE file.
func (db *DB) StoreID() string { return hex.EncodeToString(db.storeID[:]) }

// readCheckpoint reads CHECKPOINT. It is derived: a damaged one, or one of
// another store, is set aside (OpenInfo.CheckpointIgnored) and Open
// replays the whole log. Only an I/O error refuses the store.
func (db *DB) readCheckpoint() (*layout.Checkpoint, error) {
	name := db.path(layout.CheckpointName)
	b, err := layout.ReadFile(db.fs, name)
	if layout.NotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("engine: read %s: %w", name, err)
	}
	cp, err := layout.ParseCheckpoint(name, b)
	if err == nil && cp.StoreID != db.storeID {
		err = record.Corruptf(name, "belongs to store %x, not %x", cp.StoreID, db.storeID)
	}
	if err != nil {
		db.ignoreCheckpoint(err.Error())
		db.bg.gen = db.newestLedgerGen()
		return nil, nil
	}
	return cp, nil
}

// newestLedgerGen returns the highest checkpoint generation of a ledger
// table in the store, so that the checkpoints after an ignored CHECKPOINT
// number theirs above every file of an earlier one.
func (db *DB) newestLedgerGen() uint64 {
	names, _ := db.fs.List(db.dir)
	var newest uint64
	for _, n := range names {
		var gen uint64
		if _, err := fmt.Sscanf(n, "ledger-%d.tbl", &gen); err == nil {
			newest = max(newest, gen)
		}
	}
	return newest
}

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
	if db.reg != nil && !db.reg.checked.Load() {
		// Never create a run that the log holds and CHECKPOINT omits.
		db.mu.Unlock()
		if err := db.checkRegistry(); err != nil {
			return nil, err
		}
		return db.Run(ctx, id)
	}
	// Publish the run before its record is durable so that concurrent
	// callers of the same id wait for one creation instead of racing.
	var nonce chain.Nonce
	if _, err := io.ReadFull(db.opts.Nonces, nonce[:]); err != nil {
		db.mu.Unlock()
		return nil, fmt.Errorf("engine: nonce for run %q: %w", id, err)
	}
	r := newRun(db, id, nonce, time.Now())
	r.created = make(chan struct{})
	db.mu.runs[id] = r
	db.mu.Unlock()

	rec := record.AppendRun(nil, id, nonce, r.createdAt.UnixNano())
	tok := db.track()
	_, err := db.append(ctx, rec)
	db.untrack(tok)
	if err != nil {
		r.createErr = fmt.Errorf("engine: create run %q: %w", id, err)
		db.mu.Lock()
		delete(db.mu.runs, id)
		db.mu.Unlock()
	}
	close(r.created)
	return r, r.createErr
}

// Runs lists the runs of the store, sorted by id.
func (db *DB) Runs() ([]RunInfo, error) {
	db.mu.Lock()
	if db.mu.closed {
		db.mu.Unlock()
		return nil, ErrClosed
	}
	db.allRunsLocked()
	runs := make([]*Run, 0, len(db.mu.runs))
	for _, r := range db.mu.runs {
		runs = append(runs, r)
	}
	db.mu.Unlock()
	sort.Slice(runs, func(i, j int) bool { return runs[i].id < runs[j].id })
	infos := make([]RunInfo, 0, len(runs))
	for _, r := range runs {
		if r.waitCreated(context.Background()) != nil {
			continue
		}
		infos = append(infos, r.Info())
	}
	return infos, nil
}

func (db *DB) runList() []*Run {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.allRunsLocked()
	runs := make([]*Run, 0, len(db.mu.runs))
	for _, r := range db.mu.runs {
		runs = append(runs, r)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].id < runs[j].id })
	return runs
}

// track registers a log write about to happen; the engine checkpoint replays
// from below every registered write until untrack. The returned token is
// passed to untrack once the in-memory state reflects the write.
func (db *DB) track() uint64 {
	db.active.Lock()
	defer db.active.Unlock()
	db.active.next++
	db.active.pos[db.active.next] = db.log.End()
	return db.active.next
}

func (db *DB) untrack(tok uint64) {
	db.active.Lock()
	delete(db.active.pos, tok)
	db.active.Unlock()
}

// replayFloor returns a log position such that every record below it is
// reflected in the in-memory state, or belongs to a write whose state the
// caller will capture after waiting for it.
func (db *DB) replayFloor() wal.Pos {
	db.active.Lock()
	defer db.active.Unlock()
	floor := db.log.End()
	for _, p := range db.active.pos {
		if p.Less(floor) {
			floor = p
		}
	}
	return floor
}

// append writes one record durably (or, with NoSync, to the file).
// Cancelling ctx abandons the wait, not the write: only its enqueueing is
// conditional on ctx.
func (db *DB) append(ctx context.Context, rec []byte) (wal.Pos, error) {
	if err := ctx.Err(); err != nil {
		return wal.Pos{}, err
	}
	pos, err := db.log.Append(context.WithoutCancel(ctx), rec)
	if err == nil {
		// The record is durable only if the directories leading to it are.
		err = db.dirsDurable()
	}
	if err != nil {
		if tooLargeForLog(err) {
			// Refused before anything was written: the log is as usable
			// as before, and the caller's state unchanged.
			return pos, fmt.Errorf("%w: %w", ErrTooLarge, err)
		}
		err = advise(err)
		db.failLog(err)
		return pos, err
	}
	db.noteAppended(len(rec))
	return pos, nil
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

// Close writes a final engine checkpoint (so that the next Open replays
// nothing), closes Pebble and the log, and releases the lock. Atoms still
// running are abandoned: they never happened, and their actions stay in the
// ledger. Close is idempotent; it returns the first error of background
// work, if any.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.mu.closed {
		db.mu.Unlock()
		return nil
	}
	db.mu.closed = true
	db.closed.Store(true)
	db.mu.Unlock()

	close(db.bg.stop)
	db.bg.wg.Wait()
	db.dict.Lock()
	training := db.dict.done
	db.dict.Unlock()
	if training != nil {
		<-training
	}

	var errs []error
	if err := db.backgroundErr(); err != nil {
		errs = append(errs, err)
	}
	// The final checkpoint needs the ledger table loaded (it rewrites it).
	// A store opened from a checkpoint with nothing to replay, and written
	// nothing since, is left as it is: its CHECKPOINT is still exact.
	if db.unchanged() {
		db.logger.Debug("engine: close: nothing written since open; CHECKPOINT kept")
	} else if err := db.waitLedger(context.Background()); err != nil {
		errs = append(errs, err)
	} else if err := db.checkpoint(true); err != nil {
		errs = append(errs, err)
	}
	if err := db.closeSnapshots(); err != nil {
		errs = append(errs, fmt.Errorf("engine: close snapshots: %w", err))
	}
	if err := db.log.Close(); err != nil {
		errs = append(errs, fmt.Errorf("engine: close log: %w", err))
	}
	// If the fsyncs started, their error, if any, failed the checkpoint.
	db.settleDirSyncs()
	if err := db.lock.Close(); err != nil {
		errs = append(errs, fmt.Errorf("engine: release lock: %w", err))
	}
	return errors.Join(errs...)
}
