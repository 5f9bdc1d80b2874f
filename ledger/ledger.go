package ledger

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
)

// Journal is how the ledger makes its records durable. The engine implements
// it over its write-ahead log.
type Journal interface {
	// WriteIntent returns once the intent is as durable as the engine's mode
	// requires, with where it lives.
	WriteIntent(ctx context.Context, in *Intent) (Loc, error)
	// WriteCertificate returns once the certificate is as durable as the
	// engine's mode requires, with where it lives.
	WriteCertificate(ctx context.Context, c *Certificate) (Loc, error)
	// ReadCertificate fetches an older certificate whose result the ledger
	// does not hold in memory.
	ReadCertificate(loc Loc) (*Certificate, error)
}

// Entry is what the ledger knows about one fingerprint.
type Entry struct {
	Fingerprint Fingerprint
	Status      Status
	IntentLoc   Loc    // zero if no intent is known
	CertLoc     Loc    // zero if no certificate is known
	Result      []byte // a copy of the result if held in memory, else nil
	InFlight    bool   // a goroutine of this process is running or recording it
}

// Stats describes the index.
type Stats struct {
	Entries         int   // fingerprints with a durable record (Len)
	TableEntries    int   // entries of the loaded table
	MapEntries      int   // entries recorded or changed since the table was loaded
	InDoubt         int   // intents without certificate, not in flight
	InFlight        int   // fingerprints being run or recorded right now
	HeldResultBytes int64 // bytes of results held in memory
	TableBytes      int64 // bytes of the loaded table
}

// entry is the ledger's state for one fingerprint in the map.
type entry struct {
	status    Status
	intentLoc Loc
	certLoc   Loc
	// result is the certified result held in memory (non-nil, possibly
	// empty, when held); nil when not held. Owned by the ledger, never
	// handed out without a copy.
	result []byte
	// flight is non-nil while one goroutine of this process writes the
	// intent, runs exec or writes the certificate of this fingerprint;
	// others wait on it. An entry with a flight is never dropped.
	flight *flight
}

// flight is one run of an action in this process. result and err are set
// before done is closed and never change afterwards.
type flight struct {
	done   chan struct{}
	result []byte
	err    error
}

// Ledger is the in-memory fingerprint index and the Do state machine. It is
// safe for concurrent use. The zero Ledger is empty and ready to use, as is
// New's.
type Ledger struct {
	// gate orders the journal against Checkpoint: each Journal write holds
	// it shared from the call until its outcome is applied to the index;
	// Checkpoint holds it exclusively, so the table it writes contains
	// exactly the records written before its mark.
	gate sync.RWMutex

	mu struct {
		sync.RWMutex
		// table is the loaded persisted index, immutable; its bytes are
		// owned by the ledger.
		table table
		// entries holds the fingerprints recorded or changed since the
		// table was loaded (and those in flight); they take precedence
		// over the table.
		entries map[Fingerprint]*entry
	}
}

// New returns an empty ledger (the same as a zero Ledger).
func New() *Ledger {
	l := &Ledger{}
	l.mu.entries = make(map[Fingerprint]*entry)
	return l
}

// lookupLocked returns the state of fp (a copy), the map entry if there is
// one, and whether fp is known at all.
func (l *Ledger) lookupLocked(fp *Fingerprint) (entry, *entry, bool) {
	if p, ok := l.mu.entries[*fp]; ok {
		return *p, p, true
	}
	if i, ok := l.mu.table.find(fp); ok {
		return l.mu.table.at(i), nil, true
	}
	return entry{}, nil, false
}

// ensureLocked returns the map entry of fp, creating it from cur (the state
// lookupLocked returned) if needed.
func (l *Ledger) ensureLocked(fp *Fingerprint, cur entry, p *entry) *entry {
	if p != nil {
		return p
	}
	p = new(entry)
	*p = cur
	if l.mu.entries == nil {
		l.mu.entries = make(map[Fingerprint]*entry)
	}
	l.mu.entries[*fp] = p
	return p
}

// landLocked ends flight f of entry e with its outcome and wakes waiters.
func (l *Ledger) landLocked(fp *Fingerprint, e *entry, f *flight, result []byte, err error) {
	f.result, f.err = result, err
	e.flight = nil
	close(f.done)
	if e.status == StatusNone {
		if _, inTable := l.mu.table.find(fp); !inTable {
			delete(l.mu.entries, *fp)
		}
	}
}

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
		l.mu.Unlock()
		select {
		case <-f.done:
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
	f := &flight{done: make(chan struct{})}
	e.flight = f
	l.mu.Unlock()
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

	// What is stored is scrubbed of the action's secrets; the caller gets
	// exec's own result and error.
	c := &Certificate{Fingerprint: fp, RunID: in.RunID, Seq: in.Seq, Index: in.Index}
	if execErr != nil {
		c.Status, c.Err = StatusFailed, in.scrub.text(execErr.Error())
	} else {
		c.Status, c.Result = StatusDone, bytes.Clone(in.scrub.result(res))
		if c.Result == nil {
			c.Result = []byte{}
		}
	}
	l.journal(func() (Loc, error) { return j.WriteCertificate(context.WithoutCancel(ctx), c) }, func(loc Loc, werr error) {
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
	f := &flight{done: make(chan struct{})}
	e.flight = f
	l.mu.Unlock()

	// A resolution is stored scrubbed like exec's outcome (see Certificate).
	if st != StatusFailed {
		result = bytes.Clone(in.scrub.result(result))
	}
	reason = in.scrub.text(reason)
	c := &Certificate{Fingerprint: fp, RunID: in.RunID, Seq: in.Seq, Index: in.Index, Status: st, Result: result, Err: reason}
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
		if st == StatusFailed {
			l.landLocked(&fp, e, f, nil, fmt.Errorf("ledger: tool %q was resolved as failed: %s", in.Tool, reason))
		} else {
			l.landLocked(&fp, e, f, result, nil)
		}
	})
	return err
}

// ApplyIntent records, during replay at open, an intent found at loc: the
// fingerprint becomes StatusIntent unless a certificate (done or resolved)
// is already known or the fingerprint is in flight.
func (l *Ledger) ApplyIntent(in *Intent, loc Loc) {
	if in == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, p, _ := l.lookupLocked(&in.Fingerprint)
	if cur.status.certified() || cur.flight != nil {
		return
	}
	e := l.ensureLocked(&in.Fingerprint, cur, p)
	e.status, e.intentLoc, e.result = StatusIntent, loc, nil
}

// ApplyCertificate records, during replay, a certificate found at loc. With
// keepResult the result is held in memory (Do's hit path then never reads
// the log); otherwise Do reads it back with Journal.ReadCertificate. A
// failed certificate never overrides a done or resolved one, and a
// certificate with an unknown status (which DecodeCertificate never
// returns) is ignored.
func (l *Ledger) ApplyCertificate(c *Certificate, loc Loc, keepResult bool) {
	if c == nil || (c.Status != StatusDone && c.Status != StatusFailed && c.Status != StatusResolved) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, p, _ := l.lookupLocked(&c.Fingerprint)
	if cur.flight != nil || (cur.status.certified() && !c.Status.certified()) {
		return
	}
	e := l.ensureLocked(&c.Fingerprint, cur, p)
	e.status, e.certLoc, e.result = c.Status, loc, nil
	if keepResult && c.Status.certified() {
		e.result = bytes.Clone(c.Result)
		if e.result == nil {
			e.result = []byte{}
		}
	}
}

// Lookup returns what the ledger knows about fp. It never touches disk: the
// table is in memory and is binary-searched in place. An action whose intent
// is being written right now is reported in flight with StatusNone.
func (l *Ledger) Lookup(fp Fingerprint) (Entry, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	cur, _, ok := l.lookupLocked(&fp)
	if !ok || (cur.status == StatusNone && cur.flight == nil) {
		return Entry{}, false
	}
	return Entry{
		Fingerprint: fp,
		Status:      cur.status,
		IntentLoc:   cur.intentLoc,
		CertLoc:     cur.certLoc,
		Result:      bytes.Clone(cur.result),
		InFlight:    cur.flight != nil,
	}, true
}

// InDoubt returns, sorted, the fingerprints with a durable intent and no
// certificate that no goroutine of this process is running.
func (l *Ledger) InDoubt() []Fingerprint {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []Fingerprint
	for fp, e := range l.mu.entries {
		if e.status == StatusIntent && e.flight == nil {
			out = append(out, fp)
		}
	}
	t := &l.mu.table
	if t.counts[StatusIntent] > 0 {
		for i := range t.n {
			if e := t.at(i); e.status == StatusIntent {
				fp := Fingerprint(t.key(i))
				if _, shadowed := l.mu.entries[fp]; !shadowed {
					out = append(out, fp)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Fingerprint) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// Len returns the number of fingerprints with a durable record.
func (l *Ledger) Len() int {
	return l.Stats().Entries
}

// Stats returns counts and sizes of the index. It costs O(entries recorded
// since the table was loaded), not O(table).
func (l *Ledger) Stats() Stats {
	l.mu.RLock()
	defer l.mu.RUnlock()
	t := &l.mu.table
	s := Stats{
		Entries:      t.n,
		TableEntries: t.n,
		MapEntries:   len(l.mu.entries),
		InDoubt:      t.counts[StatusIntent],
		TableBytes:   int64(len(t.b)),
	}
	for fp, e := range l.mu.entries {
		if i, ok := t.find(&fp); ok {
			s.Entries--
			if t.at(i).status == StatusIntent {
				s.InDoubt--
			}
		}
		if e.status != StatusNone {
			s.Entries++
		}
		if e.flight != nil {
			s.InFlight++
		} else if e.status == StatusIntent {
			s.InDoubt++
		}
		s.HeldResultBytes += int64(len(e.result))
	}
	return s
}

// AppendTable appends the persisted form of the whole index (see format.go)
// to dst and returns the result: every fingerprint with a durable record,
// sorted, with its status and locations; results are not included (they
// stay in the log, where Journal.ReadCertificate finds them). An action in
// flight is written with its durable state (an intent, or nothing).
//
// AppendTable alone is a consistent picture only if no Do or Resolve runs
// concurrently: a record may be durable in the log but not yet applied
// here. Checkpoint removes that race.
func (l *Ledger) AppendTable(dst []byte) []byte {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out, _ := l.appendTableLocked(dst, nil)
	return out
}

func (l *Ledger) appendTableLocked(dst []byte, origin *TableOrigin) ([]byte, table) {
	t := &l.mu.table
	fps := make([]Fingerprint, 0, len(l.mu.entries))
	for fp, e := range l.mu.entries {
		if e.status != StatusNone {
			fps = append(fps, fp)
		}
	}
	slices.SortFunc(fps, func(a, b Fingerprint) int { return bytes.Compare(a[:], b[:]) })
	w := newTableWriter(dst, t.n+len(fps), origin)
	i, k := 0, 0
	for i < t.n || k < len(fps) {
		var c int
		switch {
		case i == t.n:
			c = 1
		case k == len(fps):
			c = -1
		default:
			c = bytes.Compare(t.key(i), fps[k][:])
		}
		switch {
		case c < 0:
			fp := Fingerprint(t.key(i))
			if _, shadowed := l.mu.entries[fp]; !shadowed {
				e := t.at(i)
				w.add(&fp, &e)
			}
			i++
		default:
			if c == 0 {
				i++
			}
			w.add(&fps[k], l.mu.entries[fps[k]])
			k++
		}
	}
	return w.finish()
}

// Checkpoint makes the persisted form of the index and adopts it. It waits
// for the journal writes in progress to be applied and holds new ones back,
// calls mark (where the engine notes its log position: replay after a
// restart starts there), appends the table to dst, then loads it and drops
// from memory the entries it covers (with their held results), which bounds
// memory. Running execs are not held back, only their journal writes. The
// table part of the returned slice is shared with the ledger and must not
// be modified.
func (l *Ledger) Checkpoint(dst []byte, mark func()) []byte {
	return l.checkpoint(dst, func() *TableOrigin {
		if mark != nil {
			mark()
		}
		return nil
	})
}

// CheckpointAt is Checkpoint writing a version 2 table, which names the
// origin that mark returns: the checkpoint generation and the log position
// the engine noted (see TableOrigin, ReadTableOrigin).
func (l *Ledger) CheckpointAt(dst []byte, mark func() TableOrigin) []byte {
	return l.checkpoint(dst, func() *TableOrigin {
		o := mark()
		return &o
	})
}

func (l *Ledger) checkpoint(dst []byte, mark func() *TableOrigin) []byte {
	l.gate.Lock()
	defer l.gate.Unlock()
	origin := mark()
	l.mu.Lock()
	defer l.mu.Unlock()
	out, t := l.appendTableLocked(dst, origin)
	l.mu.table = t
	for fp, e := range l.mu.entries {
		if e.flight == nil {
			delete(l.mu.entries, fp)
		}
	}
	return out
}

// LoadTable verifies b as a table written by AppendTable or Checkpoint and
// makes it the ledger's persisted index, replacing any previous one; the
// entries recorded since (ApplyIntent, ApplyCertificate, Do, Resolve) keep
// precedence over it. Loading allocates nothing per entry: the ledger keeps b
// (the caller must not modify it afterwards) and searches it in place, with
// one fence of 8 bytes per 64 entries (0.2% of b) built during the
// verification, which is one pass over b (checksums, statuses, order). A
// damaged table gives an error wrapping ErrCorrupt with the offset, and the
// ledger is left unchanged.
func (l *Ledger) LoadTable(b []byte) error {
	t, err := parseTable(b)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.mu.table = t
	l.mu.Unlock()
	return nil
}
