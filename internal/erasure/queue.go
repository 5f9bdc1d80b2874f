package erasure

import "context"

// An erasure runs on the engine's background goroutine, where its engine
// checkpoints run, one at a time: the engine queues it (Do), and that
// goroutine serves the queue (Jobs), calling each job.

// Jobs is the queue the engine's background goroutine serves: it calls
// each job it receives.
func (e *Eraser) Jobs() <-chan func() { return e.jobs }

// Do hands job to the goroutine that serves Jobs and returns once job
// returned. It returns closedErr if stop is closed before job is taken
// (the store is closing), or ctx's error if ctx ends first; once taken, a
// job is not interrupted (an erasure goes on to its end; a crash in it is
// finished by the next Open).
func (e *Eraser) Do(ctx context.Context, stop <-chan struct{}, closedErr error, job func()) error {
	done := make(chan struct{})
	select {
	case e.jobs <- func() { defer close(done); job() }:
	case <-stop:
		return closedErr
	case <-ctx.Done():
		return ctx.Err()
	}
	<-done
	return nil
}
