package offline

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/stream"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/wal"
)

// Read-side APIs for tools that look inside a store (continuumctl inspect,
// stats, export): a read-only pass over the log (Scan), a read-only index of
// a store built from one such pass (Inspect), and the decoded content of one
// atom of an open run (Run.Atom). None of the read-only ones takes the
// store's lock or writes anything, so they work beside a running agent and
// on a store that is being investigated; what they see of a log that is
// being appended to is the durable prefix found when they opened it.

// RollbackInfo is a rollback of a run, as its rollback record
// (record.KindRollback) says.
type RollbackInfo struct {
	Seq     uint64    // the atom that completes it (the run's last atom + 1 when it began)
	To      uint64    // the seq it returns the run to
	Started time.Time // when its record was written
	// Undo is what it reaches, newest first: each certified action after
	// To with its compensation, or (Compensation nil) without one: not
	// undone.
	Undo []record.Undo
	// Completed: the atom that completes it is in the log. A pending
	// rollback is finished by the next Rollback of the run.
	Completed bool
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
	// Status is the run's lifecycle state as its end record says:
	// "active" (no end), "completed", "failed" or "cancelled"; Ended and
	// Result say when and with what it ended, and EndHead is the end's
	// link (h(LastSeq+1)).
	Status  string
	Ended   time.Time
	Result  []byte
	EndHead chain.Hash
	// Parent is the run this one was forked from ("": none) and ForkedAt
	// the parent's seq it starts from.
	Parent   string
	ForkedAt uint64
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

	// Rollbacks are the run's rollbacks, as their records say, in log
	// order: completed ones and (Completed false) the pending one.
	Rollbacks []RollbackInfo

	// Waits are the run's waits, as their records say, in log order (the
	// last one the run's current wait unless Taken), and PendingEvents
	// the events sent to it that no wait took, in the order sent
	// (inspect_waits.go).
	Waits         []WaitInfo
	PendingEvents []EventInfo

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
	// Keyring opens the payloads of an encrypted store (the keyring it was
	// written with): required for one, refused for a plaintext store
	// (ErrKeyring).
	Keyring seal.Keyring
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
	holder layout.Holder
	// streamIdx is the log's streams, built on first use (streams.go).
	streamIdx *stream.Index
}

type inspectRun struct {
	sum   RunSummary
	atoms []wal.Pos // atoms[i] is the position of seq base+i+1
	base  uint64    // a fork's fork point (its atoms start after it), else 0
	// failed maps a seq to the position of its latest Fail record: an
	// attempt whose records all come before it ended.
	failed map[uint64]wal.Pos
	// born: its creation record was read; orphan: the damage of its first
	// atom read without one (fine when the log was trimmed by garbage
	// collection and a delete record deletes the run); deleted: a delete
	// record deletes it (it is then not listed).
	born    bool
	orphan  error
	deleted bool
	waits   *inspectWaits // the events no wait took (inspect_waits.go)
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

func inspectOnce(ctx context.Context, dir string, opts *InspectOptions) (*Inspector, error) {
	var o InspectOptions
	if opts != nil {
		o = *opts
	}
	st, err := openReadOnly(dir, o.FS, o.Budget, o.Keyring, false)
	if err != nil {
		return nil, err
	}
	in := &Inspector{st: st, runs: map[string]*inspectRun{}, acts: map[ledger.Fingerprint]*inspectAction{},
		holder: layout.StoreHolder(st.db.fs, st.db.path(layout.LockName))}
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

// trimmed reports whether garbage collection removed records from the
// log: its first segments (the log starts past segment 1;
// checkReadOnlyLog checked that RETENTION explains it), or records of a
// compacted segment.
func (in *Inspector) trimmed() bool {
	if log := in.st.log; log != nil {
		segs := log.Segments()
		return len(segs) > 0 && (segs[0].ID > 1 || log.AnyCompacted())
	}
	return false
}

func (in *Inspector) run(id string) *inspectRun {
	r := in.runs[id]
	if r == nil {
		r = &inspectRun{sum: RunSummary{ID: id, Status: "active"}}
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
	err := in.st.scan(ctx, func(lr *LogRecord, rec *record.Record) error {
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
		switch rec.Kind {
		case record.KindRun:
			r := in.run(rec.Run)
			r.sum.Created, r.born = time.Unix(0, rec.Created), true
		case record.KindDelete, record.KindErase:
			in.run(rec.Run).deleted = true
		case record.KindWait, record.KindEvent, record.KindWake:
			in.noteWait(rec) // inspect_waits.go
		case record.KindRollback:
			r := in.run(rec.Run)
			undo := make([]record.Undo, len(rec.Undo))
			for i, u := range rec.Undo { // rec aliases the cursor's buffer
				undo[i] = u
				if c := u.Compensation; c != nil {
					cc := *c
					cc.Args = bytes.Clone(c.Args)
					undo[i].Compensation = &cc
				}
			}
			r.sum.Rollbacks = append(r.sum.Rollbacks, RollbackInfo{Seq: rec.Seq, To: rec.To, Started: time.Unix(0, rec.Started), Undo: undo})
		case record.KindFork:
			r := in.run(rec.Run)
			r.born = true
			r.sum.Created, r.sum.Parent, r.sum.ForkedAt = time.Unix(0, rec.Created), rec.Parent, rec.Seq
			r.sum.LastSeq, r.base = rec.Seq, rec.Seq
		case record.KindAtom:
			r := in.run(rec.Run)
			if rec.Seq != r.base+uint64(len(r.atoms))+1 {
				err := &CorruptionError{File: in.st.db.segmentFile(lr.Pos.Segment), Offset: lr.Pos.Offset, Run: rec.Run, Seq: rec.Seq,
					Reason: fmt.Sprintf("atom at %v follows seq %d", lr.Pos, r.base+uint64(len(r.atoms)))}
				if r.born || !in.trimmed() {
					return err
				}
				if r.orphan == nil {
					r.orphan = err // its first records were reclaimed
				}
				return nil
			}
			r.atoms = append(r.atoms, lr.Pos)
			in.waitAtom(r, rec.Seq)
			if n := len(r.sum.Rollbacks); n > 0 && r.sum.Rollbacks[n-1].Seq == rec.Seq {
				r.sum.Rollbacks[n-1].Completed = true
			}
			r.sum.Atoms++
			r.sum.LastSeq, r.sum.Head = rec.Seq, rec.Head
			st.Atoms++
		case record.KindEnd:
			r := in.run(rec.Run)
			r.sum.Status = EndStatusName(rec.Status)
			r.sum.Ended, r.sum.Result, r.sum.EndHead = time.Unix(0, rec.Ended), bytes.Clone(rec.Result), rec.Head
		case record.KindFail:
			r := in.run(lr.Run)
			r.sum.Fails++
			if r.failed == nil {
				r.failed = map[uint64]wal.Pos{}
			}
			r.failed[lr.Seq] = lr.Pos
		case record.KindCheckpoint:
			r := in.run(lr.Run)
			if lr.Seq >= r.sum.CheckpointSeq {
				names, _ := chain.SignerNames(rec.Note) // the cursor parsed it
				r.sum.CheckpointSigned = len(names) > 0
			}
			r.sum.CheckpointSeq = max(r.sum.CheckpointSeq, lr.Seq)
		case record.KindIntent:
			i := rec.Intent
			if i == nil {
				break // sealed with an erased run's key: it never opens again
			}
			a := in.action(i.Fingerprint)
			a.intentPos, a.hasIntent, a.run, a.seq = lr.Pos, true, i.RunID, i.Seq
		case record.KindCert:
			c := rec.Cert
			if c == nil {
				break // sealed with an erased run's key
			}
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
	for id, r := range in.runs {
		switch {
		case r.deleted:
			delete(in.runs, id) // deleted by policy: not a run of the store
		case r.orphan != nil:
			return r.orphan
		}
	}
	in.finishWaits()
	for id := range in.runs {
		in.ids = append(in.ids, id)
	}
	sort.Strings(in.ids)
	st.Runs = len(in.ids)
	for k := record.Kind(1); k <= record.MaxKind; k++ {
		if ks := kinds[k.String()]; ks != nil {
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
	if b, err := layout.ReadFile(db.fs, db.path(layout.CheckpointName)); err == nil {
		cp, err := layout.ParseCheckpoint(db.path(layout.CheckpointName), b)
		if err != nil {
			in.warnings = append(in.warnings, fmt.Sprintf("snapshot and frame seqs unknown: %v", err))
		} else {
			for _, c := range cp.Runs {
				if r := in.runs[c.ID]; r != nil {
					r.sum.SnapshotSeq, r.sum.FrameSeq = c.SnapSeq, c.FrameSeq
				}
			}
		}
	} else if !layout.NotExist(err) {
		return fmt.Errorf("engine: read %s: %w", db.path(layout.CheckpointName), err)
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
		// In doubt: an intent after the latest certificate (an attempt of
		// an action retried after a failure is too).
		doubt := a.hasIntent && (!a.hasCert || a.certPos.Less(a.intentPos))
		var info ActionInfo
		if inFlight || doubt {
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
		if doubt {
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
		if layout.NotExist(err) {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("engine: stat %s: %w", path, layout.UnwrapPathErr(err))
		}
		if !fi.IsDir() {
			return fi.Size(), nil
		}
		names, err := fs.List(path)
		if layout.NotExist(err) {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("engine: list %s: %w", path, layout.UnwrapPathErr(err))
		}
		var n int64
		for _, name := range names {
			if layout.IsTempName(name) {
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
		return fmt.Errorf("engine: list %s: %w", dir, layout.UnwrapPathErr(err))
	}
	for _, name := range names {
		if layout.IsTempName(name) {
			continue
		}
		n, err := walk(fs.PathJoin(dir, name))
		if err != nil {
			return err
		}
		if _, err := fs.Stat(fs.PathJoin(dir, name)); layout.NotExist(err) {
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
func (in *Inspector) Holder() layout.Holder { return in.holder }

// Warnings lists the problems Inspect found that did not stop it (a
// damaged CHECKPOINT file hides the snapshot and frame seqs, say), in plain
// words with the file they concern.
func (in *Inspector) Warnings() []string { return append([]string(nil), in.warnings...) }
