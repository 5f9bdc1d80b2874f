package snapshot

// A Store's failure: the first one is sticky, fences Pebble off from its
// files, and closes Pebble in the background; Close is bounded.

import (
	"errors"
	"fmt"
	"time"
)

// CloseTimeout bounds Close: Pebble's own close waits for the flush or
// compaction in flight, and a Store gives it this long before it abandons
// the Pebble instance (its goroutines and its directory lock then live on
// until the process exits; it writes nothing, being fenced).
const CloseTimeout = 10 * time.Second

// abandonOpen closes Pebble after Open found it unusable.
func (s *Store) abandonOpen() {
	s.mu.Lock()
	s.mu.closed, s.mu.down = true, true
	s.mu.Unlock()
	if err := s.waitPebble(); err != nil {
		s.logger.Debug("snapshot: closing a store that failed to open", "dir", s.dir, "err", err)
	}
}

// Err returns the store's sticky failure (see Stats.Failed), or nil.
func (s *Store) Err() error {
	if f := s.failed.Load(); f != nil {
		return *f
	}
	return nil
}

func (s *Store) isFailed() bool { return s.failed.Load() != nil }

// Failed returns a channel that is closed when the store fails.
func (s *Store) Failed() <-chan struct{} { return s.failedCh }

// Fail marks the store failed because of err, damage found by the caller:
// a value that disagrees with what it was derived from. It is ErrCorrupt
// for the store's sticky error whatever err is. Nothing more is read from
// or written to the store; Pebble is closed in the background.
func (s *Store) Fail(err error) {
	if !errors.Is(err, ErrCorrupt) {
		err = fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	s.fail(err)
}

// fail makes err the store's sticky failure, unless it already has one, in
// which case err is only counted. The first failure is logged once, fences
// Pebble off from its files (nothing more is written: what is on disk stays
// a state Pebble's recovery opens) and closes Pebble in the background:
// nothing more is read from it either, and none of its background work
// (a compaction that keeps meeting a damaged table) goes on.
func (s *Store) fail(err error) {
	s.backgroundErrors.Add(1)
	e := fmt.Errorf("%w: %s: %w", ErrFailed, s.dir, err)
	if !s.failed.CompareAndSwap(nil, &e) {
		s.logger.Debug("snapshot: later error of a failed store", "dir", s.dir, "err", err)
		return
	}
	// The fence first: once Failed says so, no operation that checks the
	// fence from then on reaches the files.
	if s.fence != nil {
		s.fence.Trip(err)
	}
	close(s.failedCh)
	s.cancel()
	s.logger.Error("snapshot: store failed; it is fenced off and closed, and answers nothing more", "dir", s.dir, "err", err)
	go s.shutdown()
}

// shutdown closes Pebble once the calls in flight have returned. During
// Open (db not set yet) it only marks the store down: Open sees the failure
// and closes Pebble itself.
func (s *Store) shutdown() {
	s.mu.Lock()
	s.mu.down = true
	opened := s.db != nil
	s.mu.Unlock()
	if opened {
		s.closePebble()
	}
}

// closePebble starts closing Pebble, once. The caller holds no lock and has
// set mu.down (under mu), so that no call uses db any more.
func (s *Store) closePebble() {
	s.pebbleOnce.Do(func() {
		if s.db == nil {
			close(s.pebbleClosed)
			return
		}
		go func() {
			defer close(s.pebbleClosed)
			defer func() {
				// A Pebble that failed may find its own state inconsistent
				// while closing (a failed fsync it was told succeeded);
				// its close panics on this goroutine, not the caller's.
				if r := recover(); r != nil {
					s.pebbleErr = fmt.Errorf("snapshot: closing %s: %v", s.dir, r)
				}
			}()
			// A write that waits inside Pebble forever keeps it open
			// forever too: the caller of Close gives up after CloseTimeout.
			s.inflight.Wait()
			if err := s.db.Close(); err != nil {
				s.pebbleErr = fmt.Errorf("snapshot: closing %s: %w", s.dir, err)
			}
		}()
	})
}

// waitPebble closes Pebble and waits for it, at most CloseTimeout.
func (s *Store) waitPebble() error {
	s.closePebble()
	t := time.NewTimer(CloseTimeout)
	defer t.Stop()
	select {
	case <-s.pebbleClosed:
		return s.pebbleErr
	case <-t.C:
		err := fmt.Errorf("snapshot: closing %s: Pebble did not close within %v; abandoned (it writes nothing more)", s.dir, CloseTimeout)
		s.logger.Error(err.Error())
		return err
	}
}
