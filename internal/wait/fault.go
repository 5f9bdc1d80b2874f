package wait

import (
	"runtime/debug"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
)

// guard runs f with a fault of a read of the mapped table turned into
// damage of WAITS (ErrCorrupt), which its callers meet as any other: the
// index is rebuilt from the log. A file mapped read only that is cut
// short under the mapping (by another process: the engine only ever
// replaces WAITS by a rename) makes the read of a page past its new end
// raise SIGBUS, which would otherwise end the process. Other panics go on
// up as they were.
func guard(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			fault, ok := r.(interface{ Addr() uintptr })
			if !ok {
				panic(r)
			}
			err = record.Corruptf(layout.WaitsName, "a read of the mapped file faulted at address %#x: "+
				"it was cut short or changed under the engine", fault.Addr())
		}
	}()
	return f()
}
