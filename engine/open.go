package engine

// Open's path: the directories, STORE, the log, CHECKPOINT and the
// directory fsyncs of a new store, and what a failed Open releases.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/registry"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

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
	db.dirSync.Init()

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
	// The budget is replay's own compressor (replayComp): db.comp, which
	// the background goroutines started below read, is never reassigned.
	db.comp = frame.NewCompressor(db.dicts)
	db.replayComp = db.comp.WithBudget(frame.NewBudget())
	defer func() { db.replayComp = nil }()

	cp, err := db.readCheckpoint()
	if err != nil {
		return err
	}
	if fresh && cp != nil {
		return record.Corruptf(db.path(layout.StoreName), "missing, but %s exists", db.path(layout.CheckpointName))
	}
	if err := db.dict.CheckNewest(cp, db.path(layout.CheckpointName)); err != nil {
		return err // a dictionary the log's records may need is missing
	}
	// After a clean Close there are no leftovers to look for (clean.go):
	// three directory listings fewer on the restart path, one of frames/,
	// which holds a file per run.
	db.cleanMark = db.hasCleanMark()
	if !db.cleanMark {
		if n, err := db.removeLeftovers(cp); err != nil {
			db.unclean.Store(true) // the next Open must look for them again
			db.logger.Warn("engine: open: leftover files of failed writes could not be removed; they take disk space", "err", err)
		} else if n > 0 {
			db.logger.Info("engine: open: removed leftover files of failed writes", "files", n)
		}
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
		FS:                 fs,
		SegmentSize:        db.opts.SegmentSize,
		InitialSegmentSize: walInitialSegment,
		NoSync:             db.opts.NoSync,
		MinSyncInterval:    db.opts.MinSyncInterval,
		ScanFrom:           scanFrom,
		// CHECKPOINT's replay position is below the log's durable end when
		// it is taken (replayFloor), and no checkpoint is written once the
		// log has failed.
		ScanFromDurable: cp != nil,
		// A clean Close left every file of the log durable (clean.go): the
		// newest segment is resumed with no fdatasync or directory fsync.
		AtRest: db.cleanMark,
		// The log writes nothing (no trimmed tail, no new segment) until
		// recovery has found the store sound; a damaged newest segment is
		// read up to the damage so that the refusal names the run and seq.
		DeferWrites: true,
		ReadDamaged: true,
		Logger:      db.logger,

		OnGroupCommit: db.groupCommitHook(), // to Options.Observer
		Replicate:     db.replicateHook(),   // to Options.Replicator
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
	if err == nil && db.keys != nil {
		err = db.checkRunKeys() // keys.go
	}
	if err == nil {
		if dmg := db.log.Recovery().Damage; dmg != nil {
			err = record.LogDamage(db.log, dmg, db.replayedSeqs())
		}
	}
	if err == nil && !fresh {
		err = db.mkdirs() // frames/ or dicts/ may be missing; both are derived
	}
	if err == nil && !fresh {
		err = db.takeCleanMark() // clean.go: before the first write
	}
	if err == nil {
		if err = db.log.StartWriting(); err != nil {
			err = fmt.Errorf("engine: open log: %w", err)
		}
	}
	if err == nil && fresh && db.opts.Keyring != nil {
		// KEYS before STORE: a store whose STORE says it is encrypted has
		// its key table (keys.go).
		err = db.createKeys()
	}
	if err == nil && fresh {
		// STORE is written once the first segment exists (StartWriting
		// made it durable): a store that has STORE has a log, and one
		// that crashed before this point is new (see openStoreFile).
		err = db.writeStoreFile()
	}
	if err == nil {
		err = db.replicateOpen() // replicator.go
	}
	if err == nil {
		db.fence = db.openFence()
	}
	db.recoverErr = err
	close(db.recovered)
	if err != nil {
		return err
	}
	db.openAppends = db.log.Stats().Appends
	db.startSnapIndex()
	if cp != nil && db.openInfo.CheckpointIgnored == "" {
		db.reg = registry.NewCheck(cp.Runs, scanFrom)
	}
	if cp != nil && cp.LedgerGen != 0 && db.openInfo.CheckpointIgnored == "" {
		// Like Pebble, the table loads after the restart: on the first call
		// that needs it, or a moment after Open (see background).
		db.openInfo.LedgerDeferred = true
		db.deferLedgerTable(cp.LedgerGen, scanFrom)
	} else {
		db.ledgerTable.None()
	}

	db.bg.snapJobs = make(chan *Run, 1024)
	db.bg.ckptReq = make(chan struct{}, 1)
	db.gc.Start(db.gcEnv())
	db.bg.stop = make(chan struct{})
	db.bg.wg.Add(1)
	go db.background()
	return nil
}

// walInitialSegment is passed to the log as wal.Options.InitialSegmentSize:
// 0 (wal.MinPrealloc), except in the benchmark that measures the earlier
// 1 MiB first segment beside it (BenchmarkNewStore).
var walInitialSegment int64

// checkLogPresent refuses a store whose log is not whole at its ends: no
// segment at all (STORE says a store was here), a first segment other
// than 1 that RETENTION does not explain (garbage collection removes
// only segments below its floor, after writing it), or a log that ends before the
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
	ret, err := layout.ReadRetention(db.fs, db.dir, &db.storeID)
	if err != nil {
		return err
	}
	return layout.CheckLog(db.fs, db.dir, l, cp, ret)
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
	if db.dirSync.Ready() {
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
		db.madeDirs = true
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
// background (durable.DirSyncs): append and checkpoint wait for them
// (dirsDurable), and their failure fails the log like a write error. An
// Open after a clean Close needs none of them: the clean-close mark
// (clean.go) says every entry is durable already.
//
// They start on the first Begin, append or checkpoint, or a moment after
// Open (with Pebble), never during the restart: five device cache flushes
// beside Open and State cost them 0.3 ms here even in the background.
// An agent's first commit after a restart comes after its Begin and a
// model call, by which time they are done.
func (db *DB) startDirSyncs() { db.dirSync.Start(db.fs, db.opts.NoSync, db.dirs) }

// settleDirSyncs waits for the directory fsyncs if they started, and
// otherwise makes sure they never start: dirsDurable reports ErrClosed, so
// nothing can be acknowledged any more.
func (db *DB) settleDirSyncs() { db.dirSync.Settle(ErrClosed) }

// dirsDurable starts the directory fsyncs if they have not started, waits
// for them and returns their error.
func (db *DB) dirsDurable() error {
	db.startDirSyncs()
	return db.dirSync.Wait()
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
		switch ring := db.opts.Keyring != nil; {
		case s.Sealed() && !ring:
			return false, fmt.Errorf("%w: %s: the store is encrypted: open it with its Options.Keyring", ErrKeyring, name)
		case !s.Sealed() && ring:
			return false, fmt.Errorf("%w: %s: the store is not encrypted (a plaintext store stays plaintext): open it without Options.Keyring", ErrKeyring, name)
		case s.Sealed():
			return false, db.openKeys() // keys.go
		}
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
// without a log. The segment's entry is durable already: the log's
// StartWriting syncs its directory after it names a segment, or resumes
// an empty one. The log directory's entry is made durable here.
func (db *DB) writeStoreFile() error {
	if !db.opts.NoSync {
		if err := layout.SyncDir(db.fs, db.dir); err != nil {
			return err
		}
	}
	s := layout.Store{ID: db.storeID, Created: time.Now().UnixNano(), Mode: layout.ChainUnkeyed}
	if db.opts.ChainKey != nil {
		s.Mode = layout.ChainKeyed
	}
	if db.keys != nil {
		s.Mode |= layout.ChainSealed
	}
	return layout.WriteFileAtomic(db.fs, db.path(layout.StoreName), s.Marshal(), db.opts.NoSync)
}

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
		if gen, ok := layout.ParseLedgerTableName(n); ok {
			newest = max(newest, gen)
		}
	}
	return newest
}
