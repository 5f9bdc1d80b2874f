package offline

// Reading one atom, its delta and its actions from the log: Inspector.Atom
// and engine's Run.Atom.

import (
	"context"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

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
	// Retry, for an action with a retry policy (ledger.RetryPolicy), is
	// the policy and what the log holds of its attempts; nil otherwise.
	Retry *RetryInfo
}

// RetryInfo is what the log holds of the attempts of an action with a
// retry policy: its latest intent and its latest certificate.
type RetryInfo struct {
	// Policy is the recorded policy (Retryable is nil: it is not recorded).
	Policy ledger.RetryPolicy
	// Attempts is the number of the latest attempt recorded (an attempt
	// in doubt included).
	Attempts uint32
	// First is the start of the first attempt, the deadline's origin.
	First time.Time
	// NextAttempt is the earliest start of the next attempt, when the
	// latest record is a failure with a retry scheduled; zero otherwise.
	NextAttempt time.Time
	// GaveUp says why the action was given up (ledger.GiveUp), or
	// NotGivenUp.
	GaveUp ledger.GiveUp
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
	// Delta is the atom's delta as Apply sees it: a message text or tool
	// output that the log stores as a reference to one of the atom's
	// certified results holds that result, unless the result in Actions
	// was cut (ResultSize): then the reference stays (frame.Op.Refs).
	Delta *frame.Delta
	// Actions are the actions the atom performed, in call order.
	Actions []ActionInfo
	// Sent are the messages the atom sent, in the order sent: the i-th
	// is message (Run, Seq, i). Consumed are the messages it consumed, in
	// the order received. Both nil for an atom without.
	Sent     []record.SentMessage
	Consumed []record.MessageID
	// Base is the seq whose state the atom read: seq-1, or for a branch
	// (engine.Run.Branch) its base, the atom DAG's edge. Branch is the
	// branch's name ("" for an atom of Begin) and Reads what it declared
	// it reads (record.BranchBase).
	Base   uint64
	Branch string
	Reads  []record.StateKey
	// Opened holds the sealed memory values of Delta (the values of
	// erasable memory keys, engine.Options.ErasableKeys) opened with the
	// keyring, one entry per op that carries any, in op order; nil when
	// Delta holds none. Delta itself keeps them sealed, as stored.
	Opened []OpenedOp
}

// OpenedOp is what the keyring opened of one op of an atom's delta that
// carries sealed memory values: a set_sealed op, or a replace_frame op
// whose frame holds sealed values (a rollback's).
type OpenedOp struct {
	Op int // the op's index in Delta.Ops()
	// Value is a set_sealed op's value; nil when it was erased.
	Value []byte
	// Frame is a replace_frame op's frame with its sealed values opened
	// into Memory (erased ones left out).
	Frame *frame.Frame
	// Erased names the memory keys whose values were erased (their data
	// keys destroyed by DB.EraseKey), sorted: a set_sealed op's key, or
	// keys of a replace_frame op's frame. Such a value can never be
	// opened, and is no damage.
	Erased []string
}

// readAt reads and decodes the record at pos (the ledger's records too)
// and checks it is of kind; the record is the caller's.
func readAt(dec *record.Decoder, log *wal.Log, file string, pos wal.Pos, kind record.Kind) (*record.Record, error) {
	raw, err := log.ReadAt(pos)
	if err != nil {
		return nil, logDamage(err, fmt.Sprintf("read %s at %v", kind, pos))
	}
	r := &record.Record{}
	if err := dec.Decode(raw, pos, file, r); err != nil {
		return nil, err
	}
	if r.Kind != kind {
		return nil, &CorruptionError{File: file, Offset: pos.Offset, Run: r.Run, Seq: r.Seq,
			Reason: fmt.Sprintf("the record is a %s, not the %s the index names", r.Kind, kind)}
	}
	return r, nil
}

// readAtomAt reads the atom record at pos and checks it is seq of run.
func readAtomAt(db *store, log *wal.Log, pos wal.Pos, run string, seq uint64) (*record.Record, error) {
	a, err := readAt(db.decoder(false), log, db.segmentFile(pos.Segment), pos, record.KindAtom)
	if err != nil {
		return nil, err
	}
	if a.Run != run || a.Seq != seq {
		return nil, &CorruptionError{File: db.segmentFile(pos.Segment), Offset: pos.Offset, Run: run, Seq: seq,
			Reason: fmt.Sprintf("the record at %v is atom %d of run %q, not this atom", pos, a.Seq, a.Run)}
	}
	return a, nil
}

// SetIntent fills in info from the action's intent, at pos in the log.
func (info *ActionInfo) SetIntent(i *ledger.Intent, pos wal.Pos) {
	info.Run, info.Seq, info.Index = i.RunID, i.Seq, i.Index
	info.Tool, info.Args, info.Key, info.Idempotent = i.Tool, i.Args, i.Key, i.Idempotent
	info.ArgsSize = len(i.Args)
	info.IntentPos = pos
	if info.Status == ledger.StatusNone {
		info.Status = ledger.StatusIntent
	}
	if p := i.Retry; p != nil {
		pol := *p
		pol.Retryable = nil
		r := info.retry()
		r.Policy, r.First = pol, time.Unix(0, i.First)
		r.Attempts = max(r.Attempts, i.Attempt)
	}
}

func (info *ActionInfo) retry() *RetryInfo {
	if info.Retry == nil {
		info.Retry = &RetryInfo{}
	}
	return info.Retry
}

// SetCert fills in info from the action's certificate, at pos in the log.
func (info *ActionInfo) SetCert(c *ledger.Certificate, pos wal.Pos) {
	if info.IntentPos == (wal.Pos{}) {
		info.Run, info.Seq, info.Index = c.RunID, c.Seq, c.Index
	}
	info.Result, info.Err, info.CertPos = c.Result, c.Err, pos
	info.ResultSize = len(c.Result)
	// A certificate before the latest intent is an earlier attempt's
	// failure: the latest attempt has no outcome yet.
	if !pos.Less(info.IntentPos) {
		info.Status = c.Status
	} else {
		info.Status = ledger.StatusIntent
	}
	if a := c.Attempt; a != nil {
		r := info.retry()
		r.Attempts = max(r.Attempts, a.Number)
		r.First = time.Unix(0, a.First)
		if info.Status != ledger.StatusIntent {
			r.GaveUp = a.GaveUp
			if a.GaveUp == ledger.NotGivenUp {
				r.NextAttempt = time.Unix(0, a.Next)
			}
		}
	}
}

// ReadAtomInfo reads the atom of run at seq, at pos in log (whose records
// comp decompresses and, in an encrypted store, sealer opens; file names a
// segment), and decodes its delta and actions, asking action for what the
// ledger knows of each fingerprint, and opens the sealed memory values of
// its delta with sealer (AtomInfo.Opened: a value whose data key was erased
// is marked erased; one that does not open otherwise, or a sealed value in
// a plaintext store, sealer nil, is damage of the atom's record).
// Inspector.Atom and engine's Run.Atom use it.
func ReadAtomInfo(comp record.Compressor, sealer *record.Sealer, log *wal.Log, file func(seg uint64) string, pos wal.Pos, run string, seq uint64,
	action func(ledger.Fingerprint) (ActionInfo, error)) (*AtomInfo, error) {
	a, err := readAt(&record.Decoder{Sealed: sealer != nil, Sealer: sealer}, log, file(pos.Segment), pos, record.KindAtom)
	if err != nil {
		return nil, err
	}
	if a.Run != run || a.Seq != seq {
		return nil, &CorruptionError{File: file(pos.Segment), Offset: pos.Offset, Run: run, Seq: seq,
			Reason: fmt.Sprintf("the record at %v is atom %d of run %q, not this atom", pos, a.Seq, a.Run)}
	}
	raw, body, err := (&record.Decoder{Comp: comp}).DecodeAtom(nil, a, file(pos.Segment))
	if err != nil {
		return nil, err
	}
	d, err := frame.DecodeDelta(body.Delta)
	if err != nil {
		return nil, &CorruptionError{File: file(pos.Segment), Offset: pos.Offset, Run: run, Seq: seq, Reason: fmt.Sprintf("atom delta: %v", err), Err: err}
	}
	sent, consumed, err := body.Messages()
	if err != nil {
		return nil, &CorruptionError{File: file(pos.Segment), Offset: pos.Offset, Run: run, Seq: seq, Reason: err.Error(), Err: err}
	}
	hdr := len(a.Raw) - len(a.Body)
	info := &AtomInfo{Run: run, Seq: seq, Head: a.Head, Pos: pos,
		Size: len(a.Raw), RawSize: hdr + len(raw), Delta: d, Sent: sent, Consumed: consumed, Base: seq - 1}
	switch bb, err := body.AtomBranch(); {
	case err != nil:
		return nil, &CorruptionError{File: file(pos.Segment), Offset: pos.Offset, Run: run, Seq: seq, Reason: fmt.Sprintf("atom: %v", err), Err: err}
	case bb != nil:
		info.Base, info.Branch, info.Reads = bb.Base, bb.Branch, bb.Reads
	}
	for _, fp := range body.Actions {
		ai, err := action(fp)
		if err != nil {
			return nil, err
		}
		info.Actions = append(info.Actions, ai)
	}
	if err := info.resolveRefs(); err != nil {
		return nil, &CorruptionError{File: file(pos.Segment), Offset: pos.Offset, Run: run, Seq: seq, Reason: fmt.Sprintf("atom delta: %v", err), Err: err}
	}
	if info.Opened, err = openOps(sealer, info.Delta, func(key string, err error) error {
		return &CorruptionError{File: file(pos.Segment), Offset: pos.Offset, Run: run, Seq: seq, Err: err,
			Reason: "atom delta: " + sealedDamage(key, err)}
	}); err != nil {
		return nil, err
	}
	return info, nil
}

// openOps opens the sealed memory values of d's ops with s (openValue,
// openFrame): the AtomInfo.Opened of d. damage(key, err) names where a
// value that does not open is.
func openOps(s *record.Sealer, d *frame.Delta, damage func(key string, err error) error) ([]OpenedOp, error) {
	var out []OpenedOp
	for i, op := range d.Ops() {
		switch {
		case op.Kind == "set_sealed":
			v, erased, err := openValue(s, op.Key, op.Value)
			if err != nil {
				return nil, damage(op.Key, err)
			}
			o := OpenedOp{Op: i, Value: v}
			if erased {
				o.Erased = []string{op.Key}
			}
			out = append(out, o)
		case op.Frame != nil && len(op.Frame.Sealed) > 0:
			f, erased, err := OpenFrame(s, op.Frame, damage)
			if err != nil {
				return nil, err
			}
			out = append(out, OpenedOp{Op: i, Frame: f, Erased: erased})
		}
	}
	return out, nil
}

// resolveRefs replaces info.Delta, as stored, by the delta Apply sees: the
// certified results it refers to (frame.Delta.ReferResults) taken from its
// actions' certificates. A result cut to bound memory (shorter than its
// ResultSize) is not the text: the delta then keeps its references, which
// its ops name (frame.Op.Refs). A reference to an action the atom does not
// list, or to one without a done or resolved certificate, is an error.
func (info *AtomInfo) resolveRefs() error {
	refs := info.Delta.Refs()
	for _, i := range refs {
		if i >= len(info.Actions) {
			return fmt.Errorf("%w: it refers to certified result %d; the atom lists %d actions", record.ErrNoCertificate, i, len(info.Actions))
		}
		if a := info.Actions[i]; a.Status != ledger.StatusDone && a.Status != ledger.StatusResolved {
			return fmt.Errorf("%w: it refers to the result of action %d (%x), which is %s", record.ErrNoCertificate, i, a.Fingerprint[:8], a.Status)
		}
		if a := info.Actions[i]; len(a.Result) < a.ResultSize {
			return nil // cut: the references stay
		}
	}
	if len(refs) == 0 {
		return nil
	}
	d, err := info.Delta.Resolve(func(i int) ([]byte, error) { return info.Actions[i].Result, nil })
	if err != nil {
		return err
	}
	info.Delta = d
	return nil
}

func (in *Inspector) atomPos(run string, seq uint64) (wal.Pos, error) {
	r := in.runs[run]
	if r == nil {
		return wal.Pos{}, fmt.Errorf("engine: store %s has no run %q", in.st.db.dir, run)
	}
	if seq <= r.base || seq > r.base+uint64(len(r.atoms)) {
		return wal.Pos{}, fmt.Errorf("%w: run %q seq %d: its atoms are %d..%d", ErrSeqOutOfRange, run, seq, r.base+1, r.base+uint64(len(r.atoms)))
	}
	return r.atoms[seq-r.base-1], nil
}

// Atom returns the decoded content of atom seq of run: its delta and its
// actions with their intents and certificates. The actions' args and
// results hold at most 64 MiB in all; past that they are cut (see
// ActionInfo.ResultSize).
func (in *Inspector) Atom(ctx context.Context, run string, seq uint64) (*AtomInfo, error) {
	return in.atom(ctx, run, seq, &valueClip{left: atomBytes})
}

// atom is Atom with the actions' values cut by clip, which the caller may
// share among several atoms (Diff does).
func (in *Inspector) atom(ctx context.Context, run string, seq uint64, clip *valueClip) (*AtomInfo, error) {
	pos, err := in.atomPos(run, seq)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return ReadAtomInfo(in.st.db.comp, in.st.db.sealer, in.st.log, in.st.db.segmentFile, pos, run, seq, func(fp ledger.Fingerprint) (ActionInfo, error) {
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
		r, err := readAt(in.st.db.decoder(true), in.st.log, in.st.db.segmentFile(a.intentPos.Segment), a.intentPos, record.KindIntent)
		if err != nil {
			return info, err
		}
		info.SetIntent(r.Intent, a.intentPos)
	}
	if a.hasCert {
		r, err := readAt(in.st.db.decoder(true), in.st.log, in.st.db.segmentFile(a.certPos.Segment), a.certPos, record.KindCert)
		if err != nil {
			return info, err
		}
		info.SetCert(r.Cert, a.certPos)
	}
	return info, nil
}
