package chain

import (
	"fmt"
	"strings"
	"time"
)

// Kind classifies a verification failure or warning.
type Kind uint8

// Kinds. The numeric values may change; String names are stable and are
// what JSON output carries.
const (
	// KindHashMismatch: the record does not hash to its stored head, and its
	// stored head is the one the next record links to: the record's bytes
	// were changed in place (edited, bit flip, cut short).
	KindHashMismatch Kind = iota + 1
	// KindLinkMismatch: the record does not hash to its stored head, and the
	// next record does not link to that stored head either: the record was
	// replaced as a whole (copied from another run or position, or the chain
	// was recomputed from here under another key).
	KindLinkMismatch
	// KindSeqGap: a record's seq skips ahead; Seq is the first missing seq.
	KindSeqGap
	// KindSeqDuplicate: a seq already seen comes again (or a run is created
	// twice, Seq 0).
	KindSeqDuplicate
	// KindTruncated: a checkpoint or store head commits the run at a seq
	// beyond its last record; Seq is the first missing seq.
	KindTruncated
	// KindBadSignature: a checkpoint or store head is unsigned, signed by
	// another key, or its signature does not verify.
	KindBadSignature
	// KindCheckpointMismatch: a checkpoint or store head names a head that
	// differs from the chain's head at its seq (a rewritten history), or
	// belongs to another store.
	KindCheckpointMismatch
	// KindRunMissing: a store head, checkpoint or the trusted state names a
	// run that the store does not hold.
	KindRunMissing
	// KindRollback: the store is behind or diverges from the trusted state.
	KindRollback
	// KindUnanchoredTail (warning): records after the last checkpoint
	// verified against the public key (or the trusted state); they could
	// have been cut or rewritten unnoticed.
	KindUnanchoredTail
	// KindUnknownRun: a record for a run that was never created.
	KindUnknownRun
	// KindCorrupt: the caller could not read part of the store.
	KindCorrupt
	// KindUnsigned (warning): no public key was given, so no signature was
	// checked and nothing is anchored.
	KindUnsigned
	// KindUncheckedAnchor (warning): a checkpoint arrived after the run had
	// moved more than RecentHeads records past its seq; it was not compared.
	KindUncheckedAnchor
	// KindUnsignedTail: with a public key, a run's head is more atoms past
	// its last checkpoint signed with that key than the allowance
	// (VerifyOptions.UnsignedTail); Seq is the first atom not covered.
	KindUnsignedTail
	// KindKeyedChain: no chain key was given and the store is keyed (its
	// STORE file says so, or no record of the run links to the one before
	// it in the unkeyed chain): the chain cannot be checked without the key.
	KindKeyedChain
	// KindKeyOrigin: the public key is named for another origin than the
	// store's (VerifyOptions.Origin): it is the key of another store.
	KindKeyOrigin
)

var kindNames = [...]string{
	KindHashMismatch:       "hash-mismatch",
	KindLinkMismatch:       "link-mismatch",
	KindSeqGap:             "seq-gap",
	KindSeqDuplicate:       "seq-duplicate",
	KindTruncated:          "truncated",
	KindBadSignature:       "bad-signature",
	KindCheckpointMismatch: "checkpoint-mismatch",
	KindRunMissing:         "run-missing",
	KindRollback:           "rollback",
	KindUnanchoredTail:     "unanchored-tail",
	KindUnknownRun:         "unknown-run",
	KindCorrupt:            "corrupt",
	KindUnsigned:           "signatures-unchecked",
	KindUncheckedAnchor:    "checkpoint-unchecked",
	KindUnsignedTail:       "unsigned-tail",
	KindKeyedChain:         "keyed-chain",
	KindKeyOrigin:          "key-origin",
}

// String returns the stable kebab-case name of k.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// MarshalText writes String, so JSON carries the stable name.
func (k Kind) MarshalText() ([]byte, error) {
	if int(k) >= len(kindNames) || kindNames[k] == "" {
		return nil, fmt.Errorf("chain: unknown kind %d", uint8(k))
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText reads a name written by MarshalText.
func (k *Kind) UnmarshalText(b []byte) error {
	for i, n := range kindNames {
		if n != "" && n == string(b) {
			*k = Kind(i)
			return nil
		}
	}
	return fmt.Errorf("%w: unknown kind %q", ErrParse, truncate(string(b)))
}

// Failure is one finding: a failure of a run (or of the store when RunID is
// empty), or a warning.
type Failure struct {
	Kind     Kind   `json:"kind"`
	RunID    string `json:"run,omitempty"`
	Seq      uint64 `json:"seq"`
	Expected Hash   `json:"expected,omitzero"` // what the chain, checkpoint or state says
	Actual   Hash   `json:"actual,omitzero"`   // what the store holds
	Location string `json:"location,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// String formats f for people: kind, run, seq, where, and the hashes.
func (f Failure) String() string {
	var b strings.Builder
	b.WriteString(f.Kind.String())
	if f.RunID != "" {
		fmt.Fprintf(&b, " run %q", f.RunID)
	}
	fmt.Fprintf(&b, " seq %d", f.Seq)
	if f.Location != "" {
		fmt.Fprintf(&b, " at %s", f.Location)
	}
	if f.Detail != "" {
		b.WriteString(": ")
		b.WriteString(f.Detail)
	}
	if !f.Expected.IsZero() || !f.Actual.IsZero() {
		fmt.Fprintf(&b, " (expected %s, actual %s)", f.Expected, f.Actual)
	}
	return b.String()
}

// RunReport is the verdict on one run.
type RunReport struct {
	RunID       string `json:"run"`
	Records     uint64 `json:"records"`     // records seen, verified or not
	LastSeq     uint64 `json:"last_seq"`    // last seq verified (before the first failure, if any)
	Head        Hash   `json:"head"`        // h(LastSeq)
	Checkpoints int    `json:"checkpoints"` // checkpoint records of the run
	Signed      bool   `json:"signed"`      // at least one, and every, checkpoint verified against the public key
	// SignedSeq is the highest seq covered by a checkpoint or store head
	// signed with the public key (0: none, or no key); UnsignedTail is
	// LastSeq - SignedSeq, the atoms past it.
	SignedSeq    uint64    `json:"signed_seq"`
	UnsignedTail uint64    `json:"unsigned_tail"`
	Ended        bool      `json:"ended"` // a verified final checkpoint commits the run at LastSeq
	OK           bool      `json:"ok"`    // no failure
	Failure      *Failure  `json:"failure,omitempty"`
	Warnings     []Failure `json:"warnings,omitempty"`
}

// Report is the result of a verification.
type Report struct {
	OK                  bool        `json:"ok"` // no failure at all (warnings allowed)
	StoreID             string      `json:"store"`
	Runs                []RunReport `json:"runs"` // sorted by RunID
	Records             uint64      `json:"records"`
	CheckpointsVerified int         `json:"checkpoints_verified"` // signatures checked good
	// Checkpoints counts the checkpoint and store head records read, and
	// CheckpointsSigned those of them that carry a signature, checked or
	// not: a store with checkpoints none of which is signed was never
	// opened with a signing key.
	Checkpoints       int       `json:"checkpoints"`
	CheckpointsSigned int       `json:"checkpoints_signed"`
	Failures          []Failure `json:"failures"` // run failures, then store-level ones
	Warnings          []Failure `json:"warnings"`
	// Deleted lists the runs deleted by policy: each named by a delete
	// record that verified (sorted by RunID). A deleted run is not in
	// Runs unless its records are all still there (Reclaimed false), and
	// its absence is no failure.
	Deleted []DeletedRun `json:"deleted,omitempty"`
	// ErasedKeys lists the memory keys erased by policy: each named by an
	// erase-key record that verified (sorted by run, then seq, then key).
	// What the data keys it names sealed can no longer be opened, and is
	// no failure.
	ErasedKeys []ErasedKey `json:"erased_keys,omitempty"`
	// Rollbacks lists the rollbacks of runs the log holds (sorted by run,
	// then seq): completed ones, chained from their completing atom on,
	// and pending ones (Completed false: the record is durable, the atom
	// that completes it is not yet; no failure).
	Rollbacks []Rollback `json:"rollbacks,omitempty"`
	// Waits counts the records of runs' waits verify checked (their
	// links, and the rules of docs/DESIGN.md, "Waits and timers"); nil:
	// the log holds none.
	Waits *WaitCounts `json:"waits,omitempty"`
	// Unchecked names what the caller did not compare with the log (the
	// engine's verify without Deep: its derived files), for the report to
	// say so. Not a warning: nothing was found.
	Unchecked []string      `json:"unchecked,omitempty"`
	Duration  time.Duration `json:"duration_ns"`
}

// WaitCounts counts the wait, event and wake records verify checked.
type WaitCounts struct {
	Waits  int `json:"waits"`
	Events int `json:"events"`
	Wakes  int `json:"wakes"`
}

// Rollback is a rollback of a run to seq To, as its rollback record says.
type Rollback struct {
	RunID string `json:"run"`
	Seq   uint64 `json:"seq"` // the atom that completes it
	To    uint64 `json:"to"`
	At    int64  `json:"at"` // when it began, unix nanoseconds
	// Undone counts the actions it compensates, NotUndone the certified
	// actions it reached that have no compensation (their effects stay).
	Undone    int  `json:"undone"`
	NotUndone int  `json:"not_undone"`
	Completed bool `json:"completed"`
	// Sealed: the store is encrypted and the record's undo list was not
	// opened (no keyring, or its run was erased), so Undone and NotUndone
	// are not known (zero).
	Sealed bool `json:"sealed,omitempty"`
}

// DeletedRun is a run deleted by policy, as its delete record says.
type DeletedRun struct {
	RunID  string `json:"run"`
	Seq    uint64 `json:"seq"`   // the deletion's link: the run's end + 1
	Final  Hash   `json:"final"` // the run's head at its end
	Head   Hash   `json:"head"`  // the deletion's link
	At     int64  `json:"at"`    // unix nanoseconds
	Reason string `json:"reason"`
	// Signed: the delete record's checkpoint verified against the public
	// key (with none given, false).
	Signed bool `json:"signed"`
	// Reclaimed: some or all of the run's records are gone (garbage
	// collection removed them); false when they are all there and the
	// deletion was checked against the run's end.
	Reclaimed bool   `json:"reclaimed"`
	Location  string `json:"location,omitempty"`
	// Erasure is the run's erasure by policy, when an erase record that
	// passed its checks erased it (by this deletion, or after it): what
	// the run's key sealed can no longer be opened, and is no failure.
	Erasure *Erasure `json:"erasure,omitempty"`
}

// ErasedKey is the erasure of one memory key of a run, as its erase-key
// record says.
type ErasedKey struct {
	RunID  string   `json:"run"`
	Key    string   `json:"key"`
	Seq    uint64   `json:"seq"`     // the run's last seq when the key was erased
	Head   Hash     `json:"head"`    // the erasure's link, beside the run's chain
	KeyNos []uint64 `json:"key_nos"` // the data keys it erased
	At     int64    `json:"at"`      // unix nanoseconds
	Reason string   `json:"reason"`
	Signed bool     `json:"signed"` // its checkpoint verified against the public key
	// Location is where its record is.
	Location string `json:"location,omitempty"`
}

// Erasure is the erasure of a deleted run, as its erase record says.
type Erasure struct {
	Seq      uint64 `json:"seq"`  // the erasure's link
	Head     Hash   `json:"head"` // the erasure's link
	At       int64  `json:"at"`   // unix nanoseconds
	Reason   string `json:"reason"`
	Signed   bool   `json:"signed"` // its checkpoint verified against the public key
	Location string `json:"location,omitempty"`
	// Unfinished: the store's key table still holds the run's key, marked
	// erasing (a crash interrupted the erasure; the engine's next Open
	// finishes it). Checked only when the key table was read.
	Unfinished bool `json:"unfinished,omitempty"`
}

// State returns what `--save-state` writes: the store id and, for every run
// the store holds, its last verified seq and head. Save it only from an OK
// report: for a failed run it holds the prefix verified before the failure,
// and missing or never-created runs are left out.
func (r *Report) State() State {
	s := State{StoreID: r.StoreID, Runs: make(map[string]RunHead, len(r.Runs))}
	for _, rr := range r.Runs {
		if f := rr.Failure; f != nil && (f.Kind == KindRunMissing || f.Kind == KindUnknownRun) {
			continue // the store holds no verifiable chain for it
		}
		s.Runs[rr.RunID] = RunHead{RunID: rr.RunID, Seq: rr.LastSeq, Head: rr.Head}
	}
	return s
}
