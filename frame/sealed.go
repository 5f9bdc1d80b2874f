package frame

import "slices"

// SealSets returns d with its set ops sealed: fn is called, in order, with
// the key and value of every set op, and each op for which it returns
// ok is replaced, at its place, by a set_sealed op holding the sealed
// bytes fn returned (the delta keeps them: fn must not modify them
// afterwards). fn must not modify the value it is given either. The ops
// fn declines (ok false) and all the others are shared with d.
//
// When fn declines every set op (or d has none), SealSets returns d
// itself, without copying or allocating: the engine calls it on every
// commit, and most deltas seal nothing. d is never modified. An error of
// fn is returned as it is, with a nil delta.
func (d *Delta) SealSets(fn func(key string, value []byte) (sealed []byte, ok bool, err error)) (*Delta, error) {
	if d == nil {
		return d, nil
	}
	var out []op
	for i := range d.ops {
		o := &d.ops[i]
		if o.kind != opSet {
			continue
		}
		sealed, ok, err := fn(o.s1, o.b)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if out == nil {
			out = slices.Clone(d.ops)
		}
		out[i] = op{kind: opSetSealed, s1: o.s1, b: sealed}
	}
	if out == nil {
		return d, nil
	}
	return &Delta{ops: out}, nil
}

// Unseal returns f with its sealed values opened: fn is called with the
// key and sealed bytes of every sealed value and returns the plain value
// (ok true), or ok false for a value that cannot be opened and is left
// out (its data key was erased: the key is absent from the result). An
// error of fn is returned as it is, with a nil frame.
//
// When f holds no sealed value, Unseal returns f itself. Else it returns a
// new frame whose Sealed is nil and whose Memory holds f's plain values
// and the opened ones (the frame keeps the values fn returns). The new
// frame shares with f only what neither Apply nor Unseal ever modifies
// (strings, and the byte slices of values, arguments and message blocks,
// as Apply shares a delta's): its slices and maps are its own, so applying
// deltas to it never changes f. Clone it to modify its bytes in place.
func (f *Frame) Unseal(fn func(key string, sealed []byte) (value []byte, ok bool, err error)) (*Frame, error) {
	if f == nil || len(f.Sealed) == 0 {
		return f, nil
	}
	c := *f
	c.Sealed = nil
	c.Memory = make(map[string][]byte, len(f.Memory)+len(f.Sealed))
	for k, v := range f.Memory {
		c.Memory[k] = v
	}
	for k, v := range f.Sealed {
		val, ok, err := fn(k, v)
		if err != nil {
			return nil, err
		}
		if ok {
			c.Memory[k] = val
		}
	}
	// Apply appends to these and changes their elements in place
	// (statuses, dropped messages, removed pending actions): each gets its
	// own backing array, and the scratchpad one that an append must leave.
	c.Subgoals = slices.Clone(f.Subgoals)
	c.Messages = slices.Clone(f.Messages)
	c.Pending = slices.Clone(f.Pending)
	c.Scratchpad = slices.Clip(f.Scratchpad)
	return &c, nil
}

// MaySeal reports whether b, an encoded delta, may hold set_sealed ops:
// whether it is version 4 (the only version that holds them). It reads
// the tag alone, so that a reader can skip decoding the deltas that hold
// no sealed value.
func MaySeal(b []byte) bool { return len(b) > 0 && b[0] == tagDelta4 }

// HasSealed reports whether d holds a set_sealed op.
func (d *Delta) HasSealed() bool {
	if d == nil {
		return false
	}
	for i := range d.ops {
		if d.ops[i].kind == opSetSealed {
			return true
		}
	}
	return false
}

// ReplacedFrame returns the frame that d's replace_frame op replaces the
// run's with (decoded: a copy), or nil when d holds no such op.
func (d *Delta) ReplacedFrame() (*Frame, error) {
	if d == nil {
		return nil, nil
	}
	for i := range d.ops {
		if d.ops[i].kind == opReplaceFrame {
			return DecodeFrame(d.ops[i].b)
		}
	}
	return nil, nil
}
