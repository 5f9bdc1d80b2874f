package offline

// Scan and the read-only view of a store's log that Inspect and Scan share.

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/privfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/wal"
)

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
	// Sealed: the record's payload is sealed (an encrypted store, read by
	// Scan, which opens nothing): Codec, Dict and RawSize say nothing of it.
	Sealed bool
}

// readOnlyStore is the part of a DB that reading a store without opening it
// needs: the filesystem, the paths, the dictionaries and the log.
type readOnlyStore struct {
	db      *store // fs, dir, dicts and comp only
	log     *wal.Log
	storeID [16]byte
	created time.Time
	// buf is the decompression buffer of scan: a record's decompressed
	// body is valid until the next record.
	buf []byte
	// atoms decompresses the bodies of the atoms scan's cursor read.
	atoms *record.Decoder
}

// openReadOnly opens dir's STORE file, dictionaries and log for reading.
// The log is nil if the store has no wal directory yet.
// Every record it decompresses is charged to budget (nil: frame.NewBudget()).
// An encrypted store needs ring, unless sealedOK (Scan, which opens no
// payload).
func openReadOnly(dir string, fs vfs.FS, budget *frame.Budget, ring seal.Keyring, sealedOK bool) (*readOnlyStore, error) {
	if fs == nil {
		fs = vfs.Default
	}
	fs = privfs.Confine(fs, dir) // only the store's own regular files
	if _, err := fs.Stat(dir); err != nil {
		return nil, fmt.Errorf("engine: %s: %w", dir, err)
	}
	storeName := fs.PathJoin(dir, layout.StoreName)
	sf, err := readStoreFile(fs, dir)
	if err != nil {
		return nil, err
	}
	db := &store{fs: fs, dir: dir, dicts: frame.NewDicts()}
	if names, err := fs.List(db.path(layout.DictsDir)); err == nil && len(names) > 0 {
		if err := db.loadDicts(); err != nil {
			return nil, err
		}
	}
	if budget == nil {
		budget = frame.NewBudget()
	}
	db.comp = frame.NewCompressor(db.dicts).WithBudget(budget)
	if sf.Sealed() {
		// Reading an encrypted store means opening its payloads: without
		// the keyring the tools would show nothing but sealed bytes.
		if ring == nil && !sealedOK {
			return nil, fmt.Errorf("%w: %s: the store is encrypted: read it with its keyring (InspectOptions.Keyring, continuumctl --keyring FILE)", ErrKeyring, storeName)
		}
		if _, err := db.openKeys(sf.ID, ring); err != nil && ring != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
	} else if ring != nil {
		return nil, fmt.Errorf("%w: %s: the store is not encrypted: read it without a keyring", ErrKeyring, storeName)
	}
	s := &readOnlyStore{db: db, storeID: sf.ID, created: time.Unix(0, sf.Created)}
	witness := db.logWitness()
	s.log, err = wal.Open(db.path(layout.WALDir), &wal.Options{FS: fs, ReadOnly: true})
	if err != nil && !layout.NotExist(err) {
		return nil, logDamage(err, "open log "+db.path(layout.WALDir))
	}
	// A log that is gone or lost records is refused, not read as fewer runs.
	if err := db.checkReadOnlyLog(s.log, witness); err != nil {
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

// describe fills in lr from r, a record the cursor decoded: its sizes,
// and the codec and dictionary of its compressed part.
func (s *readOnlyStore) describe(r *record.Record, lr *LogRecord) error {
	*lr = LogRecord{Kind: r.Kind.String(), Run: r.Run, Seq: r.Seq, Pos: r.Pos, Size: len(r.Raw), RawSize: len(r.Raw), Record: r.Raw}
	if r.Stored != nil && !r.Opened {
		lr.Sealed = true // sealed, not opened: its size alone
		return nil
	}
	var compressed []byte
	switch r.Kind {
	case record.KindAtom:
		compressed = r.Body
	case record.KindIntent, record.KindCert:
		compressed = r.Raw[1:]
		if r.Stored != nil {
			compressed = r.Body // opened from its seal
		}
	default:
		return nil
	}
	where := func(err error) error {
		return &CorruptionError{File: s.db.segmentFile(r.Pos.Segment), Offset: r.Pos.Offset, Run: lr.Run, Seq: lr.Seq,
			Reason: fmt.Sprintf("%s record: %v", lr.Kind, err), Err: err}
	}
	codec, dict, err := frame.PeekCodec(compressed)
	if err != nil {
		return where(err)
	}
	lr.Codec, lr.Dict = codec, dict
	plain := r.Plain
	if r.Kind == record.KindAtom {
		var body *record.AtomBody
		if s.atoms == nil {
			s.atoms = s.db.atomDecoder() // the cursor charged each atom's body
		}
		s.buf, body, err = s.atoms.DecodeAtom(s.buf, r, s.db.segmentFile(r.Pos.Segment))
		if err != nil {
			return err
		}
		_ = body
		plain = s.buf
	}
	lr.RawSize = len(r.Raw) - len(compressed) + len(plain)
	return nil
}

// scan reads the whole log in order and calls fn with each record,
// decoded (the ledger's records too) and described.
func (s *readOnlyStore) scan(ctx context.Context, fn func(lr *LogRecord, r *record.Record) error) error {
	if s.log == nil {
		return nil
	}
	c, err := record.NewCursor(s.log, s.db.segmentFile, wal.Pos{}, s.db.decoder(true))
	if err != nil {
		return logDamage(err, "read log "+s.db.path(layout.WALDir))
	}
	defer c.Close()
	var lr LogRecord
	for n := 0; c.Next(); n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		r := c.Record()
		if err := s.describe(r, &lr); err != nil {
			return err
		}
		if err := fn(&lr, r); err != nil {
			return err
		}
	}
	return c.Err()
}

// Scan reads the log of the store in dir from its first record to its
// last, read-only (it takes no lock, trims no torn tail and writes
// nothing), and calls fn with a description of each record. It stops at
// the first error of fn, which it returns, or at the first record it cannot
// read or decode, with an error that says where (matching record.ErrCorrupt,
// and wal.ErrCorrupt too for damaged framing). fs nil means the
// operating system's filesystem.
func Scan(ctx context.Context, dir string, fs vfs.FS, fn func(*LogRecord) error) error {
	// A pass that failed before fn saw a record (the oldest segment was
	// removed under it) starts over; once fn has seen records, it cannot.
	called := false
	var scanErr error
	err := retryVanished(ctx, func() error {
		s, err := openReadOnly(dir, fs, nil, nil, true)
		if err != nil {
			return err
		}
		defer s.close()
		err = s.scan(ctx, func(lr *LogRecord, _ *record.Record) error {
			called = true
			return fn(lr)
		})
		if !called {
			return err
		}
		if layout.NotExist(err) {
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
