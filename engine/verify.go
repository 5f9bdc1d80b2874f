package engine

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/privfs"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
	"github.com/zeebo/blake3"
)

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// FS is the filesystem of the store. Default: the operating system's.
	FS vfs.FS
	// PublicKey checks the signatures of chain checkpoints and store heads.
	// It comes from the user, never from the store. nil: signatures are not
	// checked, and the report says so with a warning. With a key,
	// signatures are required: a run whose head is more than UnsignedTail
	// atoms past its last checkpoint signed with it fails
	// (chain.KindUnsignedTail).
	PublicKey ed25519.PublicKey
	// UnsignedTail is how many atoms each run may have past its last
	// signed checkpoint, with PublicKey (a writer still running, or one
	// that stopped before its next checkpoint). 0: none.
	UnsignedTail uint64
	// Origin is the name the public key file gives PublicKey
	// (chain.ParsePublicKeyFile). When set, it must be this store's origin
	// ("continuum-" and the first 16 hex digits of its id, the name the
	// engine signs under): a key of another store is a key-origin failure
	// that says so, and only signatures under the store's origin count.
	Origin string
	// Trusted is a state saved by an earlier verification (Report.State):
	// a store behind it or diverging from it is reported as a rollback.
	Trusted *chain.State
	// ChainKey is the keyed-mode secret the store was written with.
	ChainKey []byte
	// Deep also rebuilds every run's frame from its deltas and compares it
	// with the run's frame file, so that a frame file edited to change what
	// the next restart resumes from is detected; and checks the snapshot
	// store against the log (snapcheck.go), unless a running process has it
	// open (Report.Unchecked then says so).
	Deep bool
	// Budget bounds what Verify decompresses: nil means frame.NewBudget(),
	// 256 MiB plus 256 times the compressed bytes read. A record past it is
	// reported as damage (frame.ErrBudget) and not decompressed.
	Budget *frame.Budget
	// Progress, if set, is called now and then with the bytes of log read so
	// far and the log's total size.
	Progress func(done, total int64)
}

// Verify checks the store in dir without changing it (it takes no lock,
// trims no torn tail and writes nothing): every record's framing, every
// run's hash chain, the chain checkpoints and store heads (their signatures
// with opts.PublicKey), rollback against opts.Trusted, and that the engine's
// restart files (CHECKPOINT and the frame files) agree with the chain.
//
// It returns an error only when it cannot check at all (dir is not a store,
// an I/O error opening it); damage it finds is in the report.
func Verify(ctx context.Context, dir string, opts *VerifyOptions) (*chain.Report, error) {
	// Beside a live engine, a file listed may vanish before it is read (a
	// segment removed below a checkpoint): start over (see retryVanished).
	var rep *chain.Report
	err := retryVanished(ctx, func() error {
		var err error
		rep, err = verifyOnce(ctx, dir, opts)
		return err
	})
	return rep, err
}

func verifyOnce(ctx context.Context, dir string, opts *VerifyOptions) (*chain.Report, error) {
	var o VerifyOptions
	if opts != nil {
		o = *opts
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	start := time.Now()
	fs := privfs.Confine(o.FS, dir) // only the store's own regular files
	storeName := fs.PathJoin(dir, storeFileName)
	b, err := readFile(fs, storeName)
	var storeID string
	var keyed bool     // STORE says the chain is keyed
	var storeErr error // STORE is missing from a store that has a log: reported
	switch {
	case notExist(err):
		names, _ := fs.List(fs.PathJoin(dir, walDir))
		if !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".wal") }) {
			return nil, fmt.Errorf("%w: %s has no %s file", ErrNotAStore, dir, storeFileName)
		}
		storeErr = corruptf(storeName, "missing, but %s holds a log", fs.PathJoin(dir, walDir))
		// The store's identity, from CHECKPOINT if it is readable.
		if b, err := readFile(fs, fs.PathJoin(dir, checkpointName)); err == nil {
			if cp, err := parseCheckpointFile(checkpointName, b); err == nil {
				storeID = hex.EncodeToString(cp.storeID[:])
			}
		}
	case err != nil:
		return nil, err
	default:
		sf, err := parseStoreFile(storeName, b)
		if err != nil {
			return nil, err
		}
		storeID = hex.EncodeToString(sf.id[:])
		keyed = sf.mode == chainKeyed
	}

	// Dictionaries, read-only.
	db := &DB{fs: fs, dir: dir, dicts: frame.NewDicts()}
	if names, err := fs.List(db.path(dictsDir)); err == nil && len(names) > 0 {
		o2 := Options{DictSamples: -1}
		db.opts = o2
		if err := db.loadDicts(); err != nil {
			return nil, err
		}
	}
	if o.Budget == nil {
		o.Budget = frame.NewBudget()
	}
	db.comp = frame.NewCompressor(db.dicts).WithBudget(o.Budget)

	v, err := chain.NewVerifier(chain.VerifyOptions{Key: o.ChainKey, PublicKey: o.PublicKey, Origin: o.Origin, Trusted: o.Trusted,
		UnsignedTail: o.UnsignedTail, Keyed: keyed})
	if err != nil {
		return nil, err
	}
	v.Store(storeID)
	if storeErr != nil {
		v.Corrupt(storeName, storeErr)
	}
	vr := &verifyRun{db: db, v: v, deep: o.Deep, certs: map[ledger.Fingerprint][32]byte{}, runs: map[string]*verifyRunState{},
		dc: newDerivedCheck()}
	// The derived files first, the log after: a live engine writes a frame
	// file or CHECKPOINT only once the log holds what it derives from, so
	// the log opened afterwards reaches at least as far.
	if err := vr.loadRestartFiles(); err != nil {
		v.Corrupt(db.path(checkpointName), err)
	}
	log, err := wal.Open(db.path(walDir), &wal.Options{FS: fs, ReadOnly: true, ReadDamaged: true})
	var logErr error // damage found opening the log: reported, not returned
	switch {
	case err == nil:
	case errors.Is(err, wal.ErrCorrupt):
		log, logErr = nil, err
	case notExist(err):
		log = nil
	default:
		return nil, fmt.Errorf("engine: verify: open log: %w", err)
	}
	if logErr != nil {
		v.Corrupt(db.path(walDir), logErr)
	}
	if logErr == nil {
		vr.checkLogPresent(log)
	}
	if log != nil {
		var total int64
		for _, s := range log.Segments() {
			total += s.Size
		}
		vr.scan(ctx, log, total, o.Progress)
		if dmg := log.Recovery().Damage; dmg != nil {
			vr.logDamage(log, dmg)
		}
		if o.Deep {
			vr.checkSnapshotStore(ctx, log) // snapcheck.go
		} else {
			vr.unchecked = append(vr.unchecked, notCheckedSnapshots)
		}
		log.Close()
		if vr.vanished != nil {
			return nil, fmt.Errorf("engine: verify: read log %s: %w", db.path(walDir), vr.vanished)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep := v.Finish()
	vr.finish(rep)
	rep.Unchecked = append(rep.Unchecked, vr.unchecked...)
	rep.Duration = time.Since(start)
	return rep, nil
}

type verifyRunState struct {
	heads []chain.Hash // heads[i] = h(i+1), as stored
	frame *frame.Frame // Deep: the frame rebuilt so far
	// from the restart files:
	frameFile *frameFile
	ckpt      *checkpointRun
}

type verifyRun struct {
	db    *DB
	v     *chain.Verifier
	deep  bool
	certs map[ledger.Fingerprint][32]byte // BLAKE3 of each certified result
	runs  map[string]*verifyRunState
	extra []chain.Failure
	dc    *derivedCheck
	// unchecked says which derived files were not checked, and why.
	unchecked []string
	// vanished is set when a segment vanished while it was read.
	vanished error
}

// readErr reports an error reading the log: a segment that vanished (a
// live engine removed it below its checkpoint after Verify listed it)
// makes Verify start over; anything else is damage.
func (vr *verifyRun) readErr(log *wal.Log, err error) {
	if notExist(err) {
		vr.vanished = err
		return
	}
	vr.logDamage(log, err)
}

func (vr *verifyRun) run(id string) *verifyRunState {
	rs := vr.runs[id]
	if rs == nil {
		rs = &verifyRunState{}
		if vr.deep {
			rs.frame = newFrame()
		}
		vr.runs[id] = rs
	}
	return rs
}

func (vr *verifyRun) fail(run string, seq uint64, loc, format string, args ...any) {
	vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCorrupt, RunID: run, Seq: seq, Location: loc, Detail: fmt.Sprintf(format, args...)})
}

// loadRestartFiles reads CHECKPOINT and the frame files, to compare them
// with the chain once it is verified.
func (vr *verifyRun) loadRestartFiles() error {
	db := vr.db
	b, err := readFile(db.fs, db.path(checkpointName))
	if err == nil {
		cp, err := parseCheckpointFile(db.path(checkpointName), b)
		if err != nil {
			return err
		}
		vr.dc.cp, vr.dc.replay = cp, wal.Pos{Segment: cp.replay.seg, Offset: cp.replay.off}
		if cp.ledgerGen != 0 && vr.deep {
			if t, err := readFile(db.fs, db.ledgerTableName(cp.ledgerGen)); err == nil {
				vr.dc.table = t
			}
		}
		for i := range cp.runs {
			vr.run(cp.runs[i].id).ckpt = &cp.runs[i]
		}
	} else if !notExist(err) {
		return err
	}
	names, err := db.fs.List(db.path(framesDir))
	if err != nil {
		return nil // no frame files
	}
	for _, n := range names {
		if len(n) < 6 || n[len(n)-6:] != ".frame" {
			continue
		}
		name := db.path(framesDir, n)
		b, err := readFile(db.fs, name)
		if err != nil {
			vr.fail("", 0, name, "%v", err)
			continue
		}
		ff, err := parseFrameFile(name, b)
		if err != nil {
			vr.fail("", 0, name, "%v", err)
			continue
		}
		if frameFileBase(ff.run) != n {
			vr.fail(ff.run, ff.seq, name, "frame file of run %q under another run's name", ff.run)
			continue
		}
		vr.run(ff.run).frameFile = ff
	}
	return nil
}

func (vr *verifyRun) scan(ctx context.Context, log *wal.Log, total int64, progress func(done, total int64)) {
	rd, err := log.NewReader(wal.Pos{})
	if err != nil {
		vr.readErr(log, err)
		return
	}
	defer rd.Close()
	var done int64
	var payload []byte
	for n := 0; rd.Next(); n++ {
		if n%4096 == 0 {
			if ctx.Err() != nil {
				return
			}
			if progress != nil {
				progress(done, total)
			}
		}
		rec, pos := rd.Record(), rd.Pos()
		vr.noteRecord(pos, rd.NextPos())
		done += int64(len(rec))
		loc := "wal " + pos.String()
		if len(rec) == 0 {
			vr.v.Corrupt(loc, errors.New("empty record"))
			continue
		}
		switch rec[0] {
		case kindRun:
			r, err := decodeRunRecord(rec)
			if err != nil {
				vr.v.Corrupt(loc, err)
				continue
			}
			vr.run(r.id)
			vr.v.Run(r.id, r.nonce, loc)
			vr.noteRun(r, pos)
		case kindIntent:
			// Intents are not chained: checked, and (Deep) compared.
			if body, err := vr.ledgerBody(rec, loc); err == nil {
				if in, err := ledger.DecodeIntentView(body); err == nil { // args not kept
					vr.noteIntent(in, pos, loc)
				}
			}
		case kindCert:
			body, err := vr.ledgerBody(rec, loc)
			if err != nil {
				continue
			}
			c, err := ledger.DecodeCertificateView(body) // only its digest is kept
			if err != nil {
				vr.v.Corrupt(loc, err)
				continue
			}
			vr.noteCert(c, pos, loc)
			if c.Status == ledger.StatusDone || c.Status == ledger.StatusResolved {
				// The ledger never certifies an action twice (Resolve of a
				// certified action is refused): a second certificate is a
				// forgery that would change what Do returns.
				if _, dup := vr.certs[c.Fingerprint]; dup {
					vr.fail(c.RunID, c.Seq, loc, "action %x certified a second time", c.Fingerprint[:8])
					continue
				}
				vr.certs[c.Fingerprint] = blake3.Sum256(c.Result)
			}
		case kindAtom:
			if a, err := decodeAtomRecord(rec); err == nil {
				vr.noteAtom(a, pos)
			}
			payload = vr.atom(rec, loc, payload[:0])
		case kindFail:
			if _, err := decodeFailRecord(rec); err != nil {
				vr.v.Corrupt(loc, err)
			}
		case kindCheckpoint:
			vr.v.Checkpoint(rec[1:], loc)
		case kindStoreHead:
			vr.v.StoreHead(rec[1:], loc)
		default:
			vr.v.Corrupt(loc, fmt.Errorf("unknown record kind %d", rec[0]))
		}
	}
	if err := rd.Err(); err != nil {
		vr.readErr(log, err)
	}
	if progress != nil {
		progress(total, total)
	}
}

func (vr *verifyRun) ledgerBody(rec []byte, loc string) ([]byte, error) {
	body, err := vr.db.comp.Decompress(nil, rec[1:])
	if err != nil {
		if d := vr.db.dictNamed(rec[1:]); d != "" {
			err = fmt.Errorf("%w (%s is missing)", err, d)
		}
		vr.v.Corrupt(loc, fmt.Errorf("%s: %w", kindName(rec[0]), err))
		return nil, err
	}
	if rec[0] == kindIntent {
		if _, err := ledger.DecodeIntentView(body); err != nil {
			vr.v.Corrupt(loc, err)
			return nil, err
		}
	}
	return body, nil
}

// atom rebuilds the chained payload of an atom record (its body and the
// digests of its actions' certified results) and hands it to the verifier.
func (vr *verifyRun) atom(rec []byte, loc string, payload []byte) []byte {
	a, err := decodeAtomRecord(rec)
	if err != nil {
		vr.v.Corrupt(loc, err)
		return payload
	}
	// The body and the chained payload share one buffer: the payload is
	// the body followed by the results' digests, appended in place (body's
	// slices stay valid if the append moves it).
	// In a deep check the rebuilt frame keeps slices of the body's delta
	// (DecodeDeltaOwned), so the body gets a buffer of its own.
	dst := payload[:0]
	if vr.deep {
		dst = nil
	}
	raw, err := vr.db.comp.Decompress(dst, a.body)
	var body *atomBody
	if err == nil {
		body, err = decodeAtomBody(raw)
	}
	if err != nil {
		if d := vr.db.dictNamed(a.body); d != "" {
			err = fmt.Errorf("%w (%s is missing)", err, d)
		}
		// Still a record of the chain: hash what is there, so that the
		// verifier places the failure at this seq.
		vr.fail(a.run, a.seq, loc, "atom body: %v", err)
		vr.v.Record(a.run, a.seq, a.body, a.head, loc)
		return payload
	}
	payload = raw
	for _, fp := range body.actions {
		d, ok := vr.certs[fp]
		if !ok {
			vr.fail(a.run, a.seq, loc, "action %x has no certificate before the atom", fp[:8])
		}
		payload = append(payload, d[:]...)
	}
	vr.v.Record(a.run, a.seq, payload, a.head, loc)

	rs := vr.run(a.run)
	if uint64(len(rs.heads))+1 == a.seq {
		rs.heads = append(rs.heads, a.head)
		if vr.deep && rs.frame != nil {
			d, err := frame.DecodeDeltaOwned(body.delta) // raw is this atom's own, and never reused
			if err == nil {
				err = rs.frame.Apply(d)
			}
			if err != nil {
				vr.fail(a.run, a.seq, loc, "delta: %v", err)
				rs.frame = nil
			} else if ff := rs.frameFile; ff != nil && ff.seq == a.seq {
				vr.compareFrame(a.run, rs.frame, ff)
			}
		}
	}
	return payload
}

func (vr *verifyRun) compareFrame(run string, want *frame.Frame, ff *frameFile) {
	name := vr.db.frameFileName(run)
	got, err := vr.db.decodeFrame(ff.frame, name)
	if err != nil {
		vr.fail(run, ff.seq, name, "%v", err)
		return
	}
	if !bytes.Equal(frame.AppendFrame(nil, want), frame.AppendFrame(nil, got)) {
		vr.fail(run, ff.seq, name, "frame file differs from the frame rebuilt from the log")
	}
}

// finish compares the restart files with the verified chains and adds what
// it found to the report.
func (vr *verifyRun) finish(rep *chain.Report) {
	verified := map[string]chain.RunReport{}
	for _, rr := range rep.Runs {
		verified[rr.RunID] = rr
	}
	headAt := func(run string, seq uint64) (chain.Hash, bool) {
		rs := vr.runs[run]
		if rs == nil || seq == 0 || seq > uint64(len(rs.heads)) || seq > verified[run].LastSeq {
			return chain.Hash{}, false
		}
		return rs.heads[seq-1], true
	}
	for id, rs := range vr.runs {
		if ff := rs.frameFile; ff != nil {
			name := vr.db.frameFileName(id)
			if h, ok := headAt(id, ff.seq); !ok {
				vr.fail(id, ff.seq, name, "frame file at seq %d, beyond the run's verified chain", ff.seq)
			} else if h != ff.head {
				vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCheckpointMismatch, RunID: id, Seq: ff.seq,
					Expected: h, Actual: ff.head, Location: name, Detail: "frame file head differs from the chain"})
			} else if vr.deep && rs.frame != nil && uint64(len(rs.heads)) < ff.seq {
				vr.fail(id, ff.seq, name, "frame file beyond the log")
			}
		}
		if c := rs.ckpt; c != nil && c.lastSeq > 0 {
			name := vr.db.path(checkpointName)
			if h, ok := headAt(id, c.lastSeq); !ok {
				vr.fail(id, c.lastSeq, name, "engine checkpoint at seq %d, beyond the run's verified chain", c.lastSeq)
			} else if h != c.head {
				vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCheckpointMismatch, RunID: id, Seq: c.lastSeq,
					Expected: h, Actual: c.head, Location: name, Detail: "engine checkpoint head differs from the chain"})
			}
		}
	}
	vr.finishDerived(rep)
	if len(vr.extra) == 0 {
		return
	}
	rep.OK = false
	rep.Failures = append(rep.Failures, vr.extra...)
	for i := range rep.Runs {
		for j := range vr.extra {
			if f := vr.extra[j]; f.RunID == rep.Runs[i].RunID && rep.Runs[i].Failure == nil {
				rep.Runs[i].OK = false
				rep.Runs[i].Failure = &f
			}
		}
	}
}
