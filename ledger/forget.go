package ledger

// Forget drops fps from the index, as if no record of them had been
// written: Lookup then knows nothing of them, the next Checkpoint's table
// leaves them out, and a Do of one of them runs exec. The engine calls it
// when garbage collection reclaims the records of deleted runs, so that
// the index keeps agreeing with what the log holds (a table rebuilt from
// the log would not have them either). A fingerprint in flight in this
// process is kept. It returns how many fingerprints it dropped.
func (l *Ledger) Forget(fps []Fingerprint) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for i := range fps {
		fp := &fps[i]
		cur, p, known := l.lookupLocked(fp)
		if !known || cur.flight != nil || cur.status == StatusNone {
			continue
		}
		if _, inTable := l.mu.table.find(fp); inTable {
			// The table is immutable: a map entry with no status shadows
			// its row until the next Checkpoint writes a table without it.
			e := l.ensureLocked(fp, cur, p)
			*e = entry{}
		} else {
			delete(l.mu.entries, *fp)
		}
		n++
	}
	return n
}
