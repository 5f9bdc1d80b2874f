package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/wal"
)

// Record is one decoded log record. Kind says which fields are set; the
// others are zero. Byte slices alias Raw (or, for the ledger's records,
// Plain): valid as long as those are.
type Record struct {
	Kind Kind
	Pos  wal.Pos // where the record starts
	Raw  []byte  // the record as the log holds it

	Run string // the run it concerns: every kind but KindStoreHead
	Seq uint64 // the atom it concerns: intent, certificate, atom, fail, checkpoint

	Nonce   chain.Nonce // KindRun, KindFork
	Created int64       // KindRun, KindFork: unix nanoseconds

	// KindFork: the run it was forked from and that run's head at Seq, the
	// fork point.
	Parent     string
	ParentHead chain.Hash

	// KindEnd: how the run ended, when (unix nanoseconds) and its result
	// (a slice of Raw); Payload is what the chain links it over.
	Status  uint8
	Ended   int64
	Result  []byte
	Payload []byte

	Head chain.Hash // KindAtom, KindEnd, KindDelete, KindErase: the chain head after the record; KindRollback: the run's head when it began (h(Seq-1))
	Body []byte     // KindAtom: the compressed body (DecodeAtomBody reads it); KindIntent, KindCert opened from a seal: its compressed body

	Reason string // KindFail, KindDelete, KindErase, KindEraseKey

	// KindEraseKey: the memory key whose values were erased and the data
	// keys that sealed them; Final is the run's head at Seq, Head the
	// erasure's link over Payload, Deleted its time (erasekey.go).
	Key    string
	KeyNos []uint64

	// KindDelete: the run's final head (the end's link, Seq-1), when the
	// run was deleted (unix nanoseconds), and the deletion's link is Head,
	// over Payload (deleted | reason) from Final; Note is the chain
	// checkpoint of (Run, Seq, Head), parsed into Checkpoint. KindErase:
	// the same fields, Final the link it follows (the end's, or a delete
	// record's), Deleted the time of the erasure, and Payload EraseMark |
	// erased | reason (a copy: the mark is not stored).
	Final   chain.Hash
	Deleted int64

	// KindRollback: the seq the run is rolled back to, when the rollback
	// began (unix nanoseconds), and what it undoes, newest first (Seq is
	// the seq of the atom that completes it); in an encrypted store Undo
	// is nil unless the undo list was opened (Opened).
	To      uint64
	Started int64
	Undo    []Undo

	// KindIntent and KindCert, when the Decoder reads the ledger's records:
	// the decompressed body and what it holds (Args and Result alias Plain).
	Plain  []byte
	Intent *ledger.Intent
	Cert   *ledger.Certificate

	// In an encrypted store (seal.go): Stored is the sealed payload as
	// the log holds it (KindAtom: the body, which the chain links it
	// over; KindIntent, KindCert: the record after its kind; KindEnd: the
	// result; KindFail: the reason). Opened says the Decoder opened it
	// (Body, Plain, Result and Reason are then the plaintext's, and Tail,
	// of an atom, the digests and seal sealed with its body); Erased, that
	// its data key was erased (crypto-shredding), so it can never be.
	// Unopened, Body, Plain, Intent, Cert, Result and Reason are nil.
	Stored  []byte
	Tail    []byte
	Opened  bool
	Erased  bool  // KindIntent, KindCert: Run is then the run whose erased key sealed it
	SealErr error // KindAtom, with Decoder.KeepUnopened: why its body did not open

	// KindStreamChunk, KindStreamAbandon (stream.go): the chunk's stream,
	// the attempt of the atom at Seq that appended it (an abandon record:
	// the last attempt it abandons), its offset in the stream and its data
	// (nil if sealed and not opened: Stored holds it).
	Stream  string
	Attempt uint64
	Offset  uint64
	Chunk   []byte

	Note []byte // KindCheckpoint, KindStoreHead, KindDelete and KindErase: the chain's encoding
	// KindWait, KindEvent, KindWake (wait.go): their fields; Final is the
	// run's head at Seq, Head the record's link over Payload.
	Wait *WaitFields

	// Checkpoint is the parsed note of a KindCheckpoint, KindDelete or KindErase
	// (signatures are not checked here).
	Checkpoint chain.Checkpoint
}

// Decoder decodes log records. The zero Decoder decodes every kind's
// fields but leaves the ledger's records compressed (Plain, Intent and
// Cert nil).
type Decoder struct {
	// Comp decompresses the ledger's records and charges atom bodies to
	// its budget. Nil: no decompression, no charge.
	Comp Compressor
	// Ledger asks for intents and certificates decompressed and decoded
	// (Comp must be set).
	Ledger bool
	// DictFile names the file of dictionary id, so that a record
	// compressed with a dictionary the store lacks is reported as that
	// missing file. Nil: reported as the record's damage.
	DictFile func(id uint32) string
	// Dicts are the dictionaries the store holds (for DictFile).
	Dicts *frame.Dicts
	// LoadDict, if set, loads dictionary id into Dicts when a record needs
	// one that Dicts lacks: for a reader beside a live writer, which can
	// train a dictionary after the reader loaded the store's (the writer
	// makes it durable before any record uses it). If it fails, the record
	// is reported as needing the missing file.
	LoadDict func(id uint32) error
	// Sealed says the store is encrypted (seal.go): its payloads must be
	// sealed. Sealer, if set, opens them; without it (verify without the
	// keys) they are left sealed, in Record.Stored.
	Sealed bool
	Sealer *Sealer
	// KeepUnopened returns an atom whose sealed body does not open (it was
	// changed) as a record, its SealErr set, instead of an error: for
	// verify, which still checks the atom's link over its stored bytes.
	KeepUnopened bool

	// Skip, if set, is asked of each record a Cursor reads before it is
	// decoded, with its kind and, for the kinds that begin with one (run,
	// atom, fail), its run id (a slice of the record: compare, don't
	// keep); nil for the others. A record it skips is not decoded and not
	// returned: a scan for one run's atoms pays nothing for the others'.
	Skip func(k Kind, run []byte) bool

	// ReuseLedger makes Decode decompress intents and certificates into
	// one buffer it reuses, and decode them into one Intent and one
	// Certificate it reuses: Plain, Intent and Cert (and their slices) are
	// then valid only until the next Decode; their strings stay valid. For
	// a reader that lets go of them before it reads on.
	ReuseLedger bool

	ledgerScope string // the scope of the key that sealed the last intent or certificate opened
	ledgerBuf   []byte // with ReuseLedger: the buffer the ledger's records decompress into
	// With ReuseLedger: the Intent and Certificate decoded into, and the
	// run ids and tool names they hold, interned (at most maxInterned).
	intent   ledger.Intent
	cert     ledger.Certificate
	strs     map[string]string
	internFn func([]byte) string
	// recent holds strings interned lately, by internSlot: an intent, its
	// certificate and the next of the run name the same run and tools,
	// found without hashing (a map lookup per name was 2% of verify).
	recent [8]string
}

// maxInterned bounds the strings a Decoder with ReuseLedger interns: a
// store of more runs than this decodes the others' run ids as new strings.
const maxInterned = 4096

// intern returns string(b), the same string each time while the table has
// room.
func (d *Decoder) intern(b []byte) string {
	slot := &d.recent[internSlot(b)]
	if *slot == string(b) { // no allocation: compared, not converted
		return *slot
	}
	s, ok := d.strs[string(b)] // no allocation: the key is not kept
	if !ok {
		s = string(b)
		if len(d.strs) < maxInterned {
			if d.strs == nil {
				d.strs = make(map[string]string)
			}
			d.strs[s] = s
		}
	}
	*slot = s
	return s
}

// internSlot is the slot of Decoder.recent that b's string may be in:
// from its length and its last byte, which tell apart run ids numbered
// alike and tools named alike.
func internSlot(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	return (len(b) ^ int(b[len(b)-1])) & 7
}

// MaxSealOverhead is the most sealing adds to a payload: seal.Overhead and
// the key number's varint.
const MaxSealOverhead = seal.Overhead + 10

// sealDamage reports a sealed payload of r that does not open: as the key
// table's damage when it names a key the table never had.
func (d *Decoder) sealDamage(file string, r *Record, what string, err error) error {
	if errors.Is(err, seal.ErrNoKey) && d.Sealer != nil && d.Sealer.KeysFile != "" {
		return &CorruptionError{File: d.Sealer.KeysFile, Run: r.Run, Seq: r.Seq,
			Reason: fmt.Sprintf("the %s of the record at %s offset %d was sealed with a data key this table lacks: it is older than the log, or not this store's (%v)", what, file, r.Pos.Offset, err), Err: err}
	}
	return &CorruptionError{File: file, Offset: r.Pos.Offset, Run: r.Run, Seq: r.Seq, Reason: fmt.Sprintf("%s: %v", what, err), Err: err}
}

// openAtom handles the sealed body of atom r in an encrypted store: opens
// it with d.Sealer, or leaves it sealed (no Sealer, or an erased key).
func (d *Decoder) openAtom(file string, r *Record) error {
	r.Stored, r.Body = r.Body, nil
	if !seal.IsSealed(r.Stored) {
		return d.sealDamage(file, r, "atom body", errors.New("not sealed, in an encrypted store"))
	}
	if d.Sealer == nil {
		return nil
	}
	comp, tail, err := d.Sealer.OpenAtomBody(nil, r.Stored, r.Run, r.Seq)
	switch {
	case errors.Is(err, seal.ErrErased):
		r.Erased = true
		return nil
	case err != nil && d.KeepUnopened && !errors.Is(err, seal.ErrNoKey):
		r.SealErr = err
		return nil
	case err != nil:
		return d.sealDamage(file, r, "atom body", err)
	}
	r.Body, r.Tail, r.Opened = comp, tail, true
	return nil
}

// openField opens r.Stored, a sealed end result or fail reason, if d can:
// nil (and r.Opened false) if it cannot.
func (d *Decoder) openField(file string, r *Record, what string) ([]byte, error) {
	if !seal.IsSealed(r.Stored) {
		return nil, d.sealDamage(file, r, what, errors.New("not sealed, in an encrypted store"))
	}
	if d.Sealer == nil {
		return nil, nil
	}
	plain, err := d.Sealer.Open(nil, r.Stored, r.Kind, r.Run, r.Seq)
	switch {
	case errors.Is(err, seal.ErrErased):
		r.Erased = true
		return nil, nil
	case err != nil:
		return nil, d.sealDamage(file, r, what, err)
	}
	r.Opened = true
	if plain == nil {
		plain = []byte{}
	}
	return plain, nil
}

// openLedger opens r.Stored, a sealed intent or certificate, into its
// compressed body (nil, with a nil error, if its key was erased).
func (d *Decoder) openLedger(file string, r *Record) ([]byte, error) {
	comp, scope, err := d.Sealer.openLedger(nil, r.Stored, r.Kind)
	switch {
	case errors.Is(err, seal.ErrErased):
		// Its run is the scope of the erased key (the records of actions
		// with explicit keys are sealed with the store's key, never erased).
		r.Erased, r.Run = true, scope
		return nil, nil
	case err != nil:
		return nil, d.sealDamage(file, r, r.Kind.String(), err)
	}
	d.ledgerScope, r.Opened, r.Body = scope, true, comp
	return comp, nil
}

// Decode decodes raw, the record at pos in the segment file named file.
// r's slices alias raw. It never panics: damage is a *CorruptionError.
func (d *Decoder) Decode(raw []byte, pos wal.Pos, file string, r *Record) error {
	return d.decode(raw, pos, file, r, nil)
}

// decode is Decode with the run ids of the kinds that begin with one
// interned in names (nil: each a new string), which notes the entry of
// r.Run (runNames.cur).
func (d *Decoder) decode(raw []byte, pos wal.Pos, file string, r *Record, names *runNames) error {
	// Cleared in place, then set: a composite literal assigned whole is
	// built beside r and copied into it (616 bytes, twice, per record).
	*r = Record{}
	r.Pos, r.Raw = pos, raw
	if len(raw) == 0 {
		return &CorruptionError{File: file, Offset: pos.Offset, Reason: "empty record"}
	}
	r.Kind = Kind(raw[0])
	f := Fields{b: raw, off: 1}
	switch r.Kind {
	case KindRun:
		r.Run = names.runID(&f, true)
		copy(r.Nonce[:], f.Fixed("nonce", len(r.Nonce)))
		r.Created = f.Varint("created")
		f.Done("run record")
	case KindAtom:
		r.Run = names.runID(&f, true)
		r.Seq = f.Uvarint("seq")
		r.Head = f.Hash("head")
		if f.err == nil && r.Seq == 0 {
			f.Fail("seq 0 is not an atom")
		}
		r.Body = f.Rest()
		if f.err == nil && d.Sealed {
			if err := d.openAtom(file, r); err != nil {
				return err
			}
		}
		if f.err == nil && d.Comp != nil && r.Body != nil {
			if err := d.Comp.Charge(r.Body); err != nil {
				return d.damage(file, r, "atom body", err)
			}
		}
	case KindFail:
		r.Run = names.runID(&f, true)
		r.Seq = f.Uvarint("seq")
		if !d.Sealed {
			r.Reason = string(f.Bytes("reason", MaxFailReason))
		} else if r.Stored = f.Bytes("reason", MaxFailReason+MaxSealOverhead); f.err == nil {
			reason, err := d.openField(file, r, "fail reason")
			if err != nil {
				return err
			}
			r.Reason = string(reason)
		}
		f.Done("fail record")
	case KindEnd:
		r.Run = names.runID(&f, true)
		r.Seq = f.Uvarint("seq")
		r.Head = f.Hash("head")
		start := f.off
		r.Status = f.Byte("status")
		if f.err == nil && (r.Status < EndCompleted || r.Status > EndCancelled) {
			f.Fail("unknown status %d", r.Status)
		}
		r.Ended = f.Varint("ended")
		if !d.Sealed {
			r.Result = f.Bytes("result", MaxEndResult)
		} else {
			r.Stored = f.Bytes("result", MaxEndResult+MaxSealOverhead)
		}
		if f.err == nil && r.Seq == 0 {
			f.Fail("seq 0 cannot end a run (an end follows the run's creation)")
		}
		if f.Done("end record") == nil {
			r.Payload = raw[start:]
			if d.Sealed {
				result, err := d.openField(file, r, "end result")
				if err != nil {
					return err
				}
				r.Result = result
			}
		}
	case KindFork:
		r.Run = names.runID(&f, true)
		copy(r.Nonce[:], f.Fixed("nonce", len(r.Nonce)))
		r.Created = f.Varint("created")
		r.Parent = names.runID(&f, false)
		r.Seq = f.Uvarint("fork point")
		r.ParentHead = f.Hash("parent head")
		if f.err == nil && r.Parent == r.Run {
			f.Fail("run %q forked from itself", r.Run)
		}
		f.Done("fork record")
	case KindDelete, KindErase:
		r.Run = names.runID(&f, true)
		r.Seq = f.Uvarint("seq")
		r.Final = f.Hash("final head")
		r.Head = f.Hash("head")
		start := f.off
		r.Deleted = f.Varint("deleted")
		r.Reason = string(f.Bytes("reason", MaxDeleteReason))
		if f.err == nil && r.Seq < 2 {
			f.Fail("seq %d cannot delete a run (a deletion follows the run's end)", r.Seq)
		}
		if f.err == nil {
			r.Payload = raw[start:f.off]
			if r.Kind == KindErase {
				r.Payload = append([]byte(EraseMark), r.Payload...)
			}
			decodeLinkNote(&f, r, true, "deletion")
		}
	case KindEraseKey:
		decodeEraseKey(&f, raw, r)
	case KindWait, KindEvent, KindWake:
		decodeWait(&f, raw, r, names)
	case KindRollback:
		decodeRollbackHeader(&f, r)
		if f.err != nil || !d.Sealed {
			decodeUndo(&f, r)
			break
		}
		r.Stored = f.Rest()
		plain, err := d.openField(file, r, "rollback's undo list")
		if err != nil {
			return err
		}
		if plain != nil {
			g := Fields{b: plain}
			if decodeUndo(&g, r); g.err != nil {
				return d.damage(file, r, "rollback's undo list", fmt.Errorf("%w: %v", ErrCorrupt, g.err))
			}
		}
	case KindIntent, KindCert:
		compressed := raw[1:]
		if d.Sealed {
			r.Stored = compressed
			if !d.Ledger || d.Comp == nil || d.Sealer == nil {
				if !seal.IsSealed(compressed) {
					return &CorruptionError{File: file, Offset: pos.Offset, Reason: fmt.Sprintf("%s record: not sealed, in an encrypted store", r.Kind)}
				}
				return nil
			}
			var err error
			if compressed, err = d.openLedger(file, r); compressed == nil {
				return err
			}
		}
		if !d.Ledger || d.Comp == nil {
			return nil
		}
		var dst []byte
		if d.ReuseLedger {
			dst = d.ledgerBuf[:0]
		}
		plain, err := d.decompress(dst, compressed)
		if d.ReuseLedger && cap(plain) > cap(d.ledgerBuf) {
			d.ledgerBuf = plain[:0]
		}
		if err != nil {
			return d.damage(file, r, r.Kind.String(), err)
		}
		r.Plain = plain
		switch {
		case d.ReuseLedger && r.Kind == KindIntent:
			if d.internFn == nil {
				d.internFn = d.intern
			}
			if err = ledger.DecodeIntentTo(&d.intent, plain, d.internFn); err == nil {
				r.Intent = &d.intent
				r.Run, r.Seq = r.Intent.RunID, r.Intent.Seq
			}
		case d.ReuseLedger:
			if d.internFn == nil {
				d.internFn = d.intern
			}
			if err = ledger.DecodeCertificateTo(&d.cert, plain, d.internFn); err == nil {
				r.Cert = &d.cert
				r.Run, r.Seq = r.Cert.RunID, r.Cert.Seq
			}
		case r.Kind == KindIntent:
			r.Intent, err = ledger.DecodeIntentView(plain)
			if err == nil {
				r.Run, r.Seq = r.Intent.RunID, r.Intent.Seq
			}
		default:
			r.Cert, err = ledger.DecodeCertificateView(plain)
			if err == nil {
				r.Run, r.Seq = r.Cert.RunID, r.Cert.Seq
			}
		}
		if err != nil {
			return &CorruptionError{File: file, Offset: pos.Offset, Reason: fmt.Sprintf("%s record: %v", r.Kind, err), Err: err}
		}
		if d.Sealed && r.Run != d.ledgerScope {
			switch {
			case d.ledgerScope != "":
				return &CorruptionError{File: file, Offset: pos.Offset, Run: r.Run, Seq: r.Seq,
					Reason: fmt.Sprintf("%s record: sealed with the data key of run %q, not its own", r.Kind, d.ledgerScope)}
			case r.Intent != nil && !r.Intent.ExplicitKey():
				return &CorruptionError{File: file, Offset: pos.Offset, Run: r.Run, Seq: r.Seq,
					Reason: "intent record: an action with a default key sealed with the store's data key, not its run's"}
			}
		}
		return nil
	case KindStreamChunk, KindStreamAbandon:
		if err := d.decodeStream(&f, file, r, names); err != nil {
			return err
		}
	case KindCheckpoint:
		r.Note = raw[1:]
		c, err := chain.ParseCheckpoint(r.Note)
		if err != nil {
			return &CorruptionError{File: file, Offset: pos.Offset, Reason: fmt.Sprintf("checkpoint record: %v", err), Err: err}
		}
		r.Checkpoint, r.Run, r.Seq = c, c.RunID, c.Seq
		return nil
	case KindStoreHead:
		r.Note = raw[1:]
		if _, err := chain.ParseStoreHead(r.Note); err != nil {
			return &CorruptionError{File: file, Offset: pos.Offset, Reason: fmt.Sprintf("store-head record: %v", err), Err: err}
		}
		return nil
	default:
		return &CorruptionError{File: file, Offset: pos.Offset, Reason: fmt.Sprintf("unknown record kind %d", raw[0])}
	}
	if f.err != nil {
		return &CorruptionError{File: file, Offset: pos.Offset, Run: r.Run, Seq: r.Seq,
			Reason: fmt.Sprintf("%s record: %v", r.Kind, f.err), Err: f.err}
	}
	return nil
}

// damage reports a record whose compressed part does not decompress: as
// the missing dictionary file when that is why, or as the record.
func (d *Decoder) damage(file string, r *Record, what string, err error) error {
	compressed := r.Raw[1:]
	if r.Kind == KindAtom {
		compressed = r.Body
	}
	if name := d.missingDict(compressed); name != "" {
		return &CorruptionError{File: name, Reason: fmt.Sprintf("missing: the %s at %v needs it", what, r.Pos), Err: err}
	}
	return &CorruptionError{File: file, Offset: r.Pos.Offset, Run: r.Run, Seq: r.Seq, Reason: fmt.Sprintf("%s: %v", what, err), Err: err}
}

// decompress decompresses a record's compressed part, loading (LoadDict)
// the dictionary it needs once if Dicts lacks it.
func (d *Decoder) decompress(dst, compressed []byte) ([]byte, error) {
	plain, err := d.Comp.Decompress(dst, compressed)
	if err != nil && d.LoadDict != nil {
		if id, ok := d.absentDict(compressed); ok && d.LoadDict(id) == nil {
			return d.Comp.Decompress(dst, compressed)
		}
	}
	return plain, err
}

// missingDict names the dictionary file a compressed record needs when
// the store lacks it, or "".
func (d *Decoder) missingDict(compressed []byte) string {
	if d.DictFile == nil {
		return ""
	}
	if id, ok := d.absentDict(compressed); ok {
		return d.DictFile(id)
	}
	return ""
}

// absentDict returns the dictionary a compressed record names when Dicts
// lacks it.
func (d *Decoder) absentDict(compressed []byte) (uint32, bool) {
	if d.Dicts == nil || len(compressed) < 2 {
		return 0, false
	}
	id, n := binary.Uvarint(compressed[1:])
	if n <= 0 || id == 0 || id > 0xffffffff {
		return 0, false
	}
	if _, ok := d.Dicts.Get(uint32(id)); ok {
		return 0, false
	}
	return uint32(id), true
}

// peek returns the kind of raw and, for the kinds that begin with one,
// its run id and the uvarint after it (the atom's or fail's seq), without
// allocating; ok is false if they do not parse (Decode then says why).
func peek(raw []byte) (k Kind, run []byte, seq uint64, ok bool) {
	if len(raw) == 0 {
		return 0, nil, 0, false
	}
	k = Kind(raw[0])
	switch k {
	case KindRun, KindAtom, KindFail, KindEnd, KindFork, KindDelete, KindErase, KindEraseKey, KindRollback,
		KindWait, KindEvent, KindWake:
	case KindStreamChunk, KindStreamAbandon:
	default:
		return k, nil, 0, true
	}
	n, w := binary.Uvarint(raw[1:])
	if w <= 0 || n > MaxRunIDLen || uint64(len(raw)-1-w) < n {
		return k, nil, 0, false
	}
	run = raw[1+w : 1+w+int(n)]
	if k == KindAtom || k == KindFail || k == KindEnd || k.Deletes() || k == KindEraseKey || k == KindRollback ||
		k == KindWait || k == KindEvent || k == KindWake || k == KindStreamChunk || k == KindStreamAbandon {
		var w2 int
		seq, w2 = binary.Uvarint(raw[1+w+int(n):])
		if w2 <= 0 {
			return k, nil, 0, false
		}
	}
	return k, run, seq, true
}

// AtomBody is an atom's decompressed body.
type AtomBody struct {
	Actions []ledger.Fingerprint // the atom's actions, in call order
	Delta   []byte               // frame.AppendDelta's encoding; aliases the input
	Exts    []AtomExt            // extensions (body version 2), tags ascending; alias the input
}

// DecodeAtomBody decodes plain, a decompressed atom body.
func DecodeAtomBody(plain []byte) (*AtomBody, error) {
	a := &AtomBody{}
	if err := a.decode(plain); err != nil {
		return nil, err
	}
	return a, nil
}

// decode decodes plain into a, reusing a.Actions' array.
func (a *AtomBody) decode(plain []byte) error {
	f := Fields{b: plain}
	v := f.Byte("version")
	if f.err == nil && v != AtomBodyVersion && v != AtomBodyVersionExt {
		f.Fail("unknown atom body version %d", v)
	}
	n := f.Uvarint("action count")
	if f.err == nil && (n > MaxActionsPerAtom || n*32 > uint64(len(plain)-f.off)) {
		f.Fail("action count %d exceeds the record", n)
	}
	if f.err != nil {
		return fmt.Errorf("atom body: %w", f.err)
	}
	*a = AtomBody{Actions: slices.Grow(a.Actions[:0], int(n))[:n]}
	for i := range a.Actions {
		a.Actions[i] = ledger.Fingerprint(f.Hash("fingerprint"))
	}
	if v == AtomBodyVersionExt {
		if a.Exts = decodeAtomExts(&f); f.err != nil {
			return fmt.Errorf("atom body: %w", f.err)
		}
	}
	a.Delta = plain[f.off:]
	return nil
}

// DecodeAtom decompresses and decodes the body of atom record r (r.Kind
// must be KindAtom) into dst's buffer (nil: a new one); the body's slices
// alias the result. The error is a *CorruptionError of file.
func (d *Decoder) DecodeAtom(dst []byte, r *Record, file string) ([]byte, *AtomBody, error) {
	body := &AtomBody{}
	plain, err := d.DecodeAtomTo(dst, r, file, body)
	if err != nil {
		return plain, nil, err
	}
	return plain, body, nil
}

// DecodeAtomTo is DecodeAtom into body, whose Actions array it reuses
// (body's slices are valid until the next call with body): for a reader
// that decodes one atom after another and keeps none of them.
func (d *Decoder) DecodeAtomTo(dst []byte, r *Record, file string, body *AtomBody) ([]byte, error) {
	if r.Kind != KindAtom {
		return dst, errors.New("record: DecodeAtom of a " + r.Kind.String() + " record")
	}
	plain, err := d.decompress(dst[:0], r.Body)
	if err != nil {
		return dst, d.damage(file, r, "atom body", err)
	}
	if err := body.decode(plain); err != nil {
		return plain, &CorruptionError{File: file, Offset: r.Pos.Offset, Run: r.Run, Seq: r.Seq, Reason: err.Error(), Err: err}
	}
	return plain, nil
}

// Results returns the certified result of the action whose fingerprint is
// fp: the Result of its done or resolved certificate. ApplyAtom asks it for
// each certified result an atom's delta refers to (frame.Delta.ReferResults).
// An action without such a certificate is an error that matches
// ErrNoCertificate, or a *CorruptionError where the certificate is damaged;
// any other error (an I/O error, say) is not the atom's damage. The bytes
// are copied before it is called again.
type Results func(fp ledger.Fingerprint) ([]byte, error)

// ErrNoCertificate is what a Results returns, wrapped, for an action that
// has no done or resolved certificate: an atom whose delta refers to its
// result is damaged.
var ErrNoCertificate = errors.New("record: no certificate for the action")

// ApplyAtom decompresses the body of atom record a (its Run, Seq, Body and
// Pos are read) and applies its delta to f. A delta that refers to
// certified results (frame.Delta.ReferResults) has them resolved first:
// reference i names the atom's action i, the i-th fingerprint of its body,
// and results gives that action's certified result; so a delta may refer
// to the result of any action its atom lists, and to nothing else. f is
// unchanged on error.
//
// Damage is a *CorruptionError of file(a.Pos.Segment), the file a is in
// (asked only for an error), at a.Pos's offset when it is known, naming
// the run and seq: a body or delta that does not decode, a
// delta that does not apply, a reference to an action the atom does not
// list or to one without a certificate. An error of results that is not
// damage is returned wrapped, naming the run, seq and action.
func ApplyAtom(comp Compressor, f *frame.Frame, a *Record, file func(seg uint64) string, results Results) error {
	damage := func(reason string, err error) error {
		return &CorruptionError{File: file(a.Pos.Segment), Offset: a.Pos.Offset, Run: a.Run, Seq: a.Seq, Reason: reason, Err: err}
	}
	plain, err := comp.Decompress(nil, a.Body)
	if err != nil {
		return damage(err.Error(), err)
	}
	body, err := DecodeAtomBody(plain)
	if err != nil {
		return damage(err.Error(), err)
	}
	d, err := frame.DecodeDelta(body.Delta)
	if err != nil {
		return damage(err.Error(), err)
	}
	var failed error // the first error of results that is not damage
	resolve := func(i int) ([]byte, error) {
		if i >= len(body.Actions) {
			return nil, fmt.Errorf("%w: the atom lists %d actions", ErrNoCertificate, len(body.Actions))
		}
		if results == nil {
			failed = fmt.Errorf("record: run %q seq %d: its delta refers to certified results, and no certificates were given to resolve them", a.Run, a.Seq)
			return nil, failed
		}
		fp := body.Actions[i]
		r, err := results(fp)
		if err != nil && !errors.Is(err, ErrNoCertificate) && !errors.Is(err, ErrCorrupt) && failed == nil {
			failed = fmt.Errorf("record: run %q seq %d: the certified result of action %d (%x) its delta refers to: %w",
				a.Run, a.Seq, i, fp[:8], err)
		}
		return r, err
	}
	if err := f.ApplyWith(d, resolve); err != nil {
		if failed != nil {
			return failed
		}
		if errors.Is(err, frame.ErrUnresolved) {
			return damage("stored delta refers to a certified result it cannot have: "+err.Error(), err)
		}
		return damage("stored delta does not apply: "+err.Error(), err)
	}
	return nil
}
