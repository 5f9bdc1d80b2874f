package chain

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"
)

// RecentHeads is how many recent heads each run keeps, so a checkpoint that
// arrives after later records of its run can still be compared.
const RecentHeads = 1024

// Batching of events sent to a worker goroutine.
const (
	batchEvents = 512
	batchBytes  = 256 << 10
)

// VerifyOptions configures a Verifier. The zero value checks the chains and
// the internal consistency of checkpoints only (see doc.go, Caveats).
type VerifyOptions struct {
	// Key is the keyed-mode secret (KeySize bytes); nil for unkeyed chains.
	Key []byte
	// PublicKey is the trusted checkpoint signing key, from the user (a
	// flag or file), never from the store. nil: signatures are unchecked,
	// which is reported as a warning, and no tail counts as anchored.
	//
	// With a key, signatures are required: a run whose head is more than
	// UnsignedTail atoms past its last checkpoint (or store head) signed
	// with the key fails (KindUnsignedTail), so a store rewritten by
	// someone without the signing key never passes.
	PublicKey ed25519.PublicKey
	// UnsignedTail is how many atoms a run may have past its last signed
	// checkpoint when PublicKey is set (a store whose writer is still
	// running, or crashed before its next checkpoint). 0: none.
	UnsignedTail uint64
	// Keyed says the store's STORE file records a keyed chain: without
	// Key, every run is reported as KindKeyedChain instead of as tampered.
	Keyed bool
	// Origin is the signer name the public key file gives the key
	// (ParsePublicKeyFile): the origin of the store it belongs to. When
	// set, the store's origin (OriginName of its id) must be Origin, or
	// the report has a store-level KindKeyOrigin failure that says so, and
	// only signatures under that name verify. "" accepts a signature by
	// PublicKey under any name.
	Origin string
	// Trusted is a state saved by an earlier verification; nil skips the
	// rollback check.
	Trusted *State
	// Workers is how many goroutines hash records (runs are spread over
	// them); 0 means GOMAXPROCS. With 1, records are hashed synchronously
	// in the caller's goroutine.
	Workers int
}

// Verifier consumes a store's records and checkpoints in log order and
// produces a Report. Its methods must be called from one goroutine (the
// reader of the log); hashing fans out to Workers goroutines, one worker per
// run, so each run is still checked in order. Finish must be called, even
// when the caller gives up early: it stops the worker goroutines.
type Verifier struct {
	hasher  *Hasher
	pub     ed25519.PublicKey
	policy  policy // read-only once NewVerifier returns; shared with workers
	origin  string
	trusted *State // read-only once NewVerifier returns; shared with workers
	start   time.Time

	// The fields below are owned by the calling goroutine.
	storeID  string
	storeLoc string
	route    map[string]*worker // run id -> its worker
	created  map[string]bool    // runs with a creation record
	listed   map[string]Failure // runs named by a checkpoint or store head: first naming
	workers  []*worker
	next     int // round-robin worker assignment
	async    bool
	global   []Failure // store-level failures
	warnings []Failure // store-level warnings
	verified int       // signatures checked good
	// checkpoints counts checkpoint and store head records that parsed,
	// signedCkpts those that carry a signature.
	checkpoints, signedCkpts int
	finished                 bool
	finishedAt               *Report
}

// NewVerifier returns a Verifier. It fails on a Key of the wrong size or a
// PublicKey of the wrong size.
func NewVerifier(opts VerifyOptions) (*Verifier, error) {
	h, err := NewHasher(opts.Key)
	if err != nil {
		return nil, err
	}
	if opts.PublicKey != nil && len(opts.PublicKey) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: have %d bytes, want %d", ErrPublicKey, len(opts.PublicKey), ed25519.PublicKeySize)
	}
	n := opts.Workers
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	v := &Verifier{
		hasher: h,
		pub:    opts.PublicKey,
		origin: opts.Origin,
		policy: policy{signed: opts.PublicKey != nil, allow: opts.UnsignedTail,
			keyed: opts.Keyed, haveKey: opts.Key != nil},
		trusted: opts.Trusted,
		start:   time.Now(),
		route:   map[string]*worker{},
		created: map[string]bool{},
		listed:  map[string]Failure{},
		async:   n > 1,
	}
	for i := 0; i < n; i++ {
		w := &worker{v: v, runs: map[string]*runState{}}
		if v.async {
			w.in = make(chan *batch, 4)
			w.done = make(chan struct{})
			w.cur = w.getBatch()
			go w.loop()
		}
		v.workers = append(v.workers, w)
	}
	return v, nil
}

// Store records the store id as the store holds it. Checkpoints and store
// heads must carry the same id.
func (v *Verifier) Store(storeID string) {
	if v.finished {
		return
	}
	if v.storeLoc != "" && storeID != v.storeID {
		v.global = append(v.global, Failure{Kind: KindCheckpointMismatch, Detail: fmt.Sprintf("store id %q differs from %q recorded earlier", truncate(storeID), truncate(v.storeID))})
		return
	}
	v.storeID, v.storeLoc = storeID, "store"
	if v.origin != "" && v.pub != nil && OriginName(storeID) != v.origin {
		v.global = append(v.global, Failure{Kind: KindKeyOrigin, Location: "store",
			Detail: fmt.Sprintf("the public key is named for origin %q, but this store (id %s) signs as %q: it is the key of another store",
				truncate(v.origin), truncate(storeID), OriginName(storeID))})
	}
}

func (v *Verifier) workerFor(runID string) *worker {
	w := v.route[runID]
	if w == nil {
		w = v.workers[v.next%len(v.workers)]
		v.next++
		v.route[runID] = w
	}
	return w
}

// Run records a run's creation record: its id and nonce, from which h(0)
// derives.
func (v *Verifier) Run(runID string, nonce Nonce, loc string) {
	if v.finished {
		return
	}
	v.created[runID] = true
	v.workerFor(runID).send(event{op: opRun, run: runID, nonce: nonce, loc: loc})
}

// Record feeds one chained record in log order. payload may be reused by
// the caller once Record returns.
func (v *Verifier) Record(runID string, seq uint64, payload []byte, stored Hash, loc string) {
	if v.finished {
		return
	}
	w := v.workerFor(runID)
	ev := event{op: opRecord, run: runID, seq: seq, hash: stored, loc: loc}
	if !v.async {
		w.handle(&ev, payload)
		return
	}
	w.sendPayload(ev, payload)
}

// Checkpoint feeds a checkpoint record as stored (signed or not).
func (v *Verifier) Checkpoint(b []byte, loc string) {
	if v.finished {
		return
	}
	var c Checkpoint
	var parseErr, err error
	if v.pub != nil {
		c, parseErr, err = verifyCheckpoint(b, v.pub, v.origin)
	} else {
		c, parseErr = ParseCheckpoint(b)
	}
	if parseErr != nil {
		v.global = append(v.global, Failure{Kind: KindCorrupt, Location: loc, Detail: parseErr.Error()})
		return
	}
	names, _ := SignerNames(b) // parseable: ParseCheckpoint or verifyCheckpoint said so
	v.noteSigned(names)
	signed := v.pub != nil && err == nil
	if signed {
		v.verified++
	}
	v.noteListed(c.RunID, c.Seq, c.Head, loc, "checkpoint")
	w := v.workerFor(c.RunID)
	switch {
	case err != nil: // bad signature on a parseable checkpoint
		w.send(event{op: opFail, run: c.RunID, seq: c.Seq, hash: c.Head, loc: loc, kind: KindBadSignature, detail: err.Error()})
	case !v.checkStoreID(c.StoreID, loc):
		w.send(event{op: opFail, run: c.RunID, seq: c.Seq, hash: c.Head, loc: loc, kind: KindCheckpointMismatch,
			detail: fmt.Sprintf("checkpoint belongs to store %q, not %q", truncate(c.StoreID), truncate(v.storeID))})
	default:
		w.send(event{op: opAnchor, run: c.RunID, seq: c.Seq, hash: c.Head, loc: loc, src: srcCheckpoint, trusted: signed, final: c.Final,
			sigs: len(names) > 0})
	}
}

// checkStoreID compares id with the store's id; the first id seen is
// adopted when the store record is absent.
func (v *Verifier) checkStoreID(id, loc string) bool {
	if v.storeLoc == "" {
		v.storeID, v.storeLoc = id, loc
		return true
	}
	return id == v.storeID
}

func (v *Verifier) noteListed(runID string, seq uint64, head Hash, loc, what string) {
	if _, ok := v.listed[runID]; ok {
		return
	}
	v.listed[runID] = Failure{Kind: KindRunMissing, RunID: runID, Seq: 1, Expected: head, Location: loc,
		Detail: fmt.Sprintf("%s commits the run at seq %d but the store holds no such run", what, seq)}
}

// noteSigned counts a checkpoint or store head record that carries the
// signatures names (none: unsigned).
func (v *Verifier) noteSigned(names []string) {
	v.checkpoints++
	if len(names) > 0 {
		v.signedCkpts++
	}
}

// StoreHead feeds a store-level head log entry as stored (signed or not).
func (v *Verifier) StoreHead(b []byte, loc string) {
	if v.finished {
		return
	}
	if names, err := SignerNames(b); err == nil {
		v.noteSigned(names)
	}
	var h StoreHead
	var err error
	if v.pub != nil {
		h, err = verifyStoreHead(b, v.pub, v.origin)
	} else {
		h, err = ParseStoreHead(b)
	}
	if err != nil {
		kind := KindCorrupt
		if errors.Is(err, ErrBadSignature) {
			kind = KindBadSignature
		}
		v.global = append(v.global, Failure{Kind: kind, Location: loc, Detail: "store head: " + err.Error()})
		return
	}
	signed := v.pub != nil
	if signed {
		v.verified++
	}
	if !v.checkStoreID(h.StoreID, loc) {
		v.global = append(v.global, Failure{Kind: KindCheckpointMismatch, Location: loc,
			Detail: fmt.Sprintf("store head belongs to store %q, not %q", truncate(h.StoreID), truncate(v.storeID))})
		return
	}
	for _, r := range h.Runs {
		v.noteListed(r.RunID, r.Seq, r.Head, loc, "store head")
		v.workerFor(r.RunID).send(event{op: opAnchor, run: r.RunID, seq: r.Seq, hash: r.Head, loc: loc, src: srcStoreHead, trusted: signed})
	}
}

// Corrupt reports data the caller could not read (for example WAL
// corruption at loc). It is a store-level failure of kind KindCorrupt.
func (v *Verifier) Corrupt(loc string, err error) {
	if v.finished {
		return
	}
	d := "unreadable data"
	if err != nil {
		d = err.Error()
	}
	v.global = append(v.global, Failure{Kind: KindCorrupt, Location: loc, Detail: d})
}

// Finish waits for the workers and returns the report. Calls after Finish
// are ignored; Finish returns the same report again.
func (v *Verifier) Finish() *Report {
	if v.finished {
		return v.finishedAt
	}
	v.finished = true
	if v.async {
		for _, w := range v.workers {
			w.flush()
			close(w.in)
		}
		for _, w := range v.workers {
			<-w.done
		}
	}
	// Empty, not nil, slices: JSON output always has the arrays.
	r := &Report{StoreID: v.storeID, Runs: []RunReport{}, Failures: []Failure{}, Warnings: []Failure{}}
	for _, w := range v.workers {
		for _, rs := range w.runs {
			rs.finish()
			r.Runs = append(r.Runs, rs.report())
		}
	}
	present := map[string]bool{}
	for _, rr := range r.Runs {
		present[rr.RunID] = true
	}
	missing := func(f Failure) {
		present[f.RunID] = true
		r.Runs = append(r.Runs, RunReport{RunID: f.RunID, Failure: &f})
	}
	var ids []string
	for id := range v.listed {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if !v.created[id] && !present[id] {
			missing(v.listed[id])
		}
	}
	if t := v.trusted; t != nil {
		if t.StoreID != v.storeID {
			v.global = append(v.global, Failure{Kind: KindRollback, Detail: fmt.Sprintf("store id %q differs from the trusted state's %q", truncate(v.storeID), truncate(t.StoreID))})
		}
		ids = ids[:0]
		for id := range t.Runs {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			if !v.created[id] && !present[id] {
				rh := t.Runs[id]
				missing(Failure{Kind: KindRunMissing, RunID: id, Seq: 1, Expected: rh.Head, Location: "trusted state",
					Detail: fmt.Sprintf("the trusted state has the run at seq %d but the store holds no such run", rh.Seq)})
			}
		}
	}
	if v.pub == nil {
		v.warnings = append(v.warnings, Failure{Kind: KindUnsigned, Detail: "no public key given: checkpoint signatures were not checked, so truncation, a recomputed chain or a deleted run can go unnoticed"})
	}
	sort.Slice(r.Runs, func(a, b int) bool { return r.Runs[a].RunID < r.Runs[b].RunID })
	for i := range r.Runs {
		rr := &r.Runs[i]
		r.Records += rr.Records
		if rr.Failure != nil {
			r.Failures = append(r.Failures, *rr.Failure)
		}
		r.Warnings = append(r.Warnings, rr.Warnings...)
	}
	r.Failures = append(r.Failures, v.global...)
	r.Warnings = append(r.Warnings, v.warnings...)
	r.CheckpointsVerified = v.verified
	r.Checkpoints, r.CheckpointsSigned = v.checkpoints, v.signedCkpts
	r.OK = len(r.Failures) == 0
	r.Duration = time.Since(v.start)
	v.finishedAt = r
	return r
}

type op uint8

const (
	opRun op = iota
	opRecord
	opAnchor
	opFail
)

type anchorSrc uint8

const (
	srcCheckpoint anchorSrc = iota
	srcStoreHead
	srcTrusted
)

func (s anchorSrc) String() string {
	switch s {
	case srcCheckpoint:
		return "checkpoint"
	case srcStoreHead:
		return "store head"
	default:
		return "trusted state"
	}
}

// event is one input routed to a run's worker.
type event struct {
	op      op
	src     anchorSrc
	trusted bool // anchor: signature verified (or trusted state)
	final   bool
	sigs    bool // checkpoint anchor: the record carries a signature (checked or not)
	kind    Kind // opFail
	run     string
	seq     uint64
	hash    Hash // record: stored head; anchor: committed head
	nonce   Nonce
	off     int // record payload: batch.arena[off:end]
	end     int
	loc     string
	detail  string
}

// batch is a slice of events and the payload bytes they refer to. The
// dispatcher owns it until it is sent; then the worker owns it until it
// puts it back in the pool.
type batch struct {
	evs   []event
	arena []byte
	// ack, if set, marks a barrier: the worker closes it once it has
	// handled every batch sent before (see sync).
	ack chan struct{}
}

var batchPool = sync.Pool{New: func() any {
	return &batch{evs: make([]event, 0, batchEvents), arena: make([]byte, 0, batchBytes)}
}}

// policy is what a run's verification needs of the options.
type policy struct {
	signed  bool   // a public key was given: signatures are required
	allow   uint64 // atoms a run may have past its last signed anchor
	keyed   bool   // the store says its chains are keyed
	haveKey bool   // a chain key was given
}

// worker verifies the runs routed to it, in order.
type worker struct {
	v    *Verifier
	runs map[string]*runState // owned by the worker's goroutine (or the caller when !async, or between sync and the next send)
	in   chan *batch
	done chan struct{}
	cur  *batch // owned by the dispatcher
}

func (w *worker) getBatch() *batch {
	b := batchPool.Get().(*batch)
	b.evs, b.arena = b.evs[:0], b.arena[:0]
	return b
}

func (w *worker) send(ev event) {
	if !w.v.async {
		w.handle(&ev, nil)
		return
	}
	w.cur.evs = append(w.cur.evs, ev)
	if len(w.cur.evs) >= batchEvents {
		w.flush()
	}
}

func (w *worker) sendPayload(ev event, payload []byte) {
	if len(payload) > batchBytes {
		// A large payload (up to 64 MiB) is not copied into a batch, where
		// several could wait in the channel at once: once the worker has
		// handled all it was sent, the caller hashes it itself.
		w.flush()
		w.sync()
		w.handle(&ev, payload)
		return
	}
	b := w.cur
	ev.off = len(b.arena)
	b.arena = append(b.arena, payload...)
	ev.end = len(b.arena)
	b.evs = append(b.evs, ev)
	if len(b.evs) >= batchEvents || len(b.arena) >= batchBytes {
		w.flush()
	}
}

func (w *worker) flush() {
	if len(w.cur.evs) == 0 {
		return
	}
	w.in <- w.cur
	w.cur = w.getBatch()
}

// sync waits until the worker has handled every batch sent so far; until
// the next send, its runs belong to the caller.
func (w *worker) sync() {
	ack := make(chan struct{})
	w.in <- &batch{ack: ack}
	<-ack
}

func (w *worker) loop() {
	defer close(w.done)
	for b := range w.in {
		if b.ack != nil {
			close(b.ack)
			continue
		}
		for i := range b.evs {
			ev := &b.evs[i]
			var p []byte
			if ev.op == opRecord {
				p = b.arena[ev.off:ev.end]
			}
			w.handle(ev, p)
		}
		clear(b.evs) // drop string references before pooling
		if cap(b.arena) <= 2*batchBytes {
			batchPool.Put(b)
		}
	}
}

func (w *worker) run(id string) *runState {
	rs := w.runs[id]
	if rs == nil {
		rs = &runState{id: id, hasher: w.v.hasher, signedAll: true, policy: &w.v.policy, verifying: w.v.pub != nil}
		w.runs[id] = rs
	}
	return rs
}

func (w *worker) handle(ev *event, payload []byte) {
	switch ev.op {
	case opRecord:
		w.run(ev.run).record(ev.seq, payload, ev.hash, ev.loc)
	case opRun:
		rs := w.run(ev.run)
		rs.create(ev.nonce, ev.loc)
		if t := w.v.trusted; t != nil {
			if th, ok := t.Runs[ev.run]; ok {
				rs.anchor(anchor{seq: th.Seq, head: th.Head, src: srcTrusted, trusted: true, loc: "trusted state"})
			}
		}
	case opAnchor:
		rs := w.run(ev.run)
		if ev.src == srcCheckpoint {
			rs.checkpoints++
			if !ev.trusted {
				rs.signedAll = false
			}
			if ev.seq >= rs.lastCkpt {
				rs.lastCkpt, rs.lastCkptSigs = ev.seq, ev.sigs
			}
		}
		rs.anchor(anchor{seq: ev.seq, head: ev.hash, src: ev.src, trusted: ev.trusted, final: ev.final, loc: ev.loc})
	case opFail:
		rs := w.run(ev.run)
		rs.checkpoints++
		rs.signedAll = false
		rs.fail(Failure{Kind: ev.kind, Seq: ev.seq, Actual: ev.hash, Location: ev.loc, Detail: ev.detail})
	}
}

// anchor is a claim that a run had head at seq: from a checkpoint, a store
// head or the trusted state.
type anchor struct {
	seq     uint64
	head    Hash
	src     anchorSrc
	trusted bool
	final   bool // a checkpoint written when the run ended
	loc     string
}

// suspect is a record that did not hash to its stored head, held until the
// next record says whether the stored head still links (content edited) or
// not (record replaced).
type suspect struct {
	seq      uint64
	computed Hash
	stored   Hash
	loc      string
}

// runState is one run's verification state, owned by its worker.
type runState struct {
	id        string
	hasher    *Hasher
	verifying bool // a public key checks the signatures
	created   bool
	createLoc string
	records   uint64
	lastSeq   uint64 // last verified seq
	head      Hash   // h(lastSeq)
	// recent holds h(seq) at index seq%RecentHeads for the last
	// len(recent) seqs; it grows with the run up to RecentHeads entries, so
	// a short run costs little memory.
	recent    []Hash
	pending   []anchor // sorted by seq, all > lastSeq
	anchored  uint64   // highest seq confirmed by a trusted anchor
	hasAnchor bool
	signedSeq uint64 // highest seq confirmed by a signature verified with the public key
	policy    *policy
	// prevSeq and prevStored are the last record's seq and stored head,
	// for the keyed-chain check after a failure at seq 1 (linkedAfter).
	prevSeq    uint64
	prevStored Hash
	headLoc    string // where the record of h(lastSeq) is
	// linked is set once a record links to the head before it (or hashes
	// to its own stored head): the run's chain is in the hasher's mode.
	linked bool
	// checkpoints counts checkpoint records of the run; signedAll is false
	// once one of them was not verified against the public key.
	checkpoints int
	signedAll   bool
	// lastCkpt is the seq of the run's latest checkpoint record, and
	// lastCkptSigs whether it carries a signature, checked or not.
	lastCkpt     uint64
	lastCkptSigs bool
	// ended is set by a verified final checkpoint at endedSeq.
	ended    bool
	endedSeq uint64
	sus      *suspect
	failure  *Failure
	warnings []Failure
}

func (rs *runState) fail(f Failure) {
	if rs.failure != nil {
		return
	}
	f.RunID = rs.id
	rs.failure = &f
}

func (rs *runState) create(nonce Nonce, loc string) {
	if rs.created {
		rs.fail(Failure{Kind: KindSeqDuplicate, Seq: 0, Location: loc, Detail: "run created a second time (first creation at " + rs.createLoc + ")"})
		return
	}
	rs.created, rs.createLoc = true, loc
	if rs.records > 0 {
		return // records came first: already failed as unknown-run
	}
	rs.head = rs.hasher.Genesis(rs.id, nonce)
	rs.recent = append(rs.recent[:0], rs.head)
}

func (rs *runState) record(seq uint64, payload []byte, stored Hash, loc string) {
	rs.records++
	defer func() { rs.prevSeq, rs.prevStored = seq, stored }()
	if rs.failure != nil {
		rs.linkedAfter(seq, payload, stored)
		return
	}
	if !rs.created {
		rs.fail(Failure{Kind: KindUnknownRun, Seq: seq, Actual: stored, Location: loc, Detail: "record for a run with no creation record"})
		return
	}
	if s := rs.sus; s != nil {
		rs.classify(seq, payload, stored)
		return
	}
	expected := rs.lastSeq + 1
	switch {
	case seq == expected:
		h := rs.hasher.Link(rs.id, seq, rs.head, payload)
		if h != stored {
			rs.sus = &suspect{seq: seq, computed: h, stored: stored, loc: loc}
			return
		}
		rs.linked, rs.headLoc = true, loc
		rs.advance(seq, h)
	case seq == 0:
		rs.fail(Failure{Kind: KindSeqGap, Seq: expected, Actual: stored, Location: loc, Detail: "record with seq 0 (seqs start at 1)"})
	case seq < expected:
		f := Failure{Kind: KindSeqDuplicate, Seq: seq, Actual: stored, Location: loc, Detail: fmt.Sprintf("seq %d comes again after seq %d", seq, rs.lastSeq)}
		if h, ok := rs.recentHead(seq); ok {
			f.Expected = h
		}
		rs.fail(f)
	default:
		rs.fail(Failure{Kind: KindSeqGap, Seq: expected, Actual: stored, Location: loc, Detail: fmt.Sprintf("record seq %d follows seq %d: seqs %d..%d are missing", seq, rs.lastSeq, expected, seq-1)})
	}
}

// keyedProbe bounds the records linkedAfter hashes after a failure.
const keyedProbe = 64

// linkedAfter is called for the records after a failure at seq 1 that no
// link confirmed: if any of the next few links to the stored head before
// it, the chain is in the hasher's mode and the failure is damage;
// otherwise the whole run is in another mode (see KindKeyedChain).
func (rs *runState) linkedAfter(seq uint64, payload []byte, stored Hash) {
	if rs.linked || rs.failure.Seq != 1 || seq != rs.prevSeq+1 || seq > keyedProbe {
		return
	}
	if rs.hasher.Link(rs.id, seq, rs.prevStored, payload) == stored {
		rs.linked = true
	}
}

// classify turns the pending suspect into a failure using the record that
// follows it.
func (rs *runState) classify(seq uint64, payload []byte, stored Hash) {
	s := rs.sus
	rs.sus = nil
	f := Failure{Seq: s.seq, Expected: s.computed, Actual: s.stored, Location: s.loc}
	switch {
	case seq != s.seq+1:
		f.Kind = KindHashMismatch
		f.Detail = fmt.Sprintf("record does not hash to its stored head (and the next record has seq %d)", seq)
	case rs.hasher.Link(rs.id, seq, s.stored, payload) == stored:
		rs.linked = true
		f.Kind = KindHashMismatch
		f.Detail = "record bytes changed: they no longer hash to the stored head, which the next record still links to"
		if s.seq == 1 {
			f.Detail += " (or the run's nonce in its creation record changed)"
		}
	default:
		f.Kind = KindLinkMismatch
		f.Detail = "record replaced: its stored head neither matches its bytes nor is linked to by the next record"
	}
	rs.fail(f)
}

func (rs *runState) advance(seq uint64, h Hash) {
	rs.lastSeq, rs.head = seq, h
	if len(rs.recent) < RecentHeads {
		rs.recent = append(rs.recent, h) // seqs are contiguous from 0: index == seq
	} else {
		rs.recent[seq%RecentHeads] = h
	}
	for len(rs.pending) > 0 && rs.pending[0].seq <= seq && rs.failure == nil {
		a := rs.pending[0]
		rs.pending = rs.pending[1:]
		rs.check(a, h)
	}
}

// check compares an anchor with the verified head at its seq.
func (rs *runState) check(a anchor, h Hash) {
	if a.head != h {
		kind := KindCheckpointMismatch
		detail := fmt.Sprintf("%s commits a different head at seq %d: the chain was rewritten at or before this seq", a.src, a.seq)
		if a.src == srcTrusted {
			kind = KindRollback
			detail = fmt.Sprintf("the head at seq %d differs from the trusted state: the store's history diverges from the one verified before", a.seq)
		}
		if rs.hasAnchor && rs.anchored < a.seq {
			detail += fmt.Sprintf(" (after seq %d, the last verified anchor)", rs.anchored)
		}
		rs.fail(Failure{Kind: kind, Seq: a.seq, Expected: a.head, Actual: h, Location: a.loc, Detail: detail})
		return
	}
	if a.trusted && (!rs.hasAnchor || a.seq > rs.anchored) {
		rs.anchored, rs.hasAnchor = a.seq, true
	}
	if a.trusted && a.src != srcTrusted {
		rs.signedSeq = max(rs.signedSeq, a.seq)
	}
	if a.trusted && a.final {
		rs.ended, rs.endedSeq = true, a.seq
	}
}

func (rs *runState) anchor(a anchor) {
	if rs.failure != nil || rs.sus != nil || !rs.created {
		if !rs.created && rs.failure == nil {
			rs.fail(Failure{Kind: KindRunMissing, Seq: 1, Expected: a.head, Location: a.loc, Detail: fmt.Sprintf("%s for seq %d of a run with no creation record", a.src, a.seq)})
		}
		return
	}
	if a.seq <= rs.lastSeq {
		h, ok := rs.recentHead(a.seq)
		if !ok {
			rs.warnings = append(rs.warnings, Failure{Kind: KindUncheckedAnchor, RunID: rs.id, Seq: a.seq, Expected: a.head, Location: a.loc,
				Detail: fmt.Sprintf("%s for seq %d arrived at seq %d, more than %d records later", a.src, a.seq, rs.lastSeq, RecentHeads)})
			return
		}
		rs.check(a, h)
		return
	}
	i := sort.Search(len(rs.pending), func(i int) bool { return rs.pending[i].seq > a.seq })
	rs.pending = append(rs.pending, anchor{})
	copy(rs.pending[i+1:], rs.pending[i:])
	rs.pending[i] = a
}

// recentHead returns the verified h(seq) if it is still held.
func (rs *runState) recentHead(seq uint64) (Hash, bool) {
	if seq > rs.lastSeq || rs.lastSeq-seq >= uint64(len(rs.recent)) {
		return Hash{}, false
	}
	return rs.recent[seq%RecentHeads], true
}

// finish settles what only the end of the log can tell.
func (rs *runState) finish() {
	if rs.sus != nil {
		s := rs.sus
		rs.sus = nil
		rs.fail(Failure{Kind: KindHashMismatch, Seq: s.seq, Expected: s.computed, Actual: s.stored, Location: s.loc,
			Detail: "last record does not hash to its stored head"})
	}
	if rs.failure == nil && len(rs.pending) > 0 {
		// Prefer the store's own evidence (checkpoint, store head) over
		// the trusted state when both show missing records.
		a := rs.pending[0]
		for _, p := range rs.pending {
			if p.src != srcTrusted {
				a = p
				break
			}
		}
		if a.src == srcTrusted {
			rs.fail(Failure{Kind: KindRollback, Seq: rs.lastSeq + 1, Expected: a.head, Location: a.loc,
				Detail: fmt.Sprintf("the trusted state has the run at seq %d but the store ends at seq %d: an older copy of the store", a.seq, rs.lastSeq)})
		} else {
			rs.fail(Failure{Kind: KindTruncated, Seq: rs.lastSeq + 1, Expected: a.head, Location: a.loc,
				Detail: fmt.Sprintf("%s commits the run at seq %d but its records end at seq %d", a.src, a.seq, rs.lastSeq)})
		}
	}
	rs.keyedChain()
	if p := rs.policy; p.signed && rs.failure == nil && rs.created && rs.lastSeq > rs.signedSeq+p.allow {
		covered := fmt.Sprintf("its last checkpoint signed with the given key is at seq %d", rs.signedSeq)
		if rs.signedSeq == 0 {
			covered = "no checkpoint of it is signed with the given key"
		}
		rs.fail(Failure{Kind: KindUnsignedTail, Seq: rs.signedSeq + 1, Actual: rs.head, Location: rs.headLoc,
			Detail: fmt.Sprintf("the run's head is at seq %d but %s: %d atoms unsigned, %d allowed "+
				"(a store rewritten without the signing key, or a writer still running or stopped before its next checkpoint)",
				rs.lastSeq, covered, rs.lastSeq-rs.signedSeq, p.allow)})
	}
	if rs.failure == nil && rs.created && rs.lastSeq > 0 && (!rs.hasAnchor || rs.anchored < rs.lastSeq) {
		from := uint64(1)
		if rs.hasAnchor {
			from = rs.anchored + 1
		}
		rs.warnings = append(rs.warnings, Failure{Kind: KindUnanchoredTail, RunID: rs.id, Seq: from, Actual: rs.head,
			Detail: fmt.Sprintf("records %d..%d are not covered by a verified checkpoint: %s", from, rs.lastSeq, rs.checkpointWords())})
	}
}

// keyedChain turns a failure of the run's first record into KindKeyedChain
// when the run is in another chain mode than the verifier's: the store says
// keyed and no key was given, or no record links to the one before it.
func (rs *runState) keyedChain() {
	f := rs.failure
	if f == nil || f.Seq != 1 || (f.Kind != KindHashMismatch && f.Kind != KindLinkMismatch) || rs.linked {
		return
	}
	p := rs.policy
	var detail string
	switch {
	case p.keyed && !p.haveKey:
		detail = "this store is keyed; pass --chain-key: its STORE file says its chain is keyed, which cannot be checked without the key"
	case rs.records < 2:
		return // one record: nothing to tell a mode from damage
	case !p.haveKey:
		detail = "this store is keyed; pass --chain-key: no record of the run links to the one before it in the unkeyed chain " +
			"(if the store is not keyed, every head of the run was replaced)"
	default:
		detail = "no record of the run links to the one before it under the given chain key: the key is not the one " +
			"the store was written with (or every head of the run was replaced)"
	}
	rs.failure = &Failure{Kind: KindKeyedChain, RunID: rs.id, Seq: 1, Expected: f.Expected, Actual: f.Actual,
		Location: f.Location, Detail: detail}
}

// checkpointWords says why the tail is unanchored, in the words inspect
// uses for a run's latest checkpoint: "checkpoint at seq N, signed" or
// "unsigned".
func (rs *runState) checkpointWords() string {
	signed := "unsigned"
	if rs.lastCkptSigs {
		signed = "signed"
	}
	switch {
	case rs.checkpoints == 0:
		return "the run has no checkpoint yet"
	case !rs.hasAnchor && !rs.verifying:
		return fmt.Sprintf("the latest checkpoint at seq %d, %s, was not verified (no public key given)", rs.lastCkpt, signed)
	case !rs.hasAnchor && !rs.lastCkptSigs:
		return fmt.Sprintf("the latest checkpoint at seq %d is unsigned", rs.lastCkpt)
	case !rs.hasAnchor:
		return fmt.Sprintf("the latest checkpoint at seq %d, signed, did not verify", rs.lastCkpt)
	}
	if rs.lastCkpt <= rs.anchored {
		return fmt.Sprintf("the last verified checkpoint is at seq %d", rs.anchored)
	}
	return fmt.Sprintf("the last verified checkpoint is at seq %d; the latest, at seq %d, is %s", rs.anchored, rs.lastCkpt, signed)
}

func (rs *runState) report() RunReport {
	return RunReport{
		SignedSeq:    rs.signedSeq,
		UnsignedTail: rs.lastSeq - min(rs.signedSeq, rs.lastSeq),
		RunID:        rs.id,
		Records:      rs.records,
		LastSeq:      rs.lastSeq,
		Head:         rs.head,
		Checkpoints:  rs.checkpoints,
		Signed:       rs.checkpoints > 0 && rs.signedAll,
		Ended:        rs.ended && rs.endedSeq == rs.lastSeq && rs.failure == nil,
		OK:           rs.failure == nil,
		Failure:      rs.failure,
		Warnings:     rs.warnings,
	}
}
