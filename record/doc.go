// Package record owns the records of the engine's log: their kinds, the
// encoding of each, the compression envelope of the ledger's records, one
// decoder with one set of rules, one corruption error, and a cursor over a
// log.
//
// Package wal frames bytes (length, CRC, torn-tail detection); this package
// gives them meaning. Everything that reads the log (the engine's recovery,
// verify, inspect, scan, export) reads it through Decode or a Cursor, and
// everything that writes it builds its records with the Append functions
// here. Adding a record kind is one place: its Kind constant, its name, its
// fields in Record, its Append function and its case in Decode, plus its
// golden test.
//
// Usage:
//
//	c, err := record.NewCursor(log, segmentPath, wal.Pos{}, &record.Decoder{Comp: comp, Ledger: true})
//	if err != nil { ... }
//	defer c.Close()
//	for c.Next() {
//		r := c.Record() // valid until the next call to Next
//		switch r.Kind { case record.KindAtom: ... }
//	}
//	if err := c.Err(); err != nil { ... } // a *CorruptionError for damage
//
// # Guarantees
//
// Decode never panics and never reads past its input, whatever the bytes.
// It accepts exactly what the Append functions write: lengths are bounded,
// varints are minimal, a record has no trailing bytes (but an atom's body,
// which is compressed and read later), and run ids obey the run-id rule. A
// record that breaks a rule is a *CorruptionError naming the segment file,
// the offset, the run and seq when they were read, and the cause.
//
// # Caveats
//
// The constants of format.go are frozen: a store written by one version is
// read by every later one. A new encoding is a new kind or a new version
// byte, never a changed meaning of an old one. The records of a Cursor and
// the slices of a Record alias the cursor's buffer until the next call to
// Next; copy what you keep.
package record
