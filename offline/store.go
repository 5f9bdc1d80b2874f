package offline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/privfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/wal"
)

// Sentinel errors of the offline tools. The engine returns the same
// values (engine.ErrNotAStore, engine.ErrSeqOutOfRange).
var (
	// ErrNotAStore is returned by the read-only tools pointed at a
	// directory that holds no store.
	ErrNotAStore = errors.New("continuum: not a CONTINUUM store")
	// ErrSeqOutOfRange is returned for a seq beyond a run's last.
	ErrSeqOutOfRange = errors.New("continuum: seq out of range")
	// ErrKeyring: the store and the keyring given do not match (an
	// encrypted store read without one, a plaintext store with one).
	ErrKeyring = errors.New("continuum: keyring")
)

// CorruptionError is record.CorruptionError: every damage the tools report.
type CorruptionError = record.CorruptionError

// store is what the tools read of a store's directory besides its log:
// its files, its dictionaries and a compressor with a budget. It is never
// written.
type store struct {
	fs         vfs.FS
	dir        string
	dicts      *frame.Dicts
	comp       *frame.Compressor
	newestDict uint32 // the newest dictionary, once loadDicts ran
	// sealed: the store is encrypted (STORE's ChainSealed); sealer opens
	// its payloads, nil without the keyring (keys.go).
	sealed bool
	sealer *record.Sealer
	// keys is KEYS's table of an encrypted store, read with or without
	// the keyring (nil if it is missing or damaged).
	keys *seal.Table
	// lastSeg caches segmentFile's last answer: verify and scan name the
	// segment of every atom they decode.
	lastSeg atomic.Pointer[segName]
}

type segName struct {
	seg  uint64
	name string
}

func (db *store) path(elem ...string) string {
	return db.fs.PathJoin(append([]string{db.dir}, elem...)...)
}

// segmentFile is the path of a log segment.
func (db *store) segmentFile(seg uint64) string {
	if n := db.lastSeg.Load(); n != nil && n.seg == seg {
		return n.name
	}
	n := &segName{seg: seg, name: db.fs.PathJoin(db.path(layout.WALDir), wal.SegmentName(seg))}
	db.lastSeg.Store(n)
	return n.name
}

func (db *store) frameFileName(run string) string {
	return db.fs.PathJoin(db.path(layout.FramesDir), layout.FrameFileBase(run))
}

func (db *store) ledgerTableName(gen uint64) string { return db.path(layout.LedgerTableName(gen)) }

func (db *store) loadDicts() error {
	newest, err := layout.LoadDicts(db.fs, db.dir, db.dicts)
	db.newestDict = newest
	return err
}

// decoder returns a decoder of the log's records; ledgerRecords asks for
// intents and certificates decoded.
func (db *store) decoder(ledgerRecords bool) *record.Decoder {
	return &record.Decoder{Comp: db.comp, Ledger: ledgerRecords, Dicts: db.dicts, DictFile: db.dictFile, LoadDict: db.loadDict,
		Sealed: db.sealed, Sealer: db.sealer}
}

// atomDecoder returns a decoder of the bodies of atoms that a cursor over
// a decoder of db's read: reading an atom record, that decoder charged
// its compressed body to the budget (record.Decoder charges the size the
// body claims), so decompressing the body here charges nothing again.
// (Charged twice, a store's atoms used the budget's base twice as fast.)
func (db *store) atomDecoder() *record.Decoder {
	d := db.decoder(false)
	d.Comp = db.comp.WithBudget(nil)
	return d
}

func (db *store) dictFile(id uint32) string {
	return db.fs.PathJoin(db.path(layout.DictsDir), layout.DictFileName(id))
}

// loadDict loads dictionary id, which a live engine trained after the
// store's dictionaries were loaded, when a record needs it.
func (db *store) loadDict(id uint32) error {
	name := db.dictFile(id)
	b, err := layout.ReadFile(db.fs, name)
	if err != nil {
		return err
	}
	got, dict, err := layout.ParseDict(name, b)
	if err != nil {
		return err
	}
	if got != id {
		return record.Corruptf(name, "holds dictionary %d under another name", got)
	}
	return db.dicts.Add(id, dict)
}

// In an encrypted store the frame is sealed (record.PlaceFrame), for run
// at seq; without the keyring it cannot be read.
func (db *store) decodeFrame(compressed []byte, run string, seq uint64, where string) (*frame.Frame, error) {
	if db.sealed {
		if db.sealer == nil {
			return nil, record.Corruptf(where, "frame: sealed, and no keyring was given")
		}
		var err error
		if compressed, err = db.sealer.OpenFrame(compressed, run, seq); err != nil {
			return nil, record.Corruptf(where, "frame: %v", err)
		}
	}
	return layout.DecodeFrame(db.comp, compressed, where)
}

// applyAtomBody applies the delta of atom record a to f, resolving the
// certified results it refers to with results (record.ApplyAtom).
func (db *store) applyAtomBody(f *frame.Frame, a *record.Record, results record.Results) error {
	return record.ApplyAtom(db.comp, f, a, db.segmentFile, results)
}

// certifiedResult reads the certificate of action fp at pos in log, as an
// index of the tools located it, and returns its result: the certified
// result an atom's delta refers to. A certificate that is not fp's, or
// that certifies no result (a failed action), is no certificate of it
// (record.ErrNoCertificate).
func (db *store) certifiedResult(log *wal.Log, pos wal.Pos, fp ledger.Fingerprint) ([]byte, error) {
	r, err := readAt(db.decoder(true), log, db.segmentFile(pos.Segment), pos, record.KindCert)
	if err != nil {
		return nil, err
	}
	switch c := r.Cert; {
	case c.Fingerprint != fp:
		return nil, &CorruptionError{File: db.segmentFile(pos.Segment), Offset: pos.Offset, Run: c.RunID, Seq: c.Seq,
			Reason: fmt.Sprintf("the certificate located for action %x certifies action %x", fp[:8], c.Fingerprint[:8])}
	case c.Status != ledger.StatusDone && c.Status != ledger.StatusResolved:
		return nil, fmt.Errorf("%w: action %x is %s", record.ErrNoCertificate, fp[:8], c.Status)
	default:
		return c.Result, nil
	}
}

// logWitness reads CHECKPOINT, the witness of where the log reached, for
// checkReadOnlyLog: before the log is opened, so that beside a live
// writer a checkpoint written since cannot name a position past the log
// as the reader found it (a checkpoint's replay position is durable in
// the log before the checkpoint is written). Nil when there is none, or
// it is damaged.
func (db *store) logWitness() *layout.Checkpoint {
	b, err := layout.ReadFile(db.fs, db.path(layout.CheckpointName))
	if err != nil {
		return nil
	}
	cp, _ := layout.ParseCheckpoint(db.path(layout.CheckpointName), b) // damaged: no witness
	return cp
}

// checkReadOnlyLog refuses a log that is gone or lost records (as Open
// does), with cp (logWitness, read before the log was opened) as the
// witness of where the log reached.
func (db *store) checkReadOnlyLog(l *wal.Log, cp *layout.Checkpoint) error {
	ret, err := layout.ReadRetention(db.fs, db.dir, nil)
	if err != nil {
		return err
	}
	return layout.CheckLog(db.fs, db.dir, l, cp, ret)
}

// logDamage returns err, an error of the log, as a *CorruptionError when it
// is damage (a *wal.CorruptionError, which it wraps), so that every damage
// the tools report matches record.ErrCorrupt, the one corruption error of
// the public API; what says where (file, offset) and why is kept. Other
// errors are wrapped with what was being done.
func logDamage(err error, doing string) error {
	var ce *wal.CorruptionError
	if errors.As(err, &ce) {
		return &CorruptionError{File: ce.File, Offset: ce.Offset, Reason: ce.Reason, Err: err}
	}
	return fmt.Errorf("engine: %s: %w", doing, err)
}

// openValue opens sealed, the sealed value of erasable memory key key (a
// set_sealed op's, or a frame's Sealed entry), with s, the store's sealer
// (record.Sealer.OpenValue). erased reports a value whose data key was
// erased (seal.ErrErased: the key was erased, DB.EraseKey), which can never
// be opened: it is no damage. Any other failure is damage (the value was
// changed, or moved to another key; or a plaintext store, s nil, holds a
// sealed value), returned for the caller to say where the value is. The
// value is the caller's; an empty value is empty, never nil.
//
// Every offline reader opens sealed values here, so they agree on what an
// erased value is.
func openValue(s *record.Sealer, key string, sealed []byte) (value []byte, erased bool, err error) {
	if s == nil {
		return nil, false, errors.New("a sealed memory value in a plaintext store")
	}
	v, err := s.OpenValue(nil, sealed, key)
	switch {
	case errors.Is(err, seal.ErrErased):
		return nil, true, nil
	case err != nil:
		return nil, false, err
	}
	if v == nil {
		v = []byte{}
	}
	return v, false, nil
}

// sealedDamage says why the sealed value of memory key key is damage, err
// being openValue's error.
func sealedDamage(key string, err error) string {
	if errors.Is(err, seal.ErrAuth) {
		return fmt.Sprintf("the sealed value of memory key %q does not open (it was changed, or moved from another key): %v", key, err)
	}
	return fmt.Sprintf("the sealed value of memory key %q does not open: %v", key, err)
}

// OpenFrame returns f with its sealed memory values opened into Memory
// (openValue, frame.Frame.Unseal), and the memory keys whose values were
// erased, sorted: they are absent from the frame, as the engine's State
// has them. It returns f itself when f holds no sealed value. A value that
// does not open otherwise is damage: damage(key, err) returns the error
// that says where it is. The engine's State opens frames with it too.
func OpenFrame(s *record.Sealer, f *frame.Frame, damage func(key string, err error) error) (*frame.Frame, []string, error) {
	if f == nil || len(f.Sealed) == 0 {
		return f, nil, nil
	}
	var erased []string
	open, err := f.Unseal(func(key string, sealed []byte) ([]byte, bool, error) {
		v, gone, err := openValue(s, key, sealed)
		switch {
		case err != nil:
			return nil, false, damage(key, err)
		case gone:
			erased = append(erased, key)
			return nil, false, nil
		}
		return v, true, nil
	})
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(erased)
	return open, erased, nil
}

func newFrame() *frame.Frame { return &frame.Frame{Memory: map[string][]byte{}} }

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
		if err = pass(); err == nil || !moved(err) || errors.Is(err, ErrNotAStore) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// moved reports whether err says a file the pass read vanished or was
// replaced under it (a live engine renames a new version into place, or
// removes one it replaced): another pass reads what is there now.
func moved(err error) bool { return layout.NotExist(err) || errors.Is(err, privfs.ErrReplaced) }
