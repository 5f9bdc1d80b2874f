package durable

import (
	"errors"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// DirSyncs is the fsyncs of a store's directories, started once, in the
// background, one after the other (Start). Nothing that depends on the
// directories' entries may be acknowledged before they succeed: a writer
// waits for them (Wait), and their failure is the store's to report like
// a failed write.
//
// They run at every Open, not only at the Open that creates the
// directories: a process that met a failed fsync, or died before one, may
// leave entries that exist only in the page cache (the store directory
// itself, STORE, a dictionary, a segment), and the next Open would build
// on them and acknowledge work whose files a power loss then takes away.
// An Open that knows every entry to be durable already (after a clean
// Close) skips them (Skip).
//
// The zero DirSyncs is not ready: Init makes it so, once, before any
// other method is called.
type DirSyncs struct {
	once sync.Once
	done chan struct{} // closed when the fsyncs have ended (or never will start)
	err  error         // set before done is closed
}

// Init readies s.
func (s *DirSyncs) Init() { s.done = make(chan struct{}) }

// Ready reports whether Init was called.
func (s *DirSyncs) Ready() bool { return s.done != nil }

// Start starts, once, an fsync of every directory dirs returns (called
// once, on the first Start), in the background, one after the other. With
// noSync they are taken as done at once.
func (s *DirSyncs) Start(fs vfs.FS, noSync bool, dirs func() []string) {
	s.once.Do(func() {
		if noSync {
			close(s.done)
			return
		}
		ds := dirs()
		go func() {
			defer close(s.done)
			var errs []error
			for _, d := range ds {
				if err := SyncDir(fs, d); err != nil {
					errs = append(errs, err)
				}
			}
			s.err = errors.Join(errs...)
		}()
	})
}

// Skip makes sure the fsyncs never start, and reports them done with no
// error: every entry is durable already. It does nothing once they started.
func (s *DirSyncs) Skip() { s.once.Do(func() { close(s.done) }) }

// Settle waits for the fsyncs if they started, and otherwise makes sure
// they never start: they end with the error closed (nothing may be
// acknowledged any more).
func (s *DirSyncs) Settle(closed error) {
	s.once.Do(func() { s.err = closed; close(s.done) })
	<-s.done
}

// Wait waits for the fsyncs, started already, to end and returns their
// error.
func (s *DirSyncs) Wait() error {
	<-s.done
	return s.err
}

// Synced reports, without waiting, whether the fsyncs have ended and
// succeeded.
func (s *DirSyncs) Synced() bool {
	select {
	case <-s.done:
		return s.err == nil
	default:
		return false
	}
}

// Err is the fsyncs' error once they ended (Settle or Wait returned), nil
// before and if they succeeded or were skipped.
func (s *DirSyncs) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}
