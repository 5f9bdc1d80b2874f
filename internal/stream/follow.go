package stream

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/record"
)

// Reader is a run as a read that follows one of its streams sees it (the
// engine's adapter over its run; see the package's doc).
type Reader interface {
	// Live returns nil while the store is open and the run not deleted,
	// else the error the read returns.
	Live() error
	// Ended reports whether the run has ended (its end durable).
	Ended() bool
	// Stopping returns a channel closed when the store closes, and the
	// error a read waiting on it then returns.
	Stopping() (<-chan struct{}, error)
}

// Follow returns what Read returns of stream name of run rd from offset
// from, at most max chunks (0: 1000) and maxBytes (0: 4 MiB) of data past
// the first, after checking name (record.CheckStreamName); with wait
// it waits, until ctx ends or the store closes, for at least one chunk or
// the stream's end when there is none from the offset now. A run that
// ended before the read has every chunk durable (its end record follows
// them): an empty batch of it is the stream's end.
func (x *Index) Follow(ctx context.Context, rd Reader, run, name string, from uint64, max, maxBytes int, wait bool) (Batch, error) {
	if max <= 0 {
		max = 1000
	}
	if maxBytes <= 0 {
		maxBytes = 4 << 20
	}
	if err := record.CheckStreamName(name); err != nil {
		return Batch{}, fmt.Errorf("engine: run %q: read stream: %w", run, err)
	}
	for {
		if err := rd.Live(); err != nil {
			return Batch{}, err
		}
		if err := ctx.Err(); err != nil {
			return Batch{}, err
		}
		ended := rd.Ended()
		b, err := x.Read(run, name, from, max, maxBytes)
		if err != nil {
			return Batch{}, fmt.Errorf("engine: run %q: read stream %q: %w", run, name, err)
		}
		if len(b.Chunks) > 0 || b.Ended {
			return b, nil
		}
		if ended && b.Wake != nil {
			// Ended before the read: every chunk is durable, so none is
			// pending; the index learns of the end after its record is
			// durable.
			if again, err := x.Read(run, name, from, max, maxBytes); err == nil && len(again.Chunks) == 0 {
				b.Ended = true
				return b, nil
			}
			continue
		}
		if !wait {
			return b, nil
		}
		stop, stopErr := rd.Stopping()
		select {
		case <-b.Wake:
		case <-ctx.Done():
			return Batch{}, ctx.Err()
		case <-stop:
			return Batch{}, stopErr
		}
	}
}
