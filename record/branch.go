package record

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/runid"
)

// A branch's atom body extension (ExtTagBase). Every constant in this file
// is frozen, like those of format.go.
//
// An atom committed as a branch (one of several atoms of a run in flight at
// once) carries, in its body's extension of tag ExtTagBase:
//
//	uvarint base | uvarint len | branch name | uvarint n | n x key
//	key = kind byte | uvarint len | name
//
// base is the seq whose state the branch read (0 <= base <= seq-1: the
// atom DAG's edge from the atom to its base); the branch name is what its
// default idempotency keys derive from (ledger.BranchKey), 1 to 256 bytes
// of UTF-8 without control characters (the run-id rule); the keys are the
// parts of the frame the branch declared it read, strictly ascending by
// kind then name bytes (so one set has one encoding), at most
// MaxBranchReads. A key of kind KeyObjective, KeyScratchpad, KeyMessages
// or KeyFrame has an empty name. What the branch wrote is not stored: it
// is its delta's (the engine derives it from the ops), so the record
// cannot say one thing in the extension and another in the delta.
//
// An atom without this extension has base seq-1: it read the state its
// predecessor left (Run.Begin's atoms, and every atom before branches
// existed).

// KeyKind is the kind of a StateKey. Frozen.
type KeyKind uint8

// The kinds of state keys.
const (
	KeyObjective  KeyKind = 1 // the objective
	KeySubgoal    KeyKind = 2 // one subgoal, by id
	KeyMemory     KeyKind = 3 // one working-memory key
	KeyScratchpad KeyKind = 4 // the scratchpad
	KeyMessages   KeyKind = 5 // the conversation (every message)
	KeyPending    KeyKind = 6 // one pending action, by call id
	KeyFrame      KeyKind = 7 // the whole frame: conflicts with every key

	maxKeyKind = KeyFrame
)

// MaxBranchReads bounds the keys a branch declares it reads.
const MaxBranchReads = 1 << 12

// MaxBranchLag bounds how far a branch's base is behind it: at most
// MaxBranchLag atoms between its base and it (the engine keeps the write
// sets of that many, engine.MaxBranchWindow). It bounds what verify reads
// to check a branch.
const MaxBranchLag = 1 << 12

var keyKindNames = [...]string{
	KeyObjective:  "objective",
	KeySubgoal:    "subgoal",
	KeyMemory:     "memory",
	KeyScratchpad: "scratchpad",
	KeyMessages:   "messages",
	KeyPending:    "pending",
	KeyFrame:      "frame",
}

// String is the kind's name, as inspect and export print it.
func (k KeyKind) String() string {
	if k >= 1 && k <= maxKeyKind {
		return keyKindNames[k]
	}
	return fmt.Sprintf("key-kind-%d", uint8(k))
}

// named reports whether keys of kind k carry a name.
func (k KeyKind) named() bool { return k == KeySubgoal || k == KeyMemory || k == KeyPending }

// StateKey names a part of a run's frame that an atom reads or writes: the
// unit of a branch's conflicts. Name is the subgoal id, memory key or call
// id, and empty for the other kinds.
type StateKey struct {
	Kind KeyKind
	Name string
}

// String is "kind" or "kind:name".
func (k StateKey) String() string {
	if k.Kind.named() {
		return k.Kind.String() + ":" + k.Name
	}
	return k.Kind.String()
}

// Check reports why k names no part of a frame, or nil.
func (k StateKey) Check() error {
	switch {
	case k.Kind < 1 || k.Kind > maxKeyKind:
		return fmt.Errorf("record: unknown state key kind %d", uint8(k.Kind))
	case !k.Kind.named() && k.Name != "":
		return fmt.Errorf("record: a %s key has no name (got %q)", k.Kind, k.Name)
	}
	return nil
}

// Overlaps reports whether a change of k can change what o names: the
// same key, or either is KeyFrame.
func (k StateKey) Overlaps(o StateKey) bool {
	return k == o || k.Kind == KeyFrame || o.Kind == KeyFrame
}

// CompareStateKeys orders keys by kind, then by name bytes: the order of
// BranchBase.Reads.
func CompareStateKeys(a, b StateKey) int {
	if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// BranchBase is the data of an atom's ExtTagBase extension.
type BranchBase struct {
	Base   uint64     // the seq whose state the branch read
	Branch string     // the branch's name
	Reads  []StateKey // declared reads, strictly ascending (CompareStateKeys)
}

// CheckBranchName reports why name cannot name a branch (the run-id rule),
// or nil.
func CheckBranchName(name string) error {
	if err := runid.Check(name); err != nil {
		return fmt.Errorf("record: invalid branch name: %w", err)
	}
	return nil
}

// SortStateKeys sorts keys in the order of BranchBase.Reads and removes
// duplicates, in place; it returns the result.
func SortStateKeys(keys []StateKey) []StateKey {
	slices.SortFunc(keys, CompareStateKeys)
	return slices.Compact(keys)
}

// AppendBranchBase appends the encoding of b (its Reads already sorted
// and unique: SortStateKeys).
func AppendBranchBase(dst []byte, b *BranchBase) []byte {
	dst = binary.AppendUvarint(dst, b.Base)
	dst = AppendString(dst, b.Branch)
	dst = binary.AppendUvarint(dst, uint64(len(b.Reads)))
	for _, k := range b.Reads {
		dst = append(dst, byte(k.Kind))
		dst = AppendString(dst, k.Name)
	}
	return dst
}

// DecodeBranchBase decodes the data of an ExtTagBase extension. It checks
// the encoding and the rules above that need nothing but the data (the
// name's rule, the keys' kinds, names and order); that base < seq is the
// caller's to check (CheckBase). Names alias data.
func DecodeBranchBase(data []byte) (*BranchBase, error) {
	f := Fields{b: data}
	b := &BranchBase{Base: f.Uvarint("branch base")}
	name := f.Bytes("branch name", runid.MaxLen)
	if f.err == nil {
		if err := CheckBranchName(string(name)); err != nil {
			f.Fail("%v", err)
		}
	}
	n := f.Uvarint("read count")
	if f.err == nil && (n > MaxBranchReads || n*2 > uint64(len(data)-f.off)) {
		f.Fail("read count %d out of range (at most %d, and 2 bytes each)", n, MaxBranchReads)
	}
	if f.err != nil {
		return nil, fmt.Errorf("branch base: %w", f.err)
	}
	b.Branch = string(name)
	b.Reads = make([]StateKey, 0, n)
	for i := uint64(0); i < n && f.err == nil; i++ {
		k := StateKey{Kind: KeyKind(f.Byte("key kind"))}
		kname := f.Bytes("key name", len(data))
		if f.err != nil {
			break
		}
		k.Name = string(kname)
		if err := k.Check(); err != nil {
			f.Fail("read %d: %v", i, err)
		} else if len(b.Reads) > 0 && CompareStateKeys(b.Reads[len(b.Reads)-1], k) >= 0 {
			f.Fail("read %d (%s) does not follow read %d (%s) in order", i, k, i-1, b.Reads[len(b.Reads)-1])
		}
		b.Reads = append(b.Reads, k)
	}
	if err := f.Done("branch base"); err != nil {
		return nil, fmt.Errorf("branch base: %w", err)
	}
	return b, nil
}

// CheckBase reports why b cannot be the base of atom seq of a run whose
// own atoms start after seq from (0, or a fork's fork point), or nil: the
// base is before the atom, not before the run's own history starts, and
// at most MaxBranchLag atoms behind.
func (b *BranchBase) CheckBase(seq, from uint64) error {
	switch {
	case b.Base >= seq:
		return fmt.Errorf("branch %q of atom %d has base %d: a base is before its atom", b.Branch, seq, b.Base)
	case b.Base < from:
		return fmt.Errorf("branch %q of atom %d has base %d, before the run's fork point %d", b.Branch, seq, b.Base, from)
	case seq-1-b.Base > MaxBranchLag:
		return fmt.Errorf("branch %q of atom %d has base %d, more than %d atoms before it", b.Branch, seq, b.Base, MaxBranchLag)
	}
	return nil
}

// DeltaWrites returns the state keys d writes, sorted and unique: what a
// branch's commit is checked on (and verify checks again). set_objective
// writes the objective; add_subgoal and set_subgoal_status the subgoal;
// set and delete the memory key; append_scratch and clear_scratch the
// scratchpad; append_message and drop_messages the conversation;
// add_pending and remove_pending the pending action; tool_output and
// tool_output_ref the conversation and the pending action; an op this
// version does not know, the whole frame.
func DeltaWrites(d *frame.Delta) []StateKey {
	ops := d.Ops()
	keys := make([]StateKey, 0, len(ops)+1)
	for _, o := range ops {
		switch o.Kind {
		case "set_objective":
			keys = append(keys, StateKey{Kind: KeyObjective})
		case "add_subgoal", "set_subgoal_status":
			keys = append(keys, StateKey{Kind: KeySubgoal, Name: o.ID})
		case "set", "set_sealed", "delete":
			keys = append(keys, StateKey{Kind: KeyMemory, Name: o.Key})
		case "append_scratch", "clear_scratch":
			keys = append(keys, StateKey{Kind: KeyScratchpad})
		case "append_message", "drop_messages":
			keys = append(keys, StateKey{Kind: KeyMessages})
		case "add_pending", "remove_pending":
			keys = append(keys, StateKey{Kind: KeyPending, Name: o.CallID})
		case "tool_output", "tool_output_ref":
			keys = append(keys, StateKey{Kind: KeyMessages}, StateKey{Kind: KeyPending, Name: o.CallID})
		default:
			keys = append(keys, StateKey{Kind: KeyFrame})
		}
	}
	return SortStateKeys(keys)
}

// Overlap returns a key of a that overlaps one of b (both sorted:
// SortStateKeys), and whether there is one.
func Overlap(a, b []StateKey) (StateKey, bool) {
	if n := len(a); n > 0 && a[n-1].Kind == KeyFrame && len(b) > 0 {
		return a[n-1], true
	}
	if n := len(b); n > 0 && b[n-1].Kind == KeyFrame && len(a) > 0 {
		return a[0], true
	}
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch c := CompareStateKeys(a[i], b[j]); {
		case c == 0:
			return a[i], true
		case c < 0:
			i++
		default:
			j++
		}
	}
	return StateKey{}, false
}

// AtomBranch returns the branch base of an atom body, nil if the atom is
// no branch (its base is seq-1), or the extension's damage.
func (a *AtomBody) AtomBranch() (*BranchBase, error) {
	data, ok := a.Ext(ExtTagBase)
	if !ok {
		return nil, nil
	}
	return DecodeBranchBase(data)
}
