// The persisted index: appending the table, checkpointing it against the
// journal, and loading it.

package ledger

import (
	"bytes"
	"slices"
)

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
