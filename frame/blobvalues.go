package frame

import (
	"slices"
	"unsafe"
)

// Values that may stand for a blob.
//
// The engine moves a large value out of the log into a blob (package blob)
// and leaves in its place a reference value (blob.Value), a short text.
// The values that can be so moved are the free-form ones: a memory value
// (set), a tool output (tool_output), a message's content and the text of
// a text or tool_result part (append_message). This file visits and
// replaces them; it neither knows nor checks what a reference value is.

// ValueFunc is given a value of a delta or a frame: a read-only view of
// its bytes (the caller must not change them, nor keep them after it
// returns).
type ValueFunc func(v []byte)

// bytesOf is a read-only view of s.
func bytesOf(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// Values calls fn with every value of d that may stand for a blob, in op
// order: memory values of set ops, tool outputs, message contents and
// the texts of text and tool_result parts (not those that refer to a
// certified result: their value is the certificate's). A replace_frame's
// frame is visited as Frame.Values visits it.
func (d *Delta) Values(fn ValueFunc) error {
	if d == nil {
		return nil
	}
	for i := range d.ops {
		o := &d.ops[i]
		switch o.kind {
		case opSet:
			fn(o.b)
		case opToolOutput:
			fn(bytesOf(o.s3))
		case opAppendMessage:
			e := o.ext
			if e == nil || e.contentRef == 0 {
				fn(bytesOf(o.s2))
			}
			if e != nil {
				for j, p := range e.parts {
					if (p.Kind == PartText || p.Kind == PartToolResult) && e.partRef(j) == 0 {
						fn(bytesOf(p.Text))
					}
				}
			}
		case opReplaceFrame:
			f, err := DecodeFrame(o.b)
			if err != nil {
				return err
			}
			f.Values(fn)
		}
	}
	return nil
}

// Values calls fn with every value of f that may stand for a blob: its
// memory values, and its messages' contents and text and tool_result
// part texts. Sealed values are not visited (they are opaque here).
func (f *Frame) Values(fn ValueFunc) {
	if f == nil {
		return
	}
	for _, v := range f.Memory {
		fn(v)
	}
	for i := range f.Messages {
		m := &f.Messages[i]
		fn(bytesOf(m.Content))
		for _, p := range m.Parts {
			if p.Kind == PartText || p.Kind == PartToolResult {
				fn(bytesOf(p.Text))
			}
		}
	}
}

// MapFunc is given a value of a delta (a read-only view, as ValueFunc's)
// and returns its replacement, with replace set, or replace false to keep
// it.
type MapFunc func(v []byte) (repl string, replace bool, err error)

// MapValues returns d with every value Values visits (but those inside a
// replace_frame, which the engine builds from a frame already mapped)
// replaced as fn says. d is not changed; if fn replaces nothing,
// MapValues returns d itself. An error of fn is returned as it is.
func (d *Delta) MapValues(fn MapFunc) (*Delta, error) {
	if d == nil {
		return d, nil
	}
	var out []op
	set := func(i int, o op) {
		if out == nil {
			out = slices.Clone(d.ops)
		}
		out[i] = o
	}
	for i := range d.ops {
		o := d.ops[i]
		switch o.kind {
		case opSet:
			r, ok, err := fn(o.b)
			if err != nil {
				return nil, err
			}
			if ok {
				o.b = []byte(r)
				set(i, o)
			}
		case opToolOutput:
			r, ok, err := fn(bytesOf(o.s3))
			if err != nil {
				return nil, err
			}
			if ok {
				o.s3 = r
				set(i, o)
			}
		case opAppendMessage:
			changed := false
			if o.ext == nil || o.ext.contentRef == 0 {
				r, ok, err := fn(bytesOf(o.s2))
				if err != nil {
					return nil, err
				}
				if ok {
					o.s2, changed = r, true
				}
			}
			if e := o.ext; e != nil && len(e.parts) > 0 {
				var parts []Part
				for j, p := range e.parts {
					if (p.Kind != PartText && p.Kind != PartToolResult) || e.partRef(j) != 0 {
						continue
					}
					r, ok, err := fn(bytesOf(p.Text))
					if err != nil {
						return nil, err
					}
					if !ok {
						continue
					}
					if parts == nil {
						// Copy on write: ext is never changed once built.
						parts = slices.Clone(e.parts)
					}
					parts[j].Text = r
				}
				if parts != nil {
					ne := *e
					ne.parts = parts
					o.ext, changed = &ne, true
				}
			}
			if changed {
				set(i, o)
			}
		}
	}
	if out == nil {
		return d, nil
	}
	return &Delta{ops: out}, nil
}
