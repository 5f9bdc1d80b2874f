// One run's verification: its chain, its anchors (checkpoints, store heads,
// the trusted state) and what the end of the log settles.

package chain

import (
	"fmt"
	"sort"
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

// policy is what a run's verification needs of the options.
type policy struct {
	signed  bool   // a public key was given: signatures are required
	allow   uint64 // atoms a run may have past its last signed anchor
	keyed   bool   // the store says its chains are keyed
	haveKey bool   // a chain key was given
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
	// base is the seq the run's chain starts at: 0, or a fork's fork point
	// (its fork genesis is h(base); the seqs below are its parent's).
	base uint64
	head Hash // h(lastSeq)
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
	headLoc    string // where the record of h(lastSeq) is; kept only when policy.signed
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

// createFork is create for a run forked from parent at seq at: the chain
// starts at at, with the fork genesis.
func (rs *runState) createFork(nonce Nonce, parent string, at uint64, parentHead Hash, loc string) {
	if rs.created {
		rs.fail(Failure{Kind: KindSeqDuplicate, Seq: at, Location: loc, Detail: "run created a second time (first creation at " + rs.createLoc + ")"})
		return
	}
	rs.created, rs.createLoc = true, loc
	if rs.records > 0 {
		return // records came first: already failed as unknown-run
	}
	rs.head = rs.hasher.ForkGenesis(rs.id, nonce, parent, at, parentHead)
	rs.lastSeq, rs.base, rs.signedSeq = at, at, at
	// recent is indexed by seq % RecentHeads and grows with the run: a
	// fork's holds zero hashes below its base, which recentHead never
	// returns.
	rs.recent = make([]Hash, min(at+1, RecentHeads))
	rs.recent[at%RecentHeads] = rs.head
}

// record verifies the chained record at seq; loc gives its location,
// asked for only when needed (Verifier.RecordAt).
func (rs *runState) record(seq uint64, payload []byte, stored Hash, loc func() string) {
	rs.records++
	defer func() { rs.prevSeq, rs.prevStored = seq, stored }()
	if rs.failure != nil {
		rs.linkedAfter(seq, payload, stored)
		return
	}
	if !rs.created {
		rs.fail(Failure{Kind: KindUnknownRun, Seq: seq, Actual: stored, Location: loc(), Detail: "record for a run with no creation record"})
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
			rs.sus = &suspect{seq: seq, computed: h, stored: stored, loc: loc()}
			return
		}
		rs.linked = true
		if rs.policy.signed { // the one failure that names it: an unsigned tail
			rs.headLoc = loc()
		}
		rs.advance(seq, h)
	case seq == 0:
		rs.fail(Failure{Kind: KindSeqGap, Seq: expected, Actual: stored, Location: loc(), Detail: "record with seq 0 (seqs start at 1)"})
	case seq < expected:
		f := Failure{Kind: KindSeqDuplicate, Seq: seq, Actual: stored, Location: loc(), Detail: fmt.Sprintf("seq %d comes again after seq %d", seq, rs.lastSeq)}
		if h, ok := rs.recentHead(seq); ok {
			f.Expected = h
		}
		rs.fail(f)
	default:
		rs.fail(Failure{Kind: KindSeqGap, Seq: expected, Actual: stored, Location: loc(), Detail: fmt.Sprintf("record seq %d follows seq %d: seqs %d..%d are missing", seq, rs.lastSeq, expected, seq-1)})
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
	if seq > rs.lastSeq || seq < rs.base || rs.lastSeq-seq >= uint64(len(rs.recent)) {
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
		if rs.signedSeq == rs.base {
			covered = "no checkpoint of it is signed with the given key"
		}
		rs.fail(Failure{Kind: KindUnsignedTail, Seq: rs.signedSeq + 1, Actual: rs.head, Location: rs.headLoc,
			Detail: fmt.Sprintf("the run's head is at seq %d but %s: %d atoms unsigned, %d allowed "+
				"(a store rewritten without the signing key, or a writer still running or stopped before its next checkpoint)",
				rs.lastSeq, covered, rs.lastSeq-rs.signedSeq, p.allow)})
	}
	if rs.failure == nil && rs.created && rs.lastSeq > rs.base && (!rs.hasAnchor || rs.anchored < rs.lastSeq) {
		from := rs.base + 1
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
