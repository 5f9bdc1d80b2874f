package engine

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/privfs"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
)

// Read-side APIs for tools that look inside a store (continuumctl inspect,
// stats, export): a read-only pass over the log (Scan), a read-only index of
// a store built from one such pass (Inspect), and the decoded content of one
// atom of an open run (Run.Atom). None of the read-only ones takes the
// store's lock or writes anything, so they work beside a running agent and
// on a store that is being investigated; what they see of a log that is
// being appended to is the durable prefix found when they opened it.

// LogRecord describes one record of a store's log, as Scan reads it.
type LogRecord struct {
	Pos  wal.Pos
	Kind string // run, intent, certificate, atom, fail, checkpoint, store-head
	Run  string // the run it belongs to ("" for store heads)
	Seq  uint64 // the atom seq it concerns (0 for run records and store heads)
	// Size is the record's length in the log (without the log's framing);
	// RawSize is its length with the compressed part decompressed (equal to
	// Size for the kinds stored raw: run, fail, checkpoint, store-head).
	Size    int
	RawSize int
	// Codec and Dict are the compression of intent, certificate and atom
	// records (Dict 0: no dictionary).
	Codec frame.Codec
	Dict  uint32
	// Record is the record itself. It is valid only during the callback.
	Record []byte
}

// readOnlyStore is the part of a DB that reading a store without opening it
// needs: the filesystem, the paths, the dictionaries and the log.
type readOnlyStore struct {
	db      *DB // fs, dir, dicts and comp only
	log     *wal.Log
	storeID [16]byte
	created time.Time
	// buf is the decompression buffer of scan: a record's decompressed
	// body is valid until the next record.
	buf []byte
}

// openReadOnly opens dir's STORE file, dictionaries and log for reading.
// The log is nil if the store has no wal directory yet.
// Every record it decompresses is charged to budget (nil: frame.NewBudget()).
func openReadOnly(dir string, fs vfs.FS, budget *frame.Budget) (*readOnlyStore, error) {
	if fs == nil {
		fs = vfs.Default
	}
	fs = privfs.Confine(fs, dir) // only the store's own regular files
	if _, err := fs.Stat(dir); err != nil {
		return nil, fmt.Errorf("engine: %s: %w", dir, err)
	}
	storeName := fs.PathJoin(dir, storeFileName)
	b, err := readFile(fs, storeName)
	if notExist(err) {
		return nil, fmt.Errorf("%w: %s has no %s file", ErrNotAStore, dir, storeFileName)
	}
	if err != nil {
		return nil, fmt.Errorf("engine: read %s: %w", storeName, err)
	}
	sf, err := parseStoreFile(storeName, b)
	if err != nil {
		return nil, err
	}
	db := &DB{fs: fs, dir: dir, dicts: frame.NewDicts(), opts: Options{DictSamples: -1}}
	if names, err := fs.List(db.path(dictsDir)); err == nil && len(names) > 0 {
		if err := db.loadDicts(); err != nil {
			return nil, err
		}
	}
	if budget == nil {
		budget = frame.NewBudget()
	}
	db.comp = frame.NewCompressor(db.dicts).WithBudget(budget)
	s := &readOnlyStore{db: db, storeID: sf.id, created: time.Unix(0, sf.created)}
	s.log, err = wal.Open(db.path(walDir), &wal.Options{FS: fs, ReadOnly: true})
	if err != nil && !notExist(err) {
		return nil, fmt.Errorf("engine: open log %s: %w", db.path(walDir), err)
	}
	// A log that is gone or lost records is refused, not read as fewer runs.
	if err := db.checkReadOnlyLog(s.log); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *readOnlyStore) close() error {
	if s.log == nil {
		return nil
	}
	return s.log.Close()
}

// describe fills in what rec is. For intents and certificates it also
// returns the decoded *ledger.Intent or *ledger.Certificate (nil for other
// kinds).
func (s *readOnlyStore) describe(rec []byte, pos wal.Pos, lr *LogRecord) (any, error) {
	*lr = LogRecord{Pos: pos, Size: len(rec), RawSize: len(rec), Record: rec}
	where := func(err error) error {
		return &CorruptionError{File: s.db.path(walDir), Run: lr.Run, Seq: lr.Seq,
			Reason: fmt.Sprintf("%s record at %v: %v", lr.Kind, pos, err)}
	}
	if len(rec) == 0 {
		lr.Kind = "empty"
		return nil, where(errors.New("empty record"))
	}
	lr.Kind = kindName(rec[0])
	var compressed []byte
	switch rec[0] {
	case kindRun:
		r, err := decodeRunRecord(rec)
		if err != nil {
			return nil, where(err)
		}
		lr.Run = r.id
	case kindIntent, kindCert:
		compressed = rec[1:]
	case kindAtom:
		a, err := decodeAtomRecord(rec)
		if err != nil {
			return nil, where(err)
		}
		lr.Run, lr.Seq = a.run, a.seq
		compressed = a.body
	case kindFail:
		f, err := decodeFailRecord(rec)
		if err != nil {
			return nil, where(err)
		}
		lr.Run, lr.Seq = f.run, f.seq
	case kindCheckpoint:
		c, err := chain.ParseCheckpoint(rec[1:])
		if err != nil {
			return nil, where(err)
		}
		lr.Run, lr.Seq = c.RunID, c.Seq
	case kindStoreHead:
		if _, err := chain.ParseStoreHead(rec[1:]); err != nil {
			return nil, where(err)
		}
	default:
		return nil, where(fmt.Errorf("unknown record kind %d", rec[0]))
	}
	if compressed == nil {
		return nil, nil
	}
	codec, dict, err := frame.PeekCodec(compressed)
	if err != nil {
		return nil, where(err)
	}
	lr.Codec, lr.Dict = codec, dict
	raw, err := s.db.comp.Decompress(s.buf[:0], compressed)
	if err != nil {
		return nil, where(err)
	}
	s.buf = raw
	lr.RawSize = len(rec) - len(compressed) + len(raw)
	switch rec[0] {
	case kindIntent:
		in, err := ledger.DecodeIntentView(raw) // raw is s.buf: valid until the next record
		if err != nil {
			return nil, where(err)
		}
		lr.Run, lr.Seq = in.RunID, in.Seq
		return in, nil
	case kindCert:
		c, err := ledger.DecodeCertificateView(raw) // raw is s.buf: valid until the next record
		if err != nil {
			return nil, where(err)
		}
		lr.Run, lr.Seq = c.RunID, c.Seq
		return c, nil
	}
	if _, err := decodeAtomBody(raw); err != nil {
		return nil, where(err)
	}
	return nil, nil
}

// scan reads the whole log in order and calls fn with each record and, for
// intents and certificates, the decoded record (see describe).
func (s *readOnlyStore) scan(ctx context.Context, fn func(lr *LogRecord, decoded any) error) error {
	if s.log == nil {
		return nil
	}
	rd, err := s.log.NewReader(wal.Pos{})
	if err != nil {
		return fmt.Errorf("engine: read log %s: %w", s.db.path(walDir), err)
	}
	defer rd.Close()
	var lr LogRecord
	for n := 0; rd.Next(); n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		dec, err := s.describe(rd.Record(), rd.Pos(), &lr)
		if err != nil {
			return err
		}
		if err := fn(&lr, dec); err != nil {
			return err
		}
	}
	if err := rd.Err(); err != nil {
		return fmt.Errorf("engine: read log %s: %w", s.db.path(walDir), err)
	}
	return nil
}

// Scan reads the log of the store in dir from its first record to its
// last, read-only (it takes no lock, trims no torn tail and writes
// nothing), and calls fn with a description of each record. It stops at
// the first error of fn, which it returns, or at the first record it cannot
// read or decode, with an error that says where (matching ErrCorrupt for a
// damaged record, wal.ErrCorrupt for damaged framing). fs nil means the
// operating system's filesystem.
func Scan(ctx context.Context, dir string, fs vfs.FS, fn func(*LogRecord) error) error {
	// A pass that failed before fn saw a record (the oldest segment was
	// removed under it) starts over; once fn has seen records, it cannot.
	called := false
	var scanErr error
	err := retryVanished(ctx, func() error {
		s, err := openReadOnly(dir, fs, nil)
		if err != nil {
			return err
		}
		defer s.close()
		err = s.scan(ctx, func(lr *LogRecord, _ any) error {
			called = true
			return fn(lr)
		})
		if !called {
			return err
		}
		if notExist(err) {
			err = fmt.Errorf("engine: scan %s: a segment vanished while it was read (the engine removed it below its checkpoint); scan again: %w", dir, err)
		}
		scanErr = err
		return nil
	})
	if err != nil {
		return err
	}
	return scanErr
}

// RunSummary describes one run of a store as Inspect found it.
type RunSummary struct {
	ID      string
	Created time.Time
	// Atoms counts the committed atoms; LastSeq is the last one's seq and
	// Head its chain head. They agree unless the log is damaged.
	Atoms   uint64
	LastSeq uint64
	Head    chain.Hash
	// Fails counts Fail records (failed attempts of a seq).
	Fails int
	// SnapshotSeq, FrameSeq: the latest snapshot in Pebble and the seq of
	// the run's frame file, as of the last engine checkpoint (0: none).
	SnapshotSeq uint64
	FrameSeq    uint64
	// CheckpointSeq is the seq of the run's latest chain checkpoint record,
	// and CheckpointSigned whether it carries a signature. Inspect does not
	// check signatures (it has no public key): verify --pubkey does, and
	// calls a checkpoint whose signature it checked "verified".
	CheckpointSeq    uint64
	CheckpointSigned bool
	// Running and Interrupted name the atom that started actions but
	// neither committed nor failed; at most one is set (0: none). Running:
	// a live process holds the store open (Inspector.Holder) and is running
	// that atom now. Interrupted: no live process holds the store, so a
	// crash stopped the atom (the seq Run.Interrupted reports when the
	// store is opened). An attempt that only reused certified results
	// writes nothing, so it cannot be seen. Inspect sees the lock, not the
	// live process's runs: on a live store, an atom a crash interrupted
	// that the process has not begun again shows as Running too.
	Running     uint64
	Interrupted uint64
	// AtomActions are the actions the Running or Interrupted atom started,
	// in the order of their first record.
	AtomActions []ActionInfo
	// InDoubt lists the run's actions with an intent and no certificate
	// (dispatched, outcome unknown) that no live process is running: on a
	// live store, those of the Running atom are in AtomActions with
	// ActionInfo.Running set instead.
	InDoubt []ActionInfo

	// InFlight is Running or Interrupted, whichever is set.
	//
	// Deprecated: use Running or Interrupted; InFlight will be removed in
	// the release after next.
	InFlight uint64
	// InFlightActions is AtomActions.
	//
	// Deprecated: use AtomActions.
	InFlightActions []ActionInfo
}

// ActionInfo is one action of the ledger: its intent and certificate.
type ActionInfo struct {
	Fingerprint ledger.Fingerprint
	Run         string
	Seq         uint64
	Index       uint32 // ledger.Intent.Index: its place among the atom's default-key Do calls
	Tool        string // "" if the intent was not written (relaxed mode)
	Args        []byte // canonical JSON, redacted
	Key         string
	Idempotent  bool
	// Status is the outcome: StatusIntent (an intent and no certificate:
	// in doubt, or running when Running is set), StatusDone, StatusFailed
	// or StatusResolved. Result and Err come from the latest certificate.
	Status ledger.Status
	// Running: the action has no certificate and belongs to the atom that
	// the live process holding the store is running now, so its exec may
	// be running; it is not in doubt. (An action of that atom left in
	// doubt by an earlier crash, which the agent has not yet settled, looks
	// the same: inspect cannot tell them apart.)
	Running   bool
	Result    []byte
	Err       string
	IntentPos wal.Pos // zero if there is no intent
	CertPos   wal.Pos // zero if there is no certificate
	// ArgsSize and ResultSize are the whole sizes of Args and Result. An
	// Inspector cuts the values it returns to bound its memory (4 KiB each
	// in run summaries, 64 MiB in all per Atom call): a value shorter than
	// its size was cut.
	ArgsSize, ResultSize int
}

// AtomInfo is the decoded content of one committed atom.
type AtomInfo struct {
	Run  string
	Seq  uint64
	Head chain.Hash
	Pos  wal.Pos
	// Size is the atom record's length in the log; RawSize the length of
	// its body decompressed plus the record header.
	Size    int
	RawSize int
	Delta   *frame.Delta
	// Actions are the actions the atom performed, in call order.
	Actions []ActionInfo
}

// KindStats counts the records of one kind.
type KindStats struct {
	Kind     string
	Records  int64
	Bytes    int64 // as stored
	RawBytes int64 // decompressed
}

// DictInfo describes a compression dictionary of the store.
type DictInfo struct {
	ID      uint32
	Size    int
	Records int64 // records compressed with it
}

// StoreStats are sizes and counts of a store, from Inspect's pass.
type StoreStats struct {
	Runs    int
	Atoms   int64
	Records int64
	// LogBytes is the sum of record lengths; RawBytes the same with every
	// compressed part decompressed.
	LogBytes int64
	RawBytes int64
	Kinds    []KindStats // in kind order, kinds present only
	Dicts    []DictInfo  // sorted by id
	// Segments are the log's segment files; SegmentBytes their total size
	// on disk (segments are preallocated, so it exceeds LogBytes).
	Segments     []wal.SegmentInfo
	SegmentBytes int64
	TornBytes    int64 // an incomplete record at the log's tail (not trimmed)
	// Files maps each top-level entry of the store directory (wal, frames,
	// snapshots, dicts, CHECKPOINT, ...) to its size in bytes, directories
	// summed recursively.
	Files      map[string]int64
	TotalBytes int64
}

// InspectOptions configure Inspect.
type InspectOptions struct {
	// FS is the filesystem of the store. Default: the operating system's.
	FS vfs.FS
	// Budget bounds what the Inspector decompresses, in Inspect's pass and
	// in later calls (Atom, StateAt): nil means frame.NewBudget(), 1 GiB
	// plus 256 times the compressed bytes read. Past it, the call fails with
	// an error matching frame.ErrBudget.
	Budget *frame.Budget
}

// Inspector is a read-only index of a store, built by one pass over its
// log. It keeps the log open to read atoms and ledger records on demand.
// Its methods may be called from several goroutines at once; Close must
// come after all of them.
type Inspector struct {
	st    *readOnlyStore
	runs  map[string]*inspectRun
	ids   []string // sorted
	acts  map[ledger.Fingerprint]*inspectAction
	order []ledger.Fingerprint // actions in the order of their first record
	stats StoreStats
	// warnings are problems that did not stop the inspection.
	warnings []string
	// holder is the live process holding the store when Inspect began.
	holder Holder
}

type inspectRun struct {
	sum   RunSummary
	atoms []wal.Pos // atoms[i] is the position of seq i+1
	// failed maps a seq to the position of its latest Fail record: an
	// attempt whose records all come before it ended.
	failed map[uint64]wal.Pos
}

type inspectAction struct {
	fp        ledger.Fingerprint
	intentPos wal.Pos
	certPos   wal.Pos
	hasIntent bool
	hasCert   bool
	run       string
	seq       uint64
}

// Inspect builds an Inspector of the store in dir: one read-only pass over
// its log, plus its CHECKPOINT file. It fails with an error matching
// ErrNotAStore if dir holds no store, and with one that says where if a
// record cannot be read or decoded. Close releases it.
//
// Inspect takes no lock and runs beside a live engine: it reads the log up
// to where it was durable when Inspect opened it, and if a file it listed
// vanished before it read it (the engine rotated its ledger table or
// removed a segment below its checkpoint), it starts over, up to
// readRetries times.
func Inspect(ctx context.Context, dir string, opts *InspectOptions) (*Inspector, error) {
	var in *Inspector
	err := retryVanished(ctx, func() error {
		var err error
		in, err = inspectOnce(ctx, dir, opts)
		return err
	})
	return in, err
}

// readRetries is how often a read-only pass starts over when a file it
// listed vanished under it: a live engine removes a file only after it
// renamed its replacement into place, so a fresh pass finds a consistent
// set of files unless the engine replaced them again meanwhile.
const readRetries = 4

// retryVanished calls pass until it returns something other than an error
// matching os.ErrNotExist, at most readRetries times. A store directory or
// STORE file that is missing is reported at once (ErrNotAStore).
func retryVanished(ctx context.Context, pass func() error) error {
	var err error
	for range readRetries {
		if err = pass(); err == nil || !notExist(err) || errors.Is(err, ErrNotAStore) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// isTempName reports whether a file name is one of the engine's temporary
// files (written, then renamed into place or removed).
func isTempName(name string) bool { return strings.HasSuffix(name, ".tmp") }

func inspectOnce(ctx context.Context, dir string, opts *InspectOptions) (*Inspector, error) {
	var o InspectOptions
	if opts != nil {
		o = *opts
	}
	st, err := openReadOnly(dir, o.FS, o.Budget)
	if err != nil {
		return nil, err
	}
	in := &Inspector{st: st, runs: map[string]*inspectRun{}, acts: map[ledger.Fingerprint]*inspectAction{},
		holder: storeHolder(st.db.fs, st.db.path(lockFile))}
	if err := in.build(ctx); err != nil {
		st.close()
		return nil, err
	}
	return in, nil
}

// Close releases the log. It is idempotent.
func (in *Inspector) Close() error {
	if in.st.log == nil {
		return nil
	}
	err := in.st.log.Close()
	if errors.Is(err, wal.ErrClosed) {
		return nil
	}
	return err
}

// StoreID returns the store's identity (hex), as its STORE file records it.
func (in *Inspector) StoreID() string { return hex.EncodeToString(in.st.storeID[:]) }

// Created returns the store's creation time.
func (in *Inspector) Created() time.Time { return in.st.created }

func (in *Inspector) run(id string) *inspectRun {
	r := in.runs[id]
	if r == nil {
		r = &inspectRun{sum: RunSummary{ID: id}}
		in.runs[id] = r
	}
	return r
}

func (in *Inspector) action(fp ledger.Fingerprint) *inspectAction {
	a := in.acts[fp]
	if a == nil {
		a = &inspectAction{fp: fp}
		in.acts[fp] = a
		in.order = append(in.order, fp)
	}
	return a
}

func (in *Inspector) build(ctx context.Context) error {
	st := &in.stats
	kinds := map[string]*KindStats{}
	dictUse := map[uint32]int64{}
	err := in.st.scan(ctx, func(lr *LogRecord, dec any) error {
		st.Records++
		st.LogBytes += int64(lr.Size)
		st.RawBytes += int64(lr.RawSize)
		k := kinds[lr.Kind]
		if k == nil {
			k = &KindStats{Kind: lr.Kind}
			kinds[lr.Kind] = k
		}
		k.Records++
		k.Bytes += int64(lr.Size)
		k.RawBytes += int64(lr.RawSize)
		if lr.Dict != 0 {
			dictUse[lr.Dict]++
		}
		rec := lr.Record
		switch rec[0] {
		case kindRun:
			r, _ := decodeRunRecord(rec) // describe decoded it already
			in.run(r.id).sum.Created = time.Unix(0, r.created)
		case kindAtom:
			a, _ := decodeAtomRecord(rec)
			r := in.run(a.run)
			if a.seq != uint64(len(r.atoms))+1 {
				return &CorruptionError{File: in.st.db.path(walDir), Run: a.run, Seq: a.seq,
					Reason: fmt.Sprintf("atom at %v follows seq %d", lr.Pos, len(r.atoms))}
			}
			r.atoms = append(r.atoms, lr.Pos)
			r.sum.Atoms++
			r.sum.LastSeq, r.sum.Head = a.seq, a.head
			st.Atoms++
		case kindFail:
			r := in.run(lr.Run)
			r.sum.Fails++
			if r.failed == nil {
				r.failed = map[uint64]wal.Pos{}
			}
			r.failed[lr.Seq] = lr.Pos
		case kindCheckpoint:
			r := in.run(lr.Run)
			if lr.Seq >= r.sum.CheckpointSeq {
				names, _ := chain.SignerNames(rec[1:]) // decodeLogRecord parsed it
				r.sum.CheckpointSigned = len(names) > 0
			}
			r.sum.CheckpointSeq = max(r.sum.CheckpointSeq, lr.Seq)
		case kindIntent:
			i := dec.(*ledger.Intent)
			a := in.action(i.Fingerprint)
			a.intentPos, a.hasIntent, a.run, a.seq = lr.Pos, true, i.RunID, i.Seq
		case kindCert:
			c := dec.(*ledger.Certificate)
			a := in.action(c.Fingerprint)
			a.certPos, a.hasCert = lr.Pos, true
			if !a.hasIntent {
				a.run, a.seq = c.RunID, c.Seq
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for id := range in.runs {
		in.ids = append(in.ids, id)
	}
	sort.Strings(in.ids)
	st.Runs = len(in.ids)
	for k := kindRun; k <= kindStoreHead; k++ {
		if ks := kinds[kindName(k)]; ks != nil {
			st.Kinds = append(st.Kinds, *ks)
		}
	}
	for _, id := range in.st.db.dicts.IDs() {
		d, _ := in.st.db.dicts.Get(id)
		st.Dicts = append(st.Dicts, DictInfo{ID: id, Size: len(d), Records: dictUse[id]})
	}
	sort.Slice(st.Dicts, func(i, j int) bool { return st.Dicts[i].ID < st.Dicts[j].ID })
	if log := in.st.log; log != nil {
		st.Segments = log.Segments()
		for _, s := range st.Segments {
			st.SegmentBytes += s.Size
		}
		st.TornBytes = log.Recovery().TornBytes
	}
	if err := in.sizeFiles(); err != nil {
		return err
	}

	// The restart files: snapshot and frame seqs. The log is what Inspect
	// is about; a damaged CHECKPOINT only hides these two seqs.
	db := in.st.db
	if b, err := readFile(db.fs, db.path(checkpointName)); err == nil {
		cp, err := parseCheckpointFile(db.path(checkpointName), b)
		if err != nil {
			in.warnings = append(in.warnings, fmt.Sprintf("snapshot and frame seqs unknown: %v", err))
		} else {
			for _, c := range cp.runs {
				if r := in.runs[c.id]; r != nil {
					r.sum.SnapshotSeq, r.sum.FrameSeq = c.snapSeq, c.frameSeq
				}
			}
		}
	} else if !notExist(err) {
		return fmt.Errorf("engine: read %s: %w", db.path(checkpointName), err)
	}

	// Actions without a final certificate, and atoms begun but neither
	// committed nor failed. Their values are cut (valueClip): the
	// summaries live as long as the Inspector.
	clip := valueClip{per: summaryValueBytes, left: summaryBytes}
	for _, fp := range in.order {
		a := in.acts[fp]
		r := in.runs[a.run]
		if r == nil {
			continue
		}
		inFlight := a.seq > r.sum.LastSeq
		if f, ok := r.failed[a.seq]; ok && inFlight {
			last := a.intentPos
			if a.hasCert && last.Less(a.certPos) {
				last = a.certPos
			}
			inFlight = f.Less(last) // a record of a later attempt
		}
		var info ActionInfo
		if inFlight || (a.hasIntent && !a.hasCert) {
			var err error
			if info, err = in.actionInfo(fp); err != nil {
				return err
			}
			clip.action(&info)
		}
		if inFlight {
			open := max(r.sum.Running, r.sum.Interrupted, a.seq)
			if in.holder.Live {
				r.sum.Running = open
			} else {
				r.sum.Interrupted = open
			}
			r.sum.AtomActions = append(r.sum.AtomActions, info)
		}
		if a.hasIntent && !a.hasCert {
			r.sum.InDoubt = append(r.sum.InDoubt, info)
		}
	}
	for _, r := range in.runs {
		s := &r.sum
		s.InFlight = max(s.Running, s.Interrupted)
		if s.Running == 0 {
			s.InFlightActions = s.AtomActions
			continue
		}
		// A live process runs this atom: its actions without a
		// certificate are running, not in doubt.
		doubt := s.InDoubt[:0:0]
		for _, a := range s.InDoubt {
			if a.Seq != s.Running {
				doubt = append(doubt, a)
			}
		}
		s.InDoubt = doubt
		for i := range s.AtomActions {
			if a := &s.AtomActions[i]; a.Seq == s.Running && a.Status == ledger.StatusIntent {
				a.Running = true
			}
		}
		s.InFlightActions = s.AtomActions
	}
	return nil
}

// sizeFiles sums the sizes of the store's files by top-level entry. It
// reads beside a live engine: temporary files (.tmp, about to be renamed
// or removed) are not counted, and a file that vanishes between the
// listing and its stat (a rotated ledger table, a removed segment) is
// skipped.
func (in *Inspector) sizeFiles() error {
	fs, dir := in.st.db.fs, in.st.db.dir
	in.stats.Files = map[string]int64{}
	var walk func(path string) (int64, error)
	walk = func(path string) (int64, error) {
		fi, err := fs.Stat(path)
		if notExist(err) {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("engine: stat %s: %w", path, unwrapPathErr(err))
		}
		if !fi.IsDir() {
			return fi.Size(), nil
		}
		names, err := fs.List(path)
		if notExist(err) {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("engine: list %s: %w", path, unwrapPathErr(err))
		}
		var n int64
		for _, name := range names {
			if isTempName(name) {
				continue
			}
			m, err := walk(fs.PathJoin(path, name))
			if err != nil {
				return 0, err
			}
			n += m
		}
		return n, nil
	}
	names, err := fs.List(dir)
	if err != nil {
		return fmt.Errorf("engine: list %s: %w", dir, unwrapPathErr(err))
	}
	for _, name := range names {
		if isTempName(name) {
			continue
		}
		n, err := walk(fs.PathJoin(dir, name))
		if err != nil {
			return err
		}
		if _, err := fs.Stat(fs.PathJoin(dir, name)); notExist(err) {
			continue // vanished: not an entry of the store any more
		}
		in.stats.Files[name] = n
		in.stats.TotalBytes += n
	}
	return nil
}

// Runs returns a summary of every run, sorted by id. The caller owns it.
func (in *Inspector) Runs() []RunSummary {
	out := make([]RunSummary, 0, len(in.ids))
	for _, id := range in.ids {
		out = append(out, in.runs[id].sum)
	}
	return out
}

// Run returns the summary of one run; false if the store has no such run.
func (in *Inspector) Run(id string) (RunSummary, bool) {
	r := in.runs[id]
	if r == nil {
		return RunSummary{}, false
	}
	return r.sum, true
}

// Stats returns the store's sizes and counts.
func (in *Inspector) Stats() StoreStats { return in.stats }

// Holder reports whether a live process held the store open when Inspect
// began, and which (see RunSummary.Running). It asks without taking the
// lock, so inspecting never makes an agent's Open fail. Its limits: a DB of
// this process is always seen; another process is seen only for a store on
// the operating system's filesystem of a Unix system (through the fcntl
// lock on LOCK, which is local to the machine: a process on another
// machine of a network filesystem may not be seen); and a process that
// opens or closes the store while Inspect reads is seen as it was at the
// start.
func (in *Inspector) Holder() Holder { return in.holder }

// Warnings lists the problems Inspect found that did not stop it (a
// damaged CHECKPOINT file hides the snapshot and frame seqs, say), in plain
// words with the file they concern.
func (in *Inspector) Warnings() []string { return append([]string(nil), in.warnings...) }

func (in *Inspector) atomPos(run string, seq uint64) (wal.Pos, error) {
	r := in.runs[run]
	if r == nil {
		return wal.Pos{}, fmt.Errorf("engine: store %s has no run %q", in.st.db.dir, run)
	}
	if seq == 0 || seq > uint64(len(r.atoms)) {
		return wal.Pos{}, fmt.Errorf("%w: run %q seq %d, last seq %d", ErrSeqOutOfRange, run, seq, len(r.atoms))
	}
	return r.atoms[seq-1], nil
}

// Atom returns the decoded content of atom seq of run: its delta and its
// actions with their intents and certificates. The actions' args and
// results hold at most 64 MiB in all; past that they are cut (see
// ActionInfo.ResultSize).
func (in *Inspector) Atom(ctx context.Context, run string, seq uint64) (*AtomInfo, error) {
	pos, err := in.atomPos(run, seq)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	clip := valueClip{left: atomBytes}
	return decodeAtomInfo(in.st.db, in.st.log, pos, run, seq, func(fp ledger.Fingerprint) (ActionInfo, error) {
		info, err := in.actionInfo(fp)
		clip.action(&info)
		return info, err
	})
}

// actionInfo reads the intent and latest certificate of fp.
func (in *Inspector) actionInfo(fp ledger.Fingerprint) (ActionInfo, error) {
	a := in.acts[fp]
	info := ActionInfo{Fingerprint: fp, Status: ledger.StatusNone}
	if a == nil {
		return info, nil
	}
	info.Run, info.Seq = a.run, a.seq
	if a.hasIntent {
		i, err := readLedgerAt(in.st.db, in.st.log, a.intentPos, kindIntent)
		if err != nil {
			return info, err
		}
		fillIntent(&info, i.(*ledger.Intent), a.intentPos)
	}
	if a.hasCert {
		c, err := readLedgerAt(in.st.db, in.st.log, a.certPos, kindCert)
		if err != nil {
			return info, err
		}
		fillCert(&info, c.(*ledger.Certificate), a.certPos)
	}
	return info, nil
}

// StateAt returns the frame of run as of seq, rebuilt by applying the
// run's deltas 1..seq from the log (seq 0: the empty frame). It never reads
// snapshots or frame files: what it returns is what the log says.
func (in *Inspector) StateAt(ctx context.Context, run string, seq uint64) (*frame.Frame, error) {
	f := newFrame()
	if seq == 0 {
		if _, ok := in.runs[run]; !ok {
			return nil, fmt.Errorf("engine: store %s has no run %q", in.st.db.dir, run)
		}
		return f, nil
	}
	if _, err := in.atomPos(run, seq); err != nil {
		return nil, err
	}
	for s, p := range in.runs[run].atoms[:seq] {
		if s%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		a, err := readAtomAt(in.st.db, in.st.log, p, run, uint64(s)+1)
		if err != nil {
			return nil, err
		}
		if err := in.st.db.applyAtomBody(f, run, a.seq, a.body); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// readAtomAt reads the atom record at pos and checks it is seq of run.
func readAtomAt(db *DB, log *wal.Log, pos wal.Pos, run string, seq uint64) (*atomRecord, error) {
	rec, err := log.ReadAt(pos)
	if err != nil {
		return nil, fmt.Errorf("engine: run %q seq %d: %w", run, seq, err)
	}
	a, err := decodeAtomRecord(rec)
	if err != nil || rec[0] != kindAtom || a.run != run || a.seq != seq {
		return nil, &CorruptionError{File: db.path(walDir), Run: run, Seq: seq,
			Reason: fmt.Sprintf("the record at %v is not this atom", pos)}
	}
	return a, nil
}

// readLedgerAt reads and decodes the intent or certificate at pos.
func readLedgerAt(db *DB, log *wal.Log, pos wal.Pos, kind byte) (any, error) {
	rec, err := log.ReadAt(pos)
	if err != nil {
		return nil, fmt.Errorf("engine: read %s at %v: %w", kindName(kind), pos, err)
	}
	if len(rec) == 0 || rec[0] != kind {
		return nil, corruptf(db.path(walDir), "record at %v is not a %s", pos, kindName(kind))
	}
	body, err := db.comp.Decompress(nil, rec[1:])
	if err != nil {
		return nil, corruptf(db.path(walDir), "%s at %v: %v", kindName(kind), pos, err)
	}
	var v any
	if kind == kindIntent {
		v, err = ledger.DecodeIntent(body)
	} else {
		v, err = ledger.DecodeCertificate(body)
	}
	if err != nil {
		return nil, corruptf(db.path(walDir), "%s at %v: %v", kindName(kind), pos, err)
	}
	return v, nil
}

func fillIntent(info *ActionInfo, i *ledger.Intent, pos wal.Pos) {
	info.Run, info.Seq, info.Index = i.RunID, i.Seq, i.Index
	info.Tool, info.Args, info.Key, info.Idempotent = i.Tool, i.Args, i.Key, i.Idempotent
	info.ArgsSize = len(i.Args)
	info.IntentPos = pos
	if info.Status == ledger.StatusNone {
		info.Status = ledger.StatusIntent
	}
}

func fillCert(info *ActionInfo, c *ledger.Certificate, pos wal.Pos) {
	if info.IntentPos == (wal.Pos{}) {
		info.Run, info.Seq, info.Index = c.RunID, c.Seq, c.Index
	}
	info.Status, info.Result, info.Err, info.CertPos = c.Status, c.Result, c.Err, pos
	info.ResultSize = len(c.Result)
}

// decodeAtomInfo reads the atom at pos and decodes its delta and actions,
// asking action for what the ledger knows of each fingerprint.
func decodeAtomInfo(db *DB, log *wal.Log, pos wal.Pos, run string, seq uint64,
	action func(ledger.Fingerprint) (ActionInfo, error)) (*AtomInfo, error) {
	a, err := readAtomAt(db, log, pos, run, seq)
	if err != nil {
		return nil, err
	}
	corrupt := func(err error) error {
		return &CorruptionError{File: db.path(walDir), Run: run, Seq: seq, Reason: fmt.Sprintf("atom at %v: %v", pos, err)}
	}
	raw, err := db.comp.Decompress(nil, a.body)
	if err != nil {
		return nil, corrupt(err)
	}
	body, err := decodeAtomBody(raw)
	if err != nil {
		return nil, corrupt(err)
	}
	d, err := frame.DecodeDelta(body.delta)
	if err != nil {
		return nil, corrupt(err)
	}
	hdr := len(appendAtomHeader(nil, run, seq, a.head))
	info := &AtomInfo{Run: run, Seq: seq, Head: a.head, Pos: pos,
		Size: hdr + len(a.body), RawSize: hdr + len(raw), Delta: d}
	for _, fp := range body.actions {
		ai, err := action(fp)
		if err != nil {
			return nil, err
		}
		info.Actions = append(info.Actions, ai)
	}
	return info, nil
}

// Atom returns the decoded content of committed atom seq of the run: its
// delta and its actions with their intents and certificates, read from the
// log of the open store (the atom's position comes from the atom index, as
// for StateAt).
func (r *Run) Atom(ctx context.Context, seq uint64) (*AtomInfo, error) {
	db := r.db
	if err := db.checkOpen(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	last, indexed := r.mu.lastSeq, r.mu.indexedSeq
	var pos wal.Pos
	inMem := seq > indexed && seq <= last
	if inMem {
		i := seq - indexed - 1
		if i >= uint64(len(r.mu.positions)) {
			r.mu.Unlock()
			return nil, fmt.Errorf("engine: run %q: no log position for seq %d", r.id, seq)
		}
		pos = r.mu.positions[i]
	}
	r.mu.Unlock()
	if seq == 0 || seq > last {
		return nil, fmt.Errorf("%w: run %q seq %d, last seq %d", ErrSeqOutOfRange, r.id, seq, last)
	}
	if !inMem {
		var err error
		if pos, err = r.atomPosition(ctx, seq); err != nil {
			return nil, err
		}
	}
	if err := db.waitLedger(ctx); err != nil {
		return nil, err
	}
	return decodeAtomInfo(db, db.log, pos, r.id, seq, func(fp ledger.Fingerprint) (ActionInfo, error) {
		info := ActionInfo{Fingerprint: fp}
		e, ok := db.ledger.Lookup(fp)
		if !ok {
			return info, nil
		}
		info.Status = e.Status
		if e.IntentLoc != (ledger.Loc{}) {
			i, err := db.readIntent(e.IntentLoc)
			if err != nil {
				return info, err
			}
			fillIntent(&info, i, wal.Pos{Segment: e.IntentLoc.Segment, Offset: e.IntentLoc.Offset})
		}
		if e.CertLoc != (ledger.Loc{}) {
			c, err := db.readCertificate(e.CertLoc)
			if err != nil {
				return info, err
			}
			fillCert(&info, c, wal.Pos{Segment: e.CertLoc.Segment, Offset: e.CertLoc.Offset})
		}
		return info, nil
	})
}
