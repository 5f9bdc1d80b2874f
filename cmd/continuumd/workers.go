package main

import "time"

// workers runs functions on goroutines that are kept after they finish
// and reused by the next function, instead of starting a goroutine for
// each: the engine's Do runs deep, and a new goroutine grows its stack to
// it (copying it several times) at every call. A goroutine idle for
// workerIdle ends. The zero value is ready to use.
type workers struct {
	// jobs is unbuffered: a send succeeds only when an idle worker is
	// waiting for it.
	jobs chan func()
}

const workerIdle = 10 * time.Second

func (w *workers) run(f func()) {
	select {
	case w.jobs <- f:
	default:
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-w.jobs:
		case <-idle.C:
			return
		}
	}
}
