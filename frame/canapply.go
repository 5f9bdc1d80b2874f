package frame

import "fmt"

// CanApply reports whether d applies to f, without changing f: it returns
// the error Apply would return, or nil, in which case Apply(d) succeeds. The
// engine checks a delta before making it durable and applies it after.
func (f *Frame) CanApply(d *Delta) error {
	if f == nil {
		return fmt.Errorf("%w: Apply on a nil frame", ErrInvalidOp)
	}
	if d == nil {
		return nil
	}
	return f.check(d)
}
