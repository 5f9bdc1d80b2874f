package chain

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"time"
)

// RecentHeads is how many recent heads each run keeps, so a checkpoint that
// arrives after later records of its run can still be compared.
const RecentHeads = 1024

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
	route    map[string]*worker // run id -> its worker (unused with one worker)
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
	if len(v.workers) == 1 {
		return v.workers[0] // every run's: no route to look up per record
	}
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

// Fork feeds the creation record of a run forked from parent at seq at,
// where parent's head was parentHead: the run's chain starts at seq at with
// its fork genesis (Hasher.ForkGenesis), and its first record is at+1.
// That parentHead is the parent's head at at is the caller's to check (it
// holds the parent's stored heads); a changed parent, at or parentHead
// changes the fork genesis, so the fork's first record no longer links.
func (v *Verifier) Fork(runID string, nonce Nonce, parent string, at uint64, parentHead Hash, loc string) {
	if v.finished {
		return
	}
	v.created[runID] = true
	v.workerFor(runID).send(event{op: opFork, run: runID, nonce: nonce, parent: parent, seq: at, hash: parentHead, loc: loc})
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

// RecordAt is Record with the record's location given by loc, which is
// called only if the verifier needs the location: a failure at the
// record, or the run's head when signatures are required (the location
// of an unsigned tail). A reader of millions of records then builds no
// string for each. loc is not called after RecordAt returns.
func (v *Verifier) RecordAt(runID string, seq uint64, payload []byte, stored Hash, loc func() string) {
	if v.finished {
		return
	}
	if v.async { // the worker reads the event later: the location goes with it
		v.Record(runID, seq, payload, stored, loc())
		return
	}
	v.workerFor(runID).run(runID).record(seq, payload, stored, loc)
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
