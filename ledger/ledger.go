package ledger

import (
	"bytes"
	"context"
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
	// tries is what the log holds of the attempts of an action with a
	// retry policy, when this process wrote or replayed it; nil otherwise
	// (an entry from the table: Do reads it back from intentLoc or
	// certLoc). Replaced, never changed in place.
	tries *tries
}

// flight is one run of an action in this process. result and err are set
// before done is closed and never change afterwards. done is made by the
// first goroutine that waits for the flight (under the ledger's mutex, as
// landing is), so that a run nobody waits for, nearly every one, makes no
// channel.
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

	// clock runs retry schedules (SetClock; nil: the wall clock). Set
	// before the first Do, read-only afterwards.
	clock Clock
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
	if f.done != nil {
		close(f.done)
	}
	if e.status == StatusNone {
		if _, inTable := l.mu.table.find(fp); !inTable {
			delete(l.mu.entries, *fp)
		}
	}
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
	e.tries = intentTries(in)
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
	e.tries = certTries(c, e.tries)
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
