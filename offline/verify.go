package offline

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
	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/privfs"
	"github.com/continuumdb/continuum/internal/stream"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
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
	// Keyring opens an encrypted store's payloads (the keyring it was
	// written with: engine.Options.Keyring). Without it Verify still
	// checks every record, link, checkpoint and signature of an encrypted
	// store (the chain covers the sealed bytes) and says, in
	// Report.Unchecked, that the payloads were not opened; Deep needs it.
	// A keyring that lacks a key the store needs, or holds a wrong one, is
	// an error (seal.ErrUnknownKey, seal.ErrWrongKey).
	Keyring seal.Keyring
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
	storeName := fs.PathJoin(dir, layout.StoreName)
	b, err := layout.ReadFile(fs, storeName)
	var storeID string
	var keyed bool // STORE says the chain is keyed
	var sf *layout.Store
	var storeErr error // STORE is missing from a store that has a log: reported
	switch {
	case layout.NotExist(err):
		names, _ := fs.List(fs.PathJoin(dir, layout.WALDir))
		if !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".wal") }) {
			return nil, fmt.Errorf("%w: %s has no %s file", ErrNotAStore, dir, layout.StoreName)
		}
		storeErr = record.Corruptf(storeName, "missing, but %s holds a log", fs.PathJoin(dir, layout.WALDir))
		// The store's identity, from CHECKPOINT if it is readable.
		if b, err := layout.ReadFile(fs, fs.PathJoin(dir, layout.CheckpointName)); err == nil {
			if cp, err := layout.ParseCheckpoint(layout.CheckpointName, b); err == nil {
				storeID = hex.EncodeToString(cp.StoreID[:])
			}
		}
	case err != nil:
		return nil, err
	default:
		sf, err = layout.ParseStore(storeName, b)
		if err != nil {
			return nil, err
		}
		storeID = hex.EncodeToString(sf.ID[:])
		keyed = sf.Keyed()
	}

	// Dictionaries, read-only.
	db := &store{fs: fs, dir: dir, dicts: frame.NewDicts()}
	if names, err := fs.List(db.path(layout.DictsDir)); err == nil && len(names) > 0 {
		if err := db.loadDicts(); err != nil {
			return nil, err
		}
	}
	if o.Budget == nil {
		o.Budget = frame.NewBudget()
	}
	db.comp = frame.NewCompressor(db.dicts).WithBudget(o.Budget)
	var unopened []string
	var keysDamage error
	if sf != nil && sf.Sealed() {
		if keysDamage, err = db.openKeys(sf.ID, o.Keyring); err != nil {
			return nil, fmt.Errorf("engine: verify: %w", err)
		}
		if db.sealer == nil {
			unopened = append(unopened, notOpenedPayloads)
			o.Deep = false
		}
	}

	v, err := chain.NewVerifier(chain.VerifyOptions{Key: o.ChainKey, PublicKey: o.PublicKey, Origin: o.Origin, Trusted: o.Trusted,
		UnsignedTail: o.UnsignedTail, Keyed: keyed})
	if err != nil {
		return nil, err
	}
	v.Store(storeID)
	if storeErr != nil {
		v.Corrupt(storeName, storeErr)
	}
	if keysDamage != nil {
		v.Corrupt(db.path(layout.KeysName), keysDamage)
	}
	hasher, err := chain.NewHasher(o.ChainKey)
	if err != nil {
		return nil, err
	}
	vr := &verifyRun{db: db, v: v, hasher: hasher, deep: o.Deep, runs: map[string]*verifyRunState{},
		dc: newDerivedCheck(), storeID: storeID, pub: o.PublicKey, born: map[string]bool{}}
	if id, err := hex.DecodeString(storeID); err == nil && len(id) == len(vr.storeIDBytes) {
		copy(vr.storeIDBytes[:], id)
	}
	// The derived files first, the log after: a live engine writes a frame
	// file or CHECKPOINT only once the log holds what it derives from, so
	// the log opened afterwards reaches at least as far.
	if err := vr.loadRestartFiles(); moved(err) {
		return nil, err // a file the engine replaced or removed meanwhile: verify again (retryVanished)
	} else if err != nil {
		v.Corrupt(db.path(layout.CheckpointName), err)
	}
	log, err := wal.Open(db.path(layout.WALDir), &wal.Options{FS: fs, ReadOnly: true, ReadDamaged: true})
	var logErr error // damage found opening the log: reported, not returned
	switch {
	case err == nil:
	case errors.Is(err, wal.ErrCorrupt):
		log, logErr = nil, err
	case layout.NotExist(err):
		log = nil
	default:
		return nil, fmt.Errorf("engine: verify: open log: %w", err)
	}
	if logErr != nil {
		v.Corrupt(db.path(layout.WALDir), logErr)
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
		vr.checkCompacted(log) // verify_compact.go
		if o.Deep {
			vr.checkSnapshotStore(ctx, log) // snapcheck.go
		} else {
			vr.unchecked = append(vr.unchecked, notCheckedSnapshots)
		}
		log.Close()
		if vr.vanished != nil {
			return nil, fmt.Errorf("engine: verify: read log %s: %w", db.path(layout.WALDir), vr.vanished)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	vr.checkBlobs(ctx)         // verify_blobs.go
	vr.checkErasedKeys()       // verify_delete.go
	vr.checkErasedMemoryKeys() // verify_erasekey.go
	rep := v.Finish()
	rep.ErasedKeys = vr.erasedKeys
	vr.finish(rep)
	vr.reportRollbacks(rep) // verify_rollback.go
	vr.reportWaits(rep)     // verify_waits.go
	vr.applyDeletions(rep)  // verify_delete.go
	rep.Unchecked = append(rep.Unchecked, vr.unchecked...)
	rep.Unchecked = append(rep.Unchecked, unopened...)
	rep.Duration = time.Since(start)
	return rep, nil
}

type verifyRunState struct {
	heads headList      // heads.at(i) = h(base+i+1), as stored
	ended bool          // the run's end record was read
	end   record.Record // that record (Deep or not: status, time, result)
	// created: the creation time of its run (or fork) record.
	created int64
	// base is the seq the run's chain starts at (a fork's fork point, 0
	// otherwise), genesis its head there, parent the run it was forked
	// from; pos[i] is where atom base+i+1 is (Deep).
	base    uint64
	genesis chain.Hash
	parent  string
	pos     []wal.Pos
	frame   *frame.Frame // Deep: the frame rebuilt so far
	// erasedAtoms: an atom of the run was sealed with an erased key, so
	// that its frame can no longer be rebuilt.
	erasedAtoms bool
	// from the restart files:
	frameFile *layout.FrameFile
	ckpt      *layout.CheckpointRun
}

type verifyRun struct {
	db     *store
	v      *chain.Verifier
	hasher *chain.Hasher
	deep   bool
	// atomDec decodes the atoms' bodies into atomBody (one for the scan,
	// not one per atom: nothing keeps an atom's body past its check).
	atomDec  *record.Decoder
	atomBody record.AtomBody
	refs     []int     // an atom's result references (frame.DeltaRefs), reused
	certs    certTable // the certified actions the scan has read so far
	log      *wal.Log  // the log the scan reads
	runs     map[string]*verifyRunState
	// rollbacks holds, by run, the rollback whose record the scan has read
	// and whose completing atom it has not; rolled the completed ones.
	rollbacks map[string]*verifyRollback
	rolled    []chain.Rollback
	// comps holds (Deep), by the fingerprint of an action whose intent
	// records a compensation, the fingerprint of that compensation as a
	// rollback runs it: what a rollback record's entry must name.
	comps map[ledger.Fingerprint]ledger.Fingerprint
	// retries is what Deep saw of the attempts of each action with a
	// retry policy, in log order (verify_retry.go); nil until one.
	retries map[ledger.Fingerprint]*retrySeen
	extra   []chain.Failure
	dc      *derivedCheck
	// unchecked says which derived files were not checked, and why.
	unchecked []string
	// vanished is set when a segment vanished while it was read.
	vanished error
	// damaged lists the records of the log that could not be read.
	damaged []damagedRecord

	// Deletions (verify_delete.go): the store's id, the public key, the
	// runs whose creation record was read, the delete records read.
	storeID      string
	storeIDBytes [16]byte
	pub          ed25519.PublicKey
	born         map[string]bool
	deletions    map[string]*verifyDeletion
	// waits is the state of the runs' waits (verify_waits.go).
	waits      verifyWaits
	erasedKeys []chain.ErasedKey // erase-key records that passed (verify_erasekey.go)
	// forkOfErased holds, by fork, a failure to report unless the fork is
	// erased too: its fork point's state is in atoms of its parent sealed
	// with an erased key.
	forkOfErased map[string]chain.Failure

	msgs verifyMessages // verify_messages.go

	// blobs holds the first record that references each blob, by run
	// (verify_blobs.go).
	blobs   map[blobKey]blobUse
	streams *stream.Checker // verify_stream.go; nil until the first record
}

// certSeen is a done or resolved certificate the scan read: where it is,
// and BLAKE3 of its result (what an atom's chained payload holds).
type certSeen struct {
	sum [32]byte
	pos wal.Pos
}

// results resolves the certified results an atom's delta refers to from
// the certificates the scan has read (all of them, once it is done).
func (vr *verifyRun) results(fp ledger.Fingerprint) ([]byte, error) {
	c, ok := vr.certs.get(&fp)
	if !ok {
		return nil, fmt.Errorf("%w: the log has no certificate of action %x before the atom", record.ErrNoCertificate, fp[:8])
	}
	return vr.db.certifiedResult(vr.log, c.pos, fp)
}

// atomResults resolves the references of the delta of an atom with body
// (frame.Resolver): reference i names the body's action i.
func (vr *verifyRun) atomResults(body *record.AtomBody) frame.Resolver {
	return func(i int) ([]byte, error) {
		if i >= len(body.Actions) {
			return nil, fmt.Errorf("%w: the atom lists %d actions", record.ErrNoCertificate, len(body.Actions))
		}
		return vr.results(body.Actions[i])
	}
}

// readErr reports an error reading the log: a segment that vanished (a
// live engine removed it below its checkpoint after Verify listed it)
// makes Verify start over; anything else is damage.
func (vr *verifyRun) readErr(err error) {
	if layout.NotExist(err) {
		vr.vanished = err
		return
	}
	vr.logDamage(err)
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

func (vr *verifyRun) scan(ctx context.Context, log *wal.Log, total int64, progress func(done, total int64)) {
	if segs := log.Segments(); len(segs) > 0 {
		// Where the first record would start: the end of a log that holds
		// none (a store opened and closed with nothing written).
		vr.dc.end = wal.Pos{Segment: segs[0].ID, Offset: wal.SegmentHeaderSize}
	}
	dec := vr.db.decoder(true)
	dec.KeepUnopened = true // reported below, at its run and seq
	// Without Deep nothing keeps an intent or a certificate past its turn
	// of the loop (certs keeps the result's digest), so they can share
	// one buffer; Deep keeps them (noteIntent, noteCert).
	dec.ReuseLedger = !vr.deep
	vr.atomDec = vr.db.atomDecoder() // the cursor charged each atom's body
	c, err := record.NewCursor(log, vr.db.segmentFile, wal.Pos{}, dec)
	if err != nil {
		vr.readErr(err)
		return
	}
	defer c.Close()
	vr.log = log
	var done int64
	c.OnDamage(func(pos wal.Pos, raw []byte, err error) {
		vr.noteRecord(pos, c.NextPos())
		done += int64(len(raw))
		vr.v.Corrupt("wal "+pos.String(), err)
	})
	var payload, locBuf []byte
	var pos wal.Pos
	// where names the current record, for the checks that keep or report
	// it: built only when one does (a string per record is an allocation).
	where := func() string {
		locBuf = pos.AppendTo(append(locBuf[:0], "wal "...))
		return string(locBuf)
	}
	for n := 0; c.Next(); n++ {
		if n%4096 == 0 {
			if ctx.Err() != nil {
				return
			}
			if progress != nil {
				progress(done, total)
			}
		}
		r := c.Record()
		pos = r.Pos
		vr.noteRecord(pos, c.NextPos())
		done += int64(len(r.Raw))
		var loc string
		switch r.Kind {
		case record.KindIntent, record.KindCert:
			if vr.deep { // kept by noteIntent and noteCert; else built on failure
				loc = where()
			}
		case record.KindAtom: // built when a check needs it (atom)
		default:
			loc = where()
		}
		switch r.Kind {
		case record.KindRun, record.KindFork, record.KindAtom, record.KindFail, record.KindEnd, record.KindDelete, record.KindErase,
			record.KindStreamChunk, record.KindStreamAbandon:
			vr.streamNote(r, where) // verify_stream.go
		}
		switch r.Kind {
		case record.KindRun:
			rs := vr.run(r.Run)
			rs.genesis, rs.created = vr.hasher.Genesis(r.Run, r.Nonce), r.Created
			vr.v.Run(r.Run, r.Nonce, loc)
			vr.noteRun(r)
			vr.born[r.Run] = true
		case record.KindFork:
			vr.fork(log, r, loc)
			vr.v.Fork(r.Run, r.Nonce, r.Parent, r.Seq, r.ParentHead, loc)
			vr.noteRun(r)
			vr.born[r.Run] = true
		case record.KindIntent:
			// Intents are not chained: checked, and (Deep) compared.
			if r.Intent == nil {
				continue // sealed, not opened (no keyring, or erased)
			}
			vr.noteIntent(r.Intent, pos, loc)
		case record.KindCert:
			cert := r.Cert // only its digest is kept
			if cert == nil {
				continue // sealed, not opened
			}
			vr.noteCert(cert, pos, loc)
			if ref, ok := blob.ParseValueBytes(cert.Result); ok {
				vr.noteBlob(cert.RunID, cert.Seq, where, ref) // verify_blobs.go
			}
			if cert.Status == ledger.StatusDone || cert.Status == ledger.StatusResolved {
				// The ledger never certifies an action twice (Resolve of a
				// certified action is refused): a second certificate is a
				// forgery that would change what Do returns.
				// (The digest is computed before the duplicate check, so
				// that the table is probed once: a duplicate is rare.)
				if !vr.certs.add(&cert.Fingerprint, certSeen{sum: blake3.Sum256(cert.Result), pos: pos}) {
					vr.fail(cert.RunID, cert.Seq, where(), "action %x certified a second time", cert.Fingerprint[:8])
					continue
				}
			}
		case record.KindAtom:
			rs := vr.runs[r.Run]
			if rs != nil && rs.ended {
				vr.fail(r.Run, r.Seq, where(), "atom after the run ended")
			}
			vr.noteAtom(r)
			payload = vr.atom(r, rs, where, payload[:0])
		case record.KindEnd:
			// The run's last link: chained like an atom, over its status,
			// time and result.
			rs := vr.run(r.Run)
			if rs.ended {
				vr.fail(r.Run, r.Seq, loc, "the run ends a second time")
			}
			rs.ended = true
			rs.end = record.Record{Status: r.Status, Ended: r.Ended, Result: append([]byte(nil), r.Result...)}
			if vr.db.sealed {
				// CHECKPOINT's row holds the result as stored, sealed.
				rs.end.Result = append([]byte(nil), r.Stored...)
			}
			vr.messageRunGone(r.Kind, r.Run, r.Pos)
			vr.v.Record(r.Run, r.Seq, r.Payload, r.Head, loc)
			if rs.base+rs.heads.len()+1 == r.Seq {
				rs.heads.push(r.Head)
			}
		case record.KindCheckpoint:
			vr.v.Checkpoint(r.Note, loc)
		case record.KindStoreHead:
			vr.v.StoreHead(r.Note, loc)
		case record.KindDelete, record.KindErase:
			vr.deletion(r, loc)
			vr.messageRunGone(r.Kind, r.Run, r.Pos)
		case record.KindEraseKey:
			vr.eraseKey(r, loc) // verify_erasekey.go
		case record.KindRollback:
			vr.rollback(r, loc) // verify_rollback.go
		case record.KindWait, record.KindEvent, record.KindWake:
			vr.waitRecord(r, loc) // verify_waits.go
		}
	}
	if err := c.Err(); err != nil {
		vr.readErr(err)
	}
	if progress != nil {
		progress(total, total)
	}
}

// atom rebuilds the chained payload of an atom record (its body and the
// digests of its actions' certified results) and hands it to the verifier.
// rs is the state of its run, nil if the scan has not met the run yet;
// where names the record (called only when a check keeps or reports its
// location: a string per atom was an allocation per atom).
func (vr *verifyRun) atom(a *record.Record, rs *verifyRunState, where func() string, payload []byte) []byte {
	var locStr string
	loc := func() string {
		if locStr == "" {
			locStr = where()
		}
		return locStr
	}
	runState := func() *verifyRunState {
		if rs == nil {
			rs = vr.run(a.Run)
		}
		return rs
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
	if vr.db.sealed {
		// The chain covers the sealed body as stored (record/seal.go).
		vr.v.RecordAt(a.Run, a.Seq, a.Stored, a.Head, loc)
		if a.SealErr != nil {
			vr.fail(a.Run, a.Seq, loc(), "atom body: %v", a.SealErr)
		}
		if !a.Opened {
			// No keyring, or the run's key was erased: only the link.
			rs := runState()
			if rs.base+rs.heads.len()+1 == a.Seq {
				rs.heads.push(a.Head)
			}
			if a.Erased {
				rs.erasedAtoms, rs.frame = true, nil
			}
			vr.rollbackUnopened(a) // verify_rollback.go
			return payload
		}
	}
	body := &vr.atomBody
	raw, err := vr.atomDec.DecodeAtomTo(dst, a, vr.db.segmentFile(a.Pos.Segment), body)
	if err != nil {
		// Still a record of the chain: hash what is there, so that the
		// verifier places the failure at this seq.
		vr.fail(a.Run, a.Seq, loc(), "%v", err)
		if !vr.db.sealed { // a sealed atom's link is recorded already
			vr.v.RecordAt(a.Run, a.Seq, a.Body, a.Head, loc)
		}
		return payload
	}
	payload = raw
	for i := range body.Actions { // by index: a copy of a fingerprint sliced for fmt would escape, an allocation per action
		c, ok := vr.certs.get(&body.Actions[i])
		if !ok {
			vr.fail(a.Run, a.Seq, loc(), "action %x has no certificate before the atom", body.Actions[i][:8])
		}
		payload = append(payload, c.sum[:]...)
	}
	seal := vr.rollbackSeal(a) // the atom completes a rollback: chained over its record too
	payload = append(payload, seal...)
	if !vr.db.sealed {
		vr.v.RecordAt(a.Run, a.Seq, payload, a.Head, loc)
	} else if tail := payload[len(raw):]; !bytes.Equal(a.Tail, tail) {
		// What the plaintext rule hashes besides the body is sealed with
		// it: the digests of the certified results, a rollback's seal.
		vr.fail(a.Run, a.Seq, loc(), "the digests sealed in the atom's body do not match its actions' certified results (or its rollback record)")
	}
	// A branch's base (the atom DAG): before the atom, within the run.
	if bb, err := body.AtomBranch(); err != nil {
		vr.fail(a.Run, a.Seq, loc(), "atom: %v", err)
	} else if bb != nil {
		if err := bb.CheckBase(a.Seq, runState().base); err != nil {
			vr.fail(a.Run, a.Seq, loc(), "atom: %v", err)
		} else if vr.deep {
			vr.checkBranch(a, loc(), bb, body)
		}
	}
	// d, decoded when needed (Deep), aliases the body (DecodeDeltaOwned,
	// no copy): the body's buffer is this atom's own in a deep check, where
	// the rebuilt frame keeps d's slices. Without Deep only the delta's
	// references are read (frame.DeltaRefs: the same checks, nothing
	// built).
	vr.noteBlobs(a, body.Delta, loc) // verify_blobs.go
	var d *frame.Delta
	refsOK := true
	if frame.MayRefer(body.Delta) {
		if vr.deep {
			d, err = frame.DecodeDeltaOwned(body.Delta)
			if err == nil {
				vr.refs = append(vr.refs[:0], d.Refs()...)
			}
		} else {
			vr.refs, err = frame.DeltaRefs(vr.refs[:0], body.Delta)
		}
		if err != nil {
			vr.fail(a.Run, a.Seq, loc(), "delta: %v", err)
			refsOK = false
		} else {
			refsOK = vr.checkRefs(a, loc, body, vr.refs)
		}
	}

	rs = runState()
	if rs.base+rs.heads.len()+1 == a.Seq {
		if len(body.Exts) > 0 { // messages needs nothing else
			vr.messages(a, loc(), body)
		}
		rs.heads.push(a.Head)
		if vr.deep {
			rs.pos = append(rs.pos, a.Pos)
		}
		if vr.deep && rs.frame != nil && !refsOK {
			rs.frame = nil // reported: the frame cannot be rebuilt past it
		} else if vr.deep && rs.frame != nil {
			if d == nil {
				d, err = frame.DecodeDeltaOwned(body.Delta)
			}
			if err == nil {
				err = rs.frame.ApplyWith(d, vr.atomResults(body))
			}
			if err == nil && vr.db.sealer != nil && frame.MaySeal(body.Delta) {
				vr.openSealedValues(a, loc(), d) // verify_erasekey.go
			}
			if err != nil {
				vr.fail(a.Run, a.Seq, loc(), "delta: %v", err)
				rs.frame = nil
			} else if ff := rs.frameFile; ff != nil && ff.Seq == a.Seq {
				vr.compareFrame(a.Run, rs.frame, ff)
			}
		}
	}
	if seal != nil {
		vr.rollbackAtom(a, loc(), body, d)
	}
	return payload
}

// checkBranch checks the conflict rule of branch atom a (Deep): no atom
// between its base and it wrote a key its delta writes or it declared it
// reads (record.DeltaWrites, record.Overlap: the engine's own rule). It
// reads those atoms again, at most record.MaxBranchLag of them.
func (vr *verifyRun) checkBranch(a *record.Record, loc string, bb *record.BranchBase, body *record.AtomBody) {
	rs := vr.run(a.Run)
	if bb.Base+1 >= a.Seq || rs.base+uint64(len(rs.pos))+1 != a.Seq {
		return // nothing between them; or the run's chain broke before it, which is reported
	}
	d, err := frame.DecodeDelta(body.Delta)
	if err != nil {
		return // reported by the frame's rebuild
	}
	mine := record.SortStateKeys(append(record.DeltaWrites(d), bb.Reads...))
	for k := bb.Base + 1; k < a.Seq; k++ {
		pos := rs.pos[k-rs.base-1]
		rec, err := readAtomAt(vr.db, vr.log, pos, a.Run, k)
		if err != nil {
			vr.fail(a.Run, a.Seq, loc, "branch %q: atom %d, between its base %d and it, cannot be read: %v", bb.Branch, k, bb.Base, err)
			return
		}
		_, ob, err := vr.db.decoder(false).DecodeAtom(nil, rec, vr.db.segmentFile(pos.Segment))
		if err != nil {
			return // reported at its own seq
		}
		od, err := frame.DecodeDelta(ob.Delta)
		if err != nil {
			return
		}
		if key, ok := record.Overlap(record.DeltaWrites(od), mine); ok {
			vr.fail(a.Run, a.Seq, loc, "branch %q (base seq %d) committed after atom %d, which wrote %s: a key the branch writes or declared it reads",
				bb.Branch, bb.Base, k, key)
			return
		}
	}
}

// checkRefs reports the references refs of the delta of atom a to certified
// results the atom cannot have (record.ApplyAtom): a reference names one
// of the actions the atom's body lists, whose done or resolved
// certificate comes before the atom in the log. The chain covers the
// reference (it is in the body) and the result (its digest is in the
// chained payload), so a changed certificate or reference is a hash
// mismatch too; this names a reference that the engine cannot resolve.
func (vr *verifyRun) checkRefs(a *record.Record, loc func() string, body *record.AtomBody, refs []int) bool {
	ok := true
	for _, i := range refs {
		switch {
		case i >= len(body.Actions):
			vr.fail(a.Run, a.Seq, loc(), "delta refers to certified result %d; the atom lists %d actions", i, len(body.Actions))
			ok = false
		default:
			if !vr.certs.has(&body.Actions[i]) {
				vr.fail(a.Run, a.Seq, loc(), "delta refers to the result of action %d (%x), which has no certificate before the atom", i, body.Actions[i][:8])
				ok = false
			}
		}
	}
	return ok
}
