package record

import (
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/wal"
)

// Cursor reads a log's durable records in order and decodes each. A
// damaged record stops it: Err is then a *CorruptionError naming the
// segment file, the offset and, from the records after the damage, the run
// and seq it reaches.
type Cursor struct {
	log  *wal.Log
	file func(seg uint64) string // the path of a segment, for errors
	// seg and segName cache file's answer for the segment being read:
	// building a path per record cost a third of a verify's CPU.
	seg     uint64
	segName string
	dec     *Decoder
	rd      *wal.Reader
	rec     Record
	err     error
	// before holds the last seq of each run before the cursor's start
	// (Known); names, of each run read since, and its id (see Locate).
	// Damage merges them.
	before map[string]uint64
	names  runNames
	until  wal.Pos // stop before this position; the zero Pos: the end
	// onDamage, if set, takes the records that do not decode (see OnDamage).
	onDamage func(pos wal.Pos, raw []byte, err error)
}

// NewCursor returns a cursor over the records of log that start at or
// after from (the zero Pos: the beginning), decoded by dec (nil: the zero
// Decoder). file gives the path of a segment, for the errors.
func NewCursor(log *wal.Log, file func(seg uint64) string, from wal.Pos, dec *Decoder) (*Cursor, error) {
	rd, err := log.NewReader(from)
	if err != nil {
		return nil, err
	}
	if dec == nil {
		dec = &Decoder{}
	}
	return &Cursor{log: log, file: file, dec: dec, rd: rd, before: map[string]uint64{}}, nil
}

// Next decodes the next record. It returns false at the end of the durable
// log (or at Until) and on error (see Err).
func (c *Cursor) Next() bool {
	for c.err == nil {
		if !c.rd.Next() {
			if err := c.rd.Err(); err != nil {
				c.err = c.Damage(err)
			} else if dmg := c.log.Recovery().Damage; dmg != nil {
				// A log opened with ReadDamaged ends before the damage of
				// its newest segment: that is where the cursor stopped.
				c.err = c.Damage(dmg)
			}
			return false
		}
		pos, raw := c.rd.Pos(), c.rd.Record()
		if c.until != (wal.Pos{}) && !pos.Less(c.until) {
			return false
		}
		if c.dec.Skip != nil {
			if k, run, seq, ok := peek(raw); ok && c.dec.Skip(k, run) {
				switch k {
				case KindAtom:
					c.names.entry(run).note(seq)
				case KindFork:
					// A fork's seqs start at its fork point, which peek
					// does not read: forks are rare, decode it.
					var f Record
					if (&Decoder{}).decode(raw, pos, "", &f, &c.names) == nil {
						c.names.cur.note(f.Seq)
					}
				}
				continue
			}
		}
		if pos.Segment != c.seg || c.segName == "" {
			c.seg, c.segName = pos.Segment, c.file(pos.Segment)
		}
		c.names.cur = nil
		if err := c.dec.decode(raw, pos, c.segName, &c.rec, &c.names); err != nil {
			if c.onDamage != nil {
				c.onDamage(pos, raw, err)
				continue
			}
			c.err = err
			return false
		}
		if c.rec.Kind == KindAtom || c.rec.Kind == KindFork { // a fork's seqs start at its fork point
			c.names.cur.note(c.rec.Seq)
		}
		return true
	}
	return false
}

// Known tells the cursor the last seq of each run before its start (the
// cursor owns m from then on), so that damage names the run it cuts even
// when the cursor read none of its atoms.
func (c *Cursor) Known(m map[string]uint64) {
	if m != nil {
		c.before = m
	}
}

// OnDamage makes the cursor hand a record that the log holds intact but
// that does not decode (a *CorruptionError) to fn and go on with the next
// one, instead of stopping: a verifier reports every such record. Damage
// of the log itself still stops the cursor (Err).
func (c *Cursor) OnDamage(fn func(pos wal.Pos, raw []byte, err error)) { c.onDamage = fn }

// Until makes the cursor stop before the record at or after to (the zero
// Pos: read to the end of the log).
func (c *Cursor) Until(to wal.Pos) { c.until = to }

// Record is the current record, valid until the next call to Next.
func (c *Cursor) Record() *Record { return &c.rec }

// NextPos is where the record after the current one starts.
func (c *Cursor) NextPos() wal.Pos { return c.rd.NextPos() }

// Err is the error that stopped Next, or nil at a clean end.
func (c *Cursor) Err() error { return c.err }

// Close releases the cursor's file. It is idempotent.
func (c *Cursor) Close() error { return c.rd.Close() }

// Damage turns an error of the log met while reading into a
// *CorruptionError naming the segment, the offset and the run and seq the
// damage reaches (see Locate), when it is damage; other errors are
// wrapped.
func (c *Cursor) Damage(err error) error {
	return LogDamage(c.log, err, c.names.into(c.before))
}

// LogDamage is Cursor.Damage for a reader of log of one's own: before holds
// the last seq of each run read before the damage (nil: unknown).
func LogDamage(log *wal.Log, err error, before map[string]uint64) error {
	var ce *wal.CorruptionError
	if !errors.As(err, &ce) {
		return fmt.Errorf("read log: %w", err)
	}
	run, seq, around := Locate(log, wal.Pos{Segment: ce.Segment, Offset: ce.Offset}, before)
	return &CorruptionError{File: ce.File, Offset: ce.Offset, Run: run, Seq: seq, Reason: ce.Reason + around, Err: err}
}

// Locate names the run and seq that the damaged record at bad cuts, from
// the intact records after it (wal.Log.ScanAfter): the first run that
// skips a seq across it, given before, the last seq of each run read
// before the damage (nil: unknown), or else the first atom after it. around
// says so in words, to add to the damage's reason. before is updated.
func Locate(log *wal.Log, bad wal.Pos, before map[string]uint64) (run string, seq uint64, around string) {
	firstAfter, firstRun, firstSeq := "", "", uint64(0)
	var dec Decoder
	var r Record
	err := log.ScanAfter(bad, func(pos wal.Pos, raw []byte) bool {
		if len(raw) == 0 || Kind(raw[0]) != KindAtom || dec.Decode(raw, pos, "", &r) != nil {
			return true
		}
		if firstAfter == "" {
			firstRun, firstSeq = r.Run, r.Seq
			firstAfter = fmt.Sprintf("; no run skips a seq across it: it is not an atom, and the first atom after it is run %q seq %d at %v (whose action records come before it)", r.Run, r.Seq, pos)
		}
		if before == nil {
			return false
		}
		if last := before[r.Run]; r.Seq > last+1 {
			run, seq = r.Run, last+1
			around = fmt.Sprintf("; run %q resumes at seq %d after it (at %v), its last seq before it is %d", r.Run, r.Seq, pos, last)
			return false
		}
		before[r.Run] = r.Seq
		return true
	})
	if run == "" {
		run, seq, around = firstRun, firstSeq, firstAfter
		if err == nil && firstAfter == "" {
			around = "; no atom follows it"
		}
	}
	return run, seq, around
}
