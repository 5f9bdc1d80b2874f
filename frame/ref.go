package frame

import (
	"fmt"
	"strconv"
)

// References to certified results.
//
// A tool's result is certified by the ledger before the atom that records
// it commits, so a delta need not hold a second copy: a message text or a
// tool output can instead refer to "certified result number i of this
// atom's actions", a few bytes. Whoever applies such a delta resolves the
// references (ApplyWith); the frame it gives is the one the delta with the
// texts inline gives, so frames, snapshots and State never show a
// reference.

// Resolver returns the bytes of certified result number i of the actions
// of the atom whose delta is applied: the engine reads them from the
// atom's certificates. An error (no such result) makes ApplyWith fail and
// leave the frame unchanged. The bytes are copied; the resolver may reuse
// them afterwards.
type Resolver func(i int) ([]byte, error)

// ReferResults returns a delta that applies as d does, in which every
// message text and tool output (a message's Content, a text or
// tool_result part's Text, ToolOutput's output) equal to a non-empty
// results[i] refers to certified result i instead of holding a copy; the
// lowest such i wins. results are the certified results of the atom's
// actions, in the order of their indexes (nil for an index that has
// none). ApplyWith(ReferResults(d, results), resolver of results) gives the
// frame Apply(d) gives.
//
// d is not changed, and ops without a match are shared with it. If
// nothing matches, ReferResults returns d itself.
func (d *Delta) ReferResults(results [][]byte) *Delta {
	if d == nil || len(results) == 0 {
		return d
	}
	match := func(s string) uint64 {
		if s == "" {
			return 0
		}
		for i, r := range results {
			if len(r) == len(s) && string(r) == s && i <= maxResultIndex {
				return uint64(i) + 1
			}
		}
		return 0
	}
	var out *referred
	for i := range d.ops {
		o := &d.ops[i]
		var n op
		switch o.kind {
		case opToolOutput:
			r := match(o.s3)
			if r == 0 {
				continue
			}
			n = op{kind: opToolOutputRef, s1: o.s1, s2: o.s2, n: r - 1}
		case opAppendMessage:
			e, ok := referMessage(o, match)
			if !ok {
				continue
			}
			if out == nil {
				out = newReferred(d)
			}
			n = *o
			n.ext = out.newExt(e)
			if e.contentRef != 0 {
				n.s2 = ""
			}
		default:
			continue
		}
		if out == nil {
			out = newReferred(d)
		}
		out.d.ops[i] = n
	}
	if out == nil {
		return d
	}
	return &out.d
}

// referred is the delta ReferResults returns, with room for its first
// message extension: one allocation fewer for an agent's delta (one
// message answering a tool).
type referred struct {
	d    Delta
	ext  msgExt
	used bool // ext is taken
}

// newReferred returns a referred holding a copy of d's ops.
func newReferred(d *Delta) *referred {
	return &referred{d: Delta{ops: append([]op(nil), d.ops...)}}
}

// newExt returns e at an address of its own: r's room the first time.
func (r *referred) newExt(e msgExt) *msgExt {
	if !r.used {
		r.used = true
		r.ext = e
		return &r.ext
	}
	p := new(msgExt)
	*p = e
	return p
}

// referMessage returns the extension of message op o with the references
// match finds, and whether it found any. It returns the extension by value:
// only a message that takes a reference costs its caller an allocation.
func referMessage(o *op, match func(string) uint64) (msgExt, bool) {
	var e msgExt
	if o.ext != nil {
		e = *o.ext
	}
	found := false
	if e.contentRef == 0 {
		if r := match(o.s2); r != 0 {
			e.contentRef, found = r, true
		}
	}
	copied := false
	for j := range e.parts {
		p := &e.parts[j]
		if (p.Kind != PartText && p.Kind != PartToolResult) || e.partRef(j) != 0 {
			continue
		}
		r := match(p.Text)
		if r == 0 {
			continue
		}
		if !copied {
			// Copy on write: the parts and references of o stay as they are.
			e.parts = append([]Part(nil), e.parts...)
			refs := make([]uint64, len(e.parts))
			copy(refs, e.partRefs)
			e.partRefs, copied = refs, true
		}
		e.parts[j].Text = ""
		e.partRefs[j] = r
		found = true
	}
	return e, found
}

// Refs returns the indexes of the certified results d refers to, in the
// order of its ops, each once; nil if it refers to none. The engine reads
// these results' certificates to apply d.
func (d *Delta) Refs() []int {
	if d == nil {
		return nil
	}
	var out []int
	for i := range d.ops {
		o := &d.ops[i]
		switch {
		case o.kind == opToolOutputRef && o.n <= maxResultIndex:
			out = addRef(out, o.n)
		case o.kind == opAppendMessage && o.ext != nil:
			if o.ext.contentRef != 0 {
				out = addRef(out, o.ext.contentRef-1)
			}
			for _, r := range o.ext.partRefs {
				if r != 0 {
					out = addRef(out, r-1)
				}
			}
		}
	}
	return out
}

// addRef appends result index r to out unless out holds it.
func addRef(out []int, r uint64) []int {
	for _, v := range out {
		if uint64(v) == r {
			return out
		}
	}
	return append(out, int(r))
}

// MayRefer reports whether b, a delta as AppendDelta encodes it, may
// refer to certified results, from its first byte alone: only versions 2
// and 4 hold references (version 3 holds one replace_frame op), so false
// means it refers to none and a reader that needs only its references
// need not decode it. True says nothing more (Refs of the decoded delta
// does).
func MayRefer(b []byte) bool { return len(b) > 0 && (b[0] == tagDelta2 || b[0] == tagDelta4) }

// hasRefs reports whether d refers to a certified result.
func (d *Delta) hasRefs() bool {
	if d == nil {
		return false
	}
	for i := range d.ops {
		if d.ops[i].hasRefs() {
			return true
		}
	}
	return false
}

// Resolve returns d with every reference to a certified result replaced by
// the bytes results returns for it: the delta that holds its texts inline,
// which Apply takes. A delta without references is returned as it is (and
// results may then be nil). d is not changed; ops without references are
// shared with it.
//
// It fails, with an error matching ErrUnresolved that names the op and the
// result and wraps the resolver's error, if results fails or is nil, and
// with ErrInvalidOp too for an index out of range (a negative
// ToolOutputResult).
func (d *Delta) Resolve(results Resolver) (*Delta, error) {
	if !d.hasRefs() {
		return d, nil
	}
	out := &Delta{ops: append([]op(nil), d.ops...)}
	get := func(i int, o *op, r uint64) (string, error) {
		if r > maxResultIndex {
			return "", fmt.Errorf("%w: %w: op %d (%s): result index %d out of range", ErrInvalidOp, ErrUnresolved, i, o.kind, int64(r))
		}
		if results == nil {
			return "", fmt.Errorf("%w: op %d (%s): certified result %d: no resolver given", ErrUnresolved, i, o.kind, r)
		}
		b, err := results(int(r))
		if err != nil {
			return "", fmt.Errorf("%w: op %d (%s): certified result %d: %w", ErrUnresolved, i, o.kind, r, err)
		}
		return string(b), nil
	}
	for i := range out.ops {
		o := &out.ops[i]
		if !o.hasRefs() {
			continue
		}
		if o.kind == opToolOutputRef {
			s, err := get(i, o, o.n)
			if err != nil {
				return nil, err
			}
			*o = op{kind: opToolOutput, s1: o.s1, s2: o.s2, s3: s}
			continue
		}
		e := *o.ext
		if e.contentRef != 0 {
			s, err := get(i, o, e.contentRef-1)
			if err != nil {
				return nil, err
			}
			o.s2, e.contentRef = s, 0
		}
		if e.partRefs != nil {
			e.parts = append([]Part(nil), e.parts...)
			for j, r := range e.partRefs {
				if r == 0 {
					continue
				}
				s, err := get(i, o, r-1)
				if err != nil {
					return nil, err
				}
				e.parts[j].Text = s
			}
			e.partRefs = nil
		}
		if e.flags() == 0 {
			o.ext = nil
		} else {
			o.ext = &e
		}
	}
	return out, nil
}

// ApplyWith is Apply for a delta that may refer to certified results: it
// resolves them with results, then applies the delta that holds them
// inline. All or nothing, like Apply: on any error (a result that cannot
// be resolved, an op that cannot apply) f is unchanged. For a delta
// without references it is Apply, and results is not called.
func (f *Frame) ApplyWith(d *Delta, results Resolver) error {
	r, err := d.Resolve(results)
	if err != nil {
		return err
	}
	return f.Apply(r)
}

// CanApplyWith reports whether ApplyWith(d, results) would succeed,
// without changing f. It calls results for every reference.
func (f *Frame) CanApplyWith(d *Delta, results Resolver) error {
	r, err := d.Resolve(results)
	if err != nil {
		return err
	}
	return f.CanApply(r)
}

func unresolvedErr(i int, o *op) error {
	r := o.n
	if o.kind == opAppendMessage {
		if r = o.ext.contentRef; r == 0 {
			for _, pr := range o.ext.partRefs {
				if pr != 0 {
					r = pr
					break
				}
			}
		}
		r--
	}
	what := "certified result " + strconv.FormatUint(r, 10)
	if r > maxResultIndex {
		what = "a certified result out of range"
	}
	return fmt.Errorf("%w: op %d (%s): refers to %s, which Apply cannot resolve (%w): apply it with ApplyWith",
		ErrInvalidOp, i, o.kind, what, ErrUnresolved)
}
