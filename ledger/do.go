// The Do state machine: running an action exactly once through the
// journal, and resolving an action in doubt.

package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

func checkIntent(in *Intent) error {
	switch {
	case in == nil:
		return fmt.Errorf("%w: nil intent", ErrBadIntent)
	case in.Tool == "":
		return fmt.Errorf("%w: %w", ErrBadIntent, ErrNoTool)
	case in.Key == "":
		return fmt.Errorf("%w: tool %q: %w", ErrBadIntent, in.Tool, ErrNoKey)
	}
	return nil
}

// Do runs the action described by in exactly once across crashes (I3):
//
//   - certified (done or resolved): returns the stored result, from memory or
//     else from j.ReadCertificate; exec is not called.
//   - unknown or failed: j.WriteIntent, then exec(ctx, in.Key), then
//     j.WriteCertificate (done with the result, or failed with the error's
//     text), then the result, or exec's error wrapped (errors.Is and
//     errors.As see the original). A failed action may be tried again.
//   - in doubt (a durable intent, no certificate, not running in this
//     process): if in.Idempotent, exec is called again with the same key
//     (no second intent), then the certificate; otherwise an *InDoubtError
//     (errors.Is(err, ErrInDoubt)).
//   - running in another goroutine: waits for it (or for ctx) and returns
//     its outcome; exec runs once.
//
// An exec error matching ErrUncertified writes no certificate: the action
// stays in doubt, and the error matches ErrInDoubt as well.
//
// If WriteIntent fails, exec is not called and the error is returned. If
// WriteCertificate fails after exec returned, the error is returned and the
// action stays in doubt: its effect may have happened but is not
// certified, exactly as after a crash at that point. The certificate is
// written with ctx's values but without its cancellation, since the effect
// has already happened. If exec panics, the action stays in doubt, waiters
// get an error, and the panic continues.
//
// in must be the intent of the action (see NewIntent); Do does not
// recompute its fingerprint. The returned result belongs to the caller.
func (l *Ledger) Do(ctx context.Context, j Journal, in *Intent, exec Exec) ([]byte, error) {
	result, _, err := l.DoRecorded(ctx, j, in, exec)
	return result, err
}

// DoRecorded is Do that also returns what the certificate holds of the
// result: the same bytes, except when this call ran exec and the
// certificate stores it scrubbed (see Certificate), in which case result is
// exec's own and recorded the certificate's. A caller that chains the
// result (the engine's atom records its digest) uses recorded. recorded
// may share memory with the ledger: the caller must not change it.
func (l *Ledger) DoRecorded(ctx context.Context, j Journal, in *Intent, exec Exec) (result, recorded []byte, err error) {
	if err := checkIntent(in); err != nil {
		return nil, nil, err
	}
	if exec == nil || j == nil {
		return nil, nil, fmt.Errorf("%w: tool %q: nil exec or journal", ErrBadIntent, in.Tool)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	result, recorded, err = l.do(ctx, j, in, exec)
	if recorded == nil {
		recorded = result
	}
	return result, recorded, err
}

func (l *Ledger) do(ctx context.Context, j Journal, in *Intent, exec Exec) (result, recorded []byte, err error) {
	fp := in.Fingerprint
	one := func(r []byte, err error) ([]byte, []byte, error) { return r, nil, err }

	// Fast path, under the read lock: a certified action (the hit path).
	l.mu.RLock()
	if cur, _, _ := l.lookupLocked(&fp); cur.flight == nil && cur.status.certified() {
		r := bytes.Clone(cur.result)
		l.mu.RUnlock()
		if cur.result != nil {
			return r, nil, nil
		}
		return one(l.readResult(j, fp, cur.certLoc))
	}
	l.mu.RUnlock()

	l.mu.Lock()
	cur, p, _ := l.lookupLocked(&fp)
	if cur.flight != nil {
		f := cur.flight
		if f.done == nil { // the first to wait for it makes the channel
			f.done = make(chan struct{})
		}
		done := f.done
		l.mu.Unlock()
		select {
		case <-done:
			return bytes.Clone(f.result), nil, f.err
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	switch {
	case cur.status.certified():
		l.mu.Unlock()
		if cur.result != nil {
			return bytes.Clone(cur.result), nil, nil
		}
		return one(l.readResult(j, fp, cur.certLoc))
	case cur.status == StatusIntent && !in.Idempotent:
		l.mu.Unlock()
		return nil, nil, &InDoubtError{Key: in.Key, Tool: in.Tool, RunID: in.RunID, Seq: in.Seq, Index: in.Index, Fingerprint: fp}
	}
	e := l.ensureLocked(&fp, cur, p)
	f := &flight{}
	e.flight = f
	l.mu.Unlock()
	if in.Retry != nil {
		return l.runRetry(ctx, j, in, exec, e, f, cur)
	}
	return l.run(ctx, j, in, exec, e, f, cur.status != StatusIntent)
}

// readResult fetches a certified result that is not held in memory.
func (l *Ledger) readResult(j Journal, fp Fingerprint, loc Loc) ([]byte, error) {
	c, err := j.ReadCertificate(loc)
	if err != nil {
		return nil, fmt.Errorf("ledger: reading certificate of %s at segment %d offset %d: %w",
			fp, loc.Segment, loc.Offset, err)
	}
	if c == nil || c.Fingerprint != fp || !c.Status.certified() {
		return nil, fmt.Errorf("%w: certificate at segment %d offset %d is not the certificate of %s",
			ErrCorrupt, loc.Segment, loc.Offset, fp)
	}
	if c.Result == nil {
		return []byte{}, nil
	}
	return c.Result, nil
}

// run is Do's slow path: entry e is in flight f, owned by this goroutine.
func (l *Ledger) run(ctx context.Context, j Journal, in *Intent, exec Exec, e *entry, f *flight, needIntent bool) (result, recorded []byte, err error) {
	fp := in.Fingerprint
	landed := false
	defer func() {
		if landed {
			return
		}
		// Exec or the journal panicked. Whatever is durable stays as it is:
		// a durable intent without certificate is in doubt.
		l.mu.Lock()
		l.landLocked(&fp, e, f, nil, fmt.Errorf("ledger: tool %q panicked while running; the action is in doubt", in.Tool))
		l.mu.Unlock()
	}()

	if needIntent {
		l.journal(func() (Loc, error) { return j.WriteIntent(ctx, in) }, func(loc Loc, werr error) {
			if werr != nil {
				err = fmt.Errorf("ledger: writing the intent of tool %q: %w", in.Tool, werr)
				l.landLocked(&fp, e, f, nil, err)
				landed = true
				return
			}
			e.status, e.intentLoc, e.result = StatusIntent, loc, nil
		})
		if landed {
			return nil, nil, err
		}
	}

	res, execErr := exec(ctx, in.Key)
	if errors.Is(execErr, ErrUncertified) {
		// No certificate: the action stays in doubt (its intent is durable).
		l.mu.Lock()
		err = fmt.Errorf("ledger: tool %q: %w: %w", in.Tool, execErr,
			&InDoubtError{Key: in.Key, Tool: in.Tool, RunID: in.RunID, Seq: in.Seq, Index: in.Index, Fingerprint: fp})
		l.landLocked(&fp, e, f, nil, err)
		landed = true
		l.mu.Unlock()
		return nil, nil, err
	}

	// What is stored is scrubbed of the action's secrets; the caller gets
	// exec's own result and error.
	c := &Certificate{Fingerprint: fp, RunID: in.RunID, Seq: in.Seq, Index: in.Index, ExplicitKey: in.ExplicitKey()}
	if execErr != nil {
		c.Status, c.Err = StatusFailed, in.scrub.text(execErr.Error())
	} else {
		c.Status, c.Result = StatusDone, bytes.Clone(in.scrub.result(res))
		if c.Result == nil {
			c.Result = []byte{}
		}
	}
	l.journal(func() (Loc, error) { return j.WriteCertificate(uncancelled(ctx), c) }, func(loc Loc, werr error) {
		switch {
		case werr != nil && execErr != nil:
			err = fmt.Errorf("ledger: tool %q failed (%w) and recording the failure failed too (%w); the action is in doubt",
				in.Tool, execErr, werr)
			l.landLocked(&fp, e, f, nil, err)
		case werr != nil:
			err = fmt.Errorf("ledger: tool %q succeeded but writing its certificate failed: %w; the action is in doubt",
				in.Tool, werr)
			l.landLocked(&fp, e, f, nil, err)
		case execErr != nil:
			err = fmt.Errorf("ledger: tool %q: %w", in.Tool, execErr)
			e.status, e.certLoc, e.result = StatusFailed, loc, nil
			l.landLocked(&fp, e, f, nil, err)
		default:
			e.status, e.certLoc, e.result = StatusDone, loc, c.Result
			result, recorded = res, c.Result
			l.landLocked(&fp, e, f, c.Result, nil)
		}
		landed = true
	})
	return result, recorded, err
}

// uncancelled is ctx without its cancellation (context.WithoutCancel),
// or ctx itself when nothing can cancel it (no Done channel): a
// certificate is written whatever the caller's context does, and a
// context nothing can cancel (context.Background, the usual one of an
// agent's loop) needs no wrapper, which would allocate.
func uncancelled(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		if _, ok := ctx.Deadline(); !ok {
			return ctx
		}
	}
	return context.WithoutCancel(ctx)
}

// journal runs one Journal write and applies its outcome to the index with
// l.mu held, all under the shared gate, so that Checkpoint sees either
// neither or both. A panicking write releases the gate.
func (l *Ledger) journal(write func() (Loc, error), apply func(Loc, error)) {
	l.gate.RLock()
	defer l.gate.RUnlock()
	loc, err := write()
	l.mu.Lock()
	defer l.mu.Unlock()
	apply(loc, err)
}

// Resolve records the outcome the agent found for an action in doubt: a
// certificate with StatusResolved and result, after which Do returns result
// and never calls exec. It also accepts an action with no record at all or a
// failed one (only the certificate is written). For a certified action it
// returns ErrAlreadyCertified; while the action runs in this process,
// ErrInFlight.
func (l *Ledger) Resolve(ctx context.Context, j Journal, in *Intent, result []byte) error {
	if result == nil {
		result = []byte{}
	}
	return l.resolve(ctx, j, in, StatusResolved, bytes.Clone(result), "")
}

// ResolveFailed records that the agent found an in-doubt action did not
// take effect: a certificate with StatusFailed and reason, after which Do
// may run it again. Its errors are those of Resolve.
func (l *Ledger) ResolveFailed(ctx context.Context, j Journal, in *Intent, reason string) error {
	return l.resolve(ctx, j, in, StatusFailed, nil, reason)
}

func (l *Ledger) resolve(ctx context.Context, j Journal, in *Intent, st Status, result []byte, reason string) error {
	if err := checkIntent(in); err != nil {
		return err
	}
	if j == nil {
		return fmt.Errorf("%w: tool %q: nil journal", ErrBadIntent, in.Tool)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fp := in.Fingerprint
	l.mu.Lock()
	cur, p, _ := l.lookupLocked(&fp)
	switch {
	case cur.flight != nil:
		l.mu.Unlock()
		return fmt.Errorf("%w: tool %q, fingerprint %s", ErrInFlight, in.Tool, fp)
	case cur.status.certified():
		l.mu.Unlock()
		return fmt.Errorf("%w: tool %q, fingerprint %s is %s", ErrAlreadyCertified, in.Tool, fp, cur.status)
	}
	e := l.ensureLocked(&fp, cur, p)
	f := &flight{}
	e.flight = f
	l.mu.Unlock()

	// A resolution is stored scrubbed like exec's outcome (see Certificate).
	if st != StatusFailed {
		result = bytes.Clone(in.scrub.result(result))
	}
	reason = in.scrub.text(reason)
	c := &Certificate{Fingerprint: fp, RunID: in.RunID, Seq: in.Seq, Index: in.Index, Status: st, Result: result, Err: reason,
		ExplicitKey: in.ExplicitKey()}
	if in.Retry != nil && st == StatusFailed {
		// The attempt resolved as failed counts, and schedules the next.
		if err := l.resolveAttempt(j, in, &cur, c); err != nil {
			l.mu.Lock()
			l.landLocked(&fp, e, f, nil, err)
			l.mu.Unlock()
			return err
		}
	}
	var err error
	landed := false
	defer func() {
		if !landed { // the journal panicked
			l.mu.Lock()
			l.landLocked(&fp, e, f, nil, fmt.Errorf("ledger: recording the resolution of tool %q panicked", in.Tool))
			l.mu.Unlock()
		}
	}()
	l.journal(func() (Loc, error) { return j.WriteCertificate(ctx, c) }, func(loc Loc, werr error) {
		landed = true
		if werr != nil {
			err = fmt.Errorf("ledger: recording the resolution of tool %q: %w", in.Tool, werr)
			l.landLocked(&fp, e, f, nil, err)
			return
		}
		e.status, e.certLoc, e.result = st, loc, result
		e.tries = certTries(c, e.tries)
		if st == StatusFailed {
			l.landLocked(&fp, e, f, nil, fmt.Errorf("ledger: tool %q was resolved as failed: %s", in.Tool, reason))
		} else {
			l.landLocked(&fp, e, f, result, nil)
		}
	})
	return err
}
