package layout

// WAITS: the index of the runs' waits (internal/wait), as of an engine
// checkpoint. Every constant in this file is frozen, like those of
// format.go.
//
// WAITS, version 1:
//
//	"CNTMWAIT" | version u16 LE | uvarint gen | uvarint replay segment | uvarint replay offset |
//	varint high | uvarint nruns | nruns x run | crc32c u32 LE of all before
//	run:    uvarint len | run id | uvarint mark segment | uvarint mark offset |
//	        byte hasWait | [wait] |
//	        uvarint npending | npending x event |
//	        uvarint nsenders | nsenders x (uvarint len | sender id | digest [32]byte)
//	wait:   uvarint seq | uvarint len | name | varint declared | varint deadline |
//	        byte outcome | varint ended | uvarint ready | [event, if outcome is 1 (delivered)]
//	event:  uvarint len | name | uvarint len | sender id | uvarint seq | varint sent |
//	        uvarint len | payload
//
// It is derived from the log (its wait, event and wake records, and the
// atoms and ends of the runs): gen and the replay position are those of
// the CHECKPOINT written with it. Each run's entry reflects a prefix of
// that run's records of waits in the log's order, the records up to its
// mark (the position of the last one it reflects, at or after the replay
// position or not), so that Open replays over it exactly the run's
// records after the mark: no record is applied twice. A run's wait is
// its last one that no atom took as of CHECKPOINT's rows; ready is its
// place in the list of the ended waits not taken (1 first; 0: not listed,
// an open or a cancelled wait). Pending lists the events no wait took, in
// the log's order for each name; senders every sender id the run took an
// event of, sorted, with its event's digest (internal/wait.Digest).
// High is the latest time the log's records of waits held when it was
// captured (the index's clock never reads earlier). Runs are sorted by
// id, each once. Payloads are plaintext: an encrypted store seals the
// file, per block (version 3, waitsseal.go; until 2026-12 whole, with
// record.PlaceWaits, still read).
//
// The engine writes version 2 (below: the same entries, in a table read
// in place); version 1 is still read (ParseWaits, ScanWaits). A WAITS
// that is missing, damaged or of another checkpoint is rebuilt from the
// whole log (internal/wait, Load), as is one whose damage a read meets
// later.

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/continuumdb/continuum/internal/crc32c"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// WaitsName is the file of the index of waits.
const WaitsName = "WAITS"

const (
	waitsMagic   = "CNTMWAIT"
	waitsVersion = 1
	// waitsMaxOutcome is the last outcome of a wait (internal/wait:
	// open, delivered, timed out, cancelled).
	waitsMaxOutcome = 3
	waitsDelivered  = 1
	waitsCancelled  = 3
)

// Waits is the content of WAITS.
type Waits struct {
	// Version is the file's format: 1 (or 0, when encoding) or 2.
	Version uint16
	Gen     uint64
	Replay  wal.Pos
	High    int64      // unix ns: the latest time a record of waits held
	Runs    []WaitsRun // sorted by ID
}

// WaitsRun is what the index holds of one run.
type WaitsRun struct {
	ID string
	// Mark is the position of the run's last record of waits the entry
	// reflects: Open applies the run's records after it only.
	Mark    wal.Pos
	Wait    *WaitsWait   // nil: none that no atom took
	Pending []WaitsEvent // events no wait took, in the log's order per name
	Senders []WaitsSender
}

// WaitsWait is a run's wait. Outcome is internal/wait's (0 open, 1
// delivered, 2 timed out, 3 cancelled).
type WaitsWait struct {
	Seq                uint64
	Name               string
	Declared, Deadline int64
	Outcome            uint8
	Ended              int64
	Ready              uint64      // place in the ready list, 1 first; 0: not listed
	Event              *WaitsEvent // outcome 1: the event it took
}

// WaitsEvent is an event. Payload aliases the input when parsed.
type WaitsEvent struct {
	Name, Sender string
	Seq          uint64
	Sent         int64
	Payload      []byte
}

// WaitsSender is a sender id the run took an event of.
type WaitsSender struct {
	ID     string
	Digest [32]byte
}

// Marshal encodes w in its version (0 or 1: version 1; 2: version 2,
// MarshalTable).
func (w *Waits) Marshal() []byte {
	if w.Version == waitsVersion2 {
		return w.MarshalTable()
	}
	b := make([]byte, 0, 64+len(w.Runs)*48)
	b = append(b, waitsMagic...)
	b = binary.LittleEndian.AppendUint16(b, waitsVersion)
	b = binary.AppendUvarint(b, w.Gen)
	b = binary.AppendUvarint(b, w.Replay.Segment)
	b = binary.AppendUvarint(b, uint64(w.Replay.Offset))
	b = binary.AppendVarint(b, w.High)
	b = binary.AppendUvarint(b, uint64(len(w.Runs)))
	for i := range w.Runs {
		b = appendWaitsRun(b, &w.Runs[i])
	}
	return binary.LittleEndian.AppendUint32(b, crc32c.Checksum(b))
}

// appendWaitsRun appends a run's entry, the same in both versions.
func appendWaitsRun(b []byte, r *WaitsRun) []byte {
	{
		b = record.AppendString(b, r.ID)
		b = binary.AppendUvarint(b, r.Mark.Segment)
		b = binary.AppendUvarint(b, uint64(r.Mark.Offset))
		if x := r.Wait; x == nil {
			b = append(b, 0)
		} else {
			b = append(b, 1)
			b = binary.AppendUvarint(b, x.Seq)
			b = record.AppendString(b, x.Name)
			b = binary.AppendVarint(b, x.Declared)
			b = binary.AppendVarint(b, x.Deadline)
			b = append(b, x.Outcome)
			b = binary.AppendVarint(b, x.Ended)
			b = binary.AppendUvarint(b, x.Ready)
			if x.Outcome == waitsDelivered {
				b = appendWaitsEvent(b, x.Event)
			}
		}
		b = binary.AppendUvarint(b, uint64(len(r.Pending)))
		for k := range r.Pending {
			b = appendWaitsEvent(b, &r.Pending[k])
		}
		b = binary.AppendUvarint(b, uint64(len(r.Senders)))
		for _, s := range r.Senders {
			b = record.AppendString(b, s.ID)
			b = append(b, s.Digest[:]...)
		}
	}
	return b
}

func appendWaitsEvent(b []byte, e *WaitsEvent) []byte {
	if e == nil {
		e = &WaitsEvent{}
	}
	b = record.AppendString(b, e.Name)
	b = record.AppendString(b, e.Sender)
	b = binary.AppendUvarint(b, e.Seq)
	b = binary.AppendVarint(b, e.Sent)
	return record.AppendBytes(b, e.Payload)
}

// ParseWaits decodes WAITS (named name in errors) and checks what one
// file can say of itself: runs sorted and each once, names, sender ids
// and payloads within their bounds, each wait's outcome with its event
// and place in the ready list, no place twice. Damage is a
// *record.CorruptionError.
func ParseWaits(name string, b []byte) (*Waits, error) {
	switch WaitsVersion(b) {
	case waitsVersion2:
		return parseWaitsTable(name, b)
	case waitsVersion3:
		return nil, record.Corruptf(name, "sealed per block (version 3): UnsealWaits opens it")
	}
	var runs []WaitsRun
	w, err := ScanWaits(name, b, nil, func(r *WaitsRun) error {
		c := *r
		if r.Wait != nil {
			x := *r.Wait
			if x.Event != nil {
				e := *x.Event
				x.Event = &e
			}
			c.Wait = &x
		}
		c.Pending = slices.Clone(r.Pending)
		c.Senders = slices.Clone(r.Senders)
		runs = append(runs, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	w.Runs, w.Version = runs, waitsVersion
	return w, nil
}

// ScanWaits is ParseWaits without the table of runs: it calls fn with
// each run in the file's order, once the whole file's checksum is
// checked, and stops at fn's first error, which it returns. r, and what
// it points to, are reused by the next call: fn copies what it keeps
// (payloads alias b). Runs of the result is nil. id, if not nil, makes
// each run's ID from its bytes (a checked run id, aliasing b): a caller
// that holds the store's run ids already returns its own string, and
// spares the copy.
func ScanWaits(name string, b []byte, id func([]byte) string, fn func(r *WaitsRun) error) (*Waits, error) {
	body, err := checkedBody(name, b, waitsMagic, len(waitsMagic)+2+4, "a waits file", waitsVersion)
	if err != nil {
		return nil, err
	}
	d := record.NewFields(body, 10)
	w := &Waits{Gen: d.Uvarint("generation")}
	w.Replay.Segment = d.Uvarint("replay segment")
	w.Replay.Offset = offset(d, "replay offset")
	w.High = d.Varint("high")
	n := d.Uvarint("run count")
	if d.Err() == nil && n > uint64(len(body)) {
		d.Fail("run count %d exceeds the file", n)
	}
	var ready map[uint64]string
	var r WaitsRun
	var x WaitsWait
	var ev WaitsEvent
	prev := ""
	for k := uint64(0); k < n && d.Err() == nil; k++ {
		readWaitsRun(d, len(body), id, &r, &x, &ev)
		if d.Err() == nil && k > 0 && prev >= r.ID {
			d.Fail("run %q follows run %q: the runs are not sorted, or one is there twice", r.ID, prev)
		}
		prev = r.ID
		if d.Err() == nil && r.Wait != nil && r.Wait.Ready != 0 {
			if ready == nil {
				ready = map[uint64]string{}
			}
			if other, ok := ready[x.Ready]; ok {
				d.Fail("runs %q and %q are both at place %d of the ready list", other, r.ID, x.Ready)
			}
			ready[x.Ready] = r.ID
		}
		if d.Err() == nil {
			if err := fn(&r); err != nil {
				return nil, err
			}
		}
	}
	if err := d.Done("waits file"); err != nil {
		return nil, record.Corruptf(name, "%v", err)
	}
	return w, nil
}

// readWaitsRun decodes one run's entry (the same in both versions) into
// r, reusing r's slices, x and ev; id, if not nil, makes the run's ID from
// its checked bytes; limit bounds its counts. It checks the entry alone: its wait's rules, its
// sender ids sorted.
func readWaitsRun(d *record.Fields, limit int, id func([]byte) string, r *WaitsRun, x *WaitsWait, ev *WaitsEvent) {
	*r = WaitsRun{Pending: r.Pending[:0], Senders: r.Senders[:0]}
	if b := d.RunIDBytes(); d.Err() == nil {
		if id != nil {
			r.ID = id(b)
		} else {
			r.ID = string(b)
		}
	}
	r.Mark.Segment = d.Uvarint("mark segment")
	r.Mark.Offset = offset(d, "mark offset")
	switch d.Byte("wait flag") {
	case 0:
	case 1:
		*x = WaitsWait{Seq: d.Uvarint("wait seq"), Name: waitsString(d, "wait name", record.MaxWaitName)}
		x.Declared = d.Varint("declared")
		x.Deadline = d.Varint("deadline")
		x.Outcome = d.Byte("outcome")
		x.Ended = d.Varint("ended")
		x.Ready = d.Uvarint("ready place")
		if x.Outcome == waitsDelivered {
			*ev = waitsEvent(d)
			x.Event = ev
		}
		if d.Err() == nil {
			if why := checkWaitsWait(x); why != "" {
				d.Fail("run %q: the wait after seq %d: %s", r.ID, x.Seq, why)
			}
		}
		r.Wait = x
	default:
		if d.Err() == nil {
			d.Fail("run %q: wait flag is neither 0 nor 1", r.ID)
		}
	}
	m := d.Uvarint("pending count")
	if d.Err() == nil && m > uint64(limit) {
		d.Fail("pending count %d exceeds the file", m)
	}
	for j := uint64(0); j < m && d.Err() == nil; j++ {
		r.Pending = append(r.Pending, waitsEvent(d))
	}
	m = d.Uvarint("sender count")
	if d.Err() == nil && m > uint64(limit) {
		d.Fail("sender count %d exceeds the file", m)
	}
	for j := uint64(0); j < m && d.Err() == nil; j++ {
		s := WaitsSender{ID: waitsString(d, "sender id", record.MaxSenderID)}
		s.Digest = d.Hash("digest")
		if d.Err() == nil && j > 0 && r.Senders[j-1].ID >= s.ID {
			d.Fail("run %q: sender %q follows %q: not sorted, or there twice", r.ID, s.ID, r.Senders[j-1].ID)
		}
		r.Senders = append(r.Senders, s)
	}
}

// checkWaitsWait says what is wrong with a wait, "" if nothing.
func checkWaitsWait(x *WaitsWait) string {
	switch {
	case x.Outcome > waitsMaxOutcome:
		return fmt.Sprintf("outcome %d is none of the four", x.Outcome)
	case x.Deadline < 0:
		return fmt.Sprintf("a deadline at %d, before 1970", x.Deadline)
	case x.Outcome == 0 && (x.Ended != 0 || x.Ready != 0):
		return fmt.Sprintf("open, yet ended at %d and at place %d of the ready list", x.Ended, x.Ready)
	case x.Outcome == waitsCancelled && x.Ready != 0:
		return fmt.Sprintf("cancelled, yet at place %d of the ready list", x.Ready)
	case x.Outcome != 0 && x.Outcome != waitsCancelled && x.Ready == 0:
		return "ended by an event or a timeout, yet not in the ready list"
	case x.Outcome == waitsDelivered && x.Event.Name != x.Name:
		return fmt.Sprintf("delivered an event named %q to a wait for %q", x.Event.Name, x.Name)
	case x.Name == "" && x.Deadline == 0:
		return "a timer without a deadline"
	}
	return ""
}

func waitsEvent(d *record.Fields) WaitsEvent {
	e := WaitsEvent{Name: waitsString(d, "event name", record.MaxWaitName), Sender: waitsString(d, "event sender", record.MaxSenderID)}
	e.Seq = d.Uvarint("event seq")
	e.Sent = d.Varint("event sent")
	e.Payload = d.Bytes("event payload", record.MaxEventPayload)
	if d.Err() == nil && (e.Name == "" || e.Sender == "") {
		d.Fail("an event of name %q and sender %q: both must be set", e.Name, e.Sender)
	}
	return e
}

func waitsString(d *record.Fields, what string, max int) string {
	return string(d.Bytes(what, max))
}

// WAITS, version 2: a table read in place (internal/wait reads it without
// decoding it whole: a lookup by run is a binary search, the due waits a
// walk of the deadline section from its start, the ready ones of the
// ready section). All integers little-endian.
//
//	header (80 bytes, at 0):
//	  "CNTMWAIT" | version u16 = 2 | 0 u16 | nruns u32 |
//	  gen u64 | replay segment u64 | replay offset u64 | high i64 |
//	  ndeadlines u32 | nready u32 | nopen u32 | npending u32 |
//	  end u64 | crc32c u32 of the 72 bytes before | 0 u32
//	deadlines (at 80):        ndeadlines x (deadline i64 | run u32)
//	runs:                     nruns x (offset u64 of the run's entry)
//	ready:                    nready x (run u32)
//	entries (up to end):      nruns x run (as in version 1), in the runs' order
//	checksums (at end):       nblocks x crc32c u32, of each 4 KiB block of the bytes before end
//	crc32c u32 of the checksums
//
// A run is its index in the runs section: runs are sorted by id, each
// once; the entry of run i runs from its offset to the next run's (the
// last one's to end). The deadline section lists the open waits with a
// deadline, sorted by (deadline, run); the ready section the runs whose
// wait ended by an event or a timeout and no atom took, in the order of
// their wait's ready place (each such wait's place is its rank, from 1:
// the places are those of version 1). nopen counts the open waits without
// a deadline, npending the events no wait took, nblocks is end/4096
// rounded up. The header and the checksums are checked when the table is
// opened (OpenWaitsTable: 80 bytes and 4 bytes per 4 KiB); each block of
// the rest when it is first read, so that the cost of a read is the
// bytes it reads. ParseWaits checks a version 2 file whole, and that it
// is the one encoding of its content (MarshalTable's).

const (
	waitsVersion2 = 2
	waitsHeader2  = 80
	// WaitsBlock is the span of one checksum of WAITS version 2.
	WaitsBlock = 4096
	waitsDL    = 12 // a deadline entry
)

// MarshalTable encodes w as WAITS version 2 (its runs sorted by ID, each
// wait's ready place distinct: what ParseWaits checks).
func (w *Waits) MarshalTable() []byte {
	t := NewWaitsBuilder(w.Gen, w.Replay, w.High)
	for i := range w.Runs {
		t.Add(&w.Runs[i])
	}
	return t.Bytes()
}

// WaitsBuilder writes WAITS version 2 from runs added in the order of
// their ids (streaming: only the entries' bytes and the two small
// sections are held until Bytes).
type WaitsBuilder struct {
	gen           uint64
	replay        wal.Pos
	high          int64
	ents          []byte   // the entries
	offs          []uint64 // of each run's entry in ents
	dl            []waitsDeadline
	ready         []waitsRank
	open, pending int
}

type waitsDeadline struct {
	at  int64
	run uint32
}

type waitsRank struct {
	rank uint64
	run  uint32
}

// NewWaitsBuilder starts WAITS version 2 for the checkpoint of generation
// gen at replay position replay, whose records of waits held times up to
// high.
func NewWaitsBuilder(gen uint64, replay wal.Pos, high int64) *WaitsBuilder {
	return &WaitsBuilder{gen: gen, replay: replay, high: high}
}

// Add appends run r, whose id follows the last one added.
func (t *WaitsBuilder) Add(r *WaitsRun) {
	i := uint32(len(t.offs))
	t.offs = append(t.offs, uint64(len(t.ents)))
	t.ents = appendWaitsRun(t.ents, r)
	t.pending += len(r.Pending)
	if x := r.Wait; x != nil {
		switch {
		case x.Outcome == 0 && x.Deadline != 0:
			t.dl = append(t.dl, waitsDeadline{x.Deadline, i})
		case x.Outcome == 0:
			t.open++
		}
		if x.Ready != 0 {
			t.ready = append(t.ready, waitsRank{x.Ready, i})
		}
	}
}

// Bytes returns the file.
func (t *WaitsBuilder) Bytes() []byte {
	slices.SortFunc(t.dl, func(a, b waitsDeadline) int {
		if a.at != b.at {
			return cmpInt(a.at, b.at)
		}
		return cmpInt(a.run, b.run)
	})
	slices.SortStableFunc(t.ready, func(a, b waitsRank) int { return cmpInt(a.rank, b.rank) })
	at := waitsHeader2 + waitsDL*len(t.dl) + 8*len(t.offs) + 4*len(t.ready)
	end := at + len(t.ents)
	nblocks := (end + WaitsBlock - 1) / WaitsBlock
	b := make([]byte, waitsHeader2, end+4*nblocks+4)
	copy(b, waitsMagic)
	le := binary.LittleEndian
	le.PutUint16(b[8:], waitsVersion2)
	le.PutUint32(b[12:], uint32(len(t.offs)))
	le.PutUint64(b[16:], t.gen)
	le.PutUint64(b[24:], t.replay.Segment)
	le.PutUint64(b[32:], uint64(t.replay.Offset))
	le.PutUint64(b[40:], uint64(t.high))
	le.PutUint32(b[48:], uint32(len(t.dl)))
	le.PutUint32(b[52:], uint32(len(t.ready)))
	le.PutUint32(b[56:], uint32(t.open))
	le.PutUint32(b[60:], uint32(t.pending))
	le.PutUint64(b[64:], uint64(end))
	le.PutUint32(b[72:], crc32c.Checksum(b[:72]))
	for _, d := range t.dl {
		b = le.AppendUint64(b, uint64(d.at))
		b = le.AppendUint32(b, d.run)
	}
	for _, o := range t.offs {
		b = le.AppendUint64(b, uint64(at)+o)
	}
	for _, r := range t.ready {
		b = le.AppendUint32(b, r.run)
	}
	b = append(b, t.ents...)
	sums := len(b)
	for k := 0; k < end; k += WaitsBlock {
		b = le.AppendUint32(b, crc32c.Checksum(b[k:min(k+WaitsBlock, end)]))
	}
	return le.AppendUint32(b, crc32c.Checksum(b[sums:]))
}

func cmpInt[T int64 | uint32 | uint64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// WaitsVersion returns the version WAITS's header states (0: not a
// waits file); it checks nothing else.
func WaitsVersion(b []byte) uint16 {
	if len(b) < len(waitsMagic)+2 || string(b[:8]) != waitsMagic {
		return 0
	}
	return binary.LittleEndian.Uint16(b[8:])
}

// WaitsTable is WAITS version 2 read in place. Its methods read the
// bytes they need, each 4 KiB block checked against its checksum when
// first read: damage is a *record.CorruptionError from the read that
// meets it, whenever that is. It is not safe for concurrent use (it notes
// which blocks it checked): its owner serializes the calls. What it
// returns aliases the file's bytes unless said.
type WaitsTable struct {
	name     string
	b        []byte
	Gen      uint64
	Replay   wal.Pos
	High     int64
	Runs     int // runs in the table
	Timers   int // open waits with a deadline (the deadline section)
	ReadyLen int // the ready section's length
	Open     int // open waits without a deadline
	Pending  int // events no wait took
	runsAt   int
	readyAt  int
	entsAt   int
	end      int
	size     int      // the table's length (a sealed file's: its plaintext's)
	checked  []uint64 // bit k: block k was checked (b only)
	// sealed, if not nil, reads the table from a file sealed per block
	// (version 3, OpenSealedWaits); then b is nil.
	sealed *sealedBlocks
}

// OpenWaitsTable opens WAITS version 2 (named name in errors): it checks
// the header, the sections' bounds and the checksums' own checksum, not
// the blocks (each is checked when first read).
func OpenWaitsTable(name string, b []byte) (*WaitsTable, error) {
	if len(b) < waitsHeader2+4 || string(b[:8]) != waitsMagic {
		return nil, record.Corruptf(name, "not a waits file (bad magic or %d bytes)", len(b))
	}
	t := &WaitsTable{name: name, b: b, size: len(b)}
	if err := t.open(b[:waitsHeader2]); err != nil {
		return nil, err
	}
	return t, nil
}

// open reads the header h (the table's first 80 bytes) and checks it
// against the table's length; for a table in b, the checksums' checksum
// and the first block too (a sealed table's blocks are authenticated
// when opened: the header came from its first).
func (t *WaitsTable) open(h []byte) error {
	name := t.name
	if string(h[:8]) != waitsMagic {
		return record.Corruptf(name, "not a waits file (bad magic)")
	}
	le := binary.LittleEndian
	if v := le.Uint16(h[8:]); v != waitsVersion2 {
		return record.Corruptf(name, "version %d, not 2", v)
	}
	if got, want := le.Uint32(h[72:]), crc32c.Checksum(h[:72]); got != want {
		return record.Corruptf(name, "header checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	if le.Uint16(h[10:]) != 0 || le.Uint32(h[76:]) != 0 {
		return record.Corruptf(name, "header: reserved bytes are not zero")
	}
	t.Gen, t.High = le.Uint64(h[16:]), int64(le.Uint64(h[40:]))
	t.Runs, t.Timers, t.ReadyLen = int(le.Uint32(h[12:])), int(le.Uint32(h[48:])), int(le.Uint32(h[52:]))
	t.Open, t.Pending = int(le.Uint32(h[56:])), int(le.Uint32(h[60:]))
	t.Replay.Segment = le.Uint64(h[24:])
	off := le.Uint64(h[32:])
	end := le.Uint64(h[64:])
	if off > 1<<62 || end > uint64(t.size) {
		return record.Corruptf(name, "header: replay offset %d or end %d out of bounds", off, end)
	}
	t.Replay.Offset = int64(off)
	t.end = int(end)
	t.runsAt = waitsHeader2 + waitsDL*t.Timers
	t.readyAt = t.runsAt + 8*t.Runs
	t.entsAt = t.readyAt + 4*t.ReadyLen
	nblocks := (t.end + WaitsBlock - 1) / WaitsBlock
	switch {
	case t.entsAt > t.end:
		return record.Corruptf(name, "header: %d runs, %d deadlines and %d ready need %d bytes, the entries end at %d",
			t.Runs, t.Timers, t.ReadyLen, t.entsAt, t.end)
	case t.Timers+t.Open > t.Runs || t.ReadyLen > t.Runs:
		return record.Corruptf(name, "header: %d open waits and %d ready, of %d runs", t.Timers+t.Open, t.ReadyLen, t.Runs)
	case t.Runs > 0 && t.entsAt == t.end:
		return record.Corruptf(name, "header: %d runs and no entry", t.Runs)
	case t.size != t.end+4*nblocks+4:
		return record.Corruptf(name, "%d bytes, where the header says %d", t.size, t.end+4*nblocks+4)
	}
	if t.sealed != nil {
		return nil
	}
	b := t.b
	if got, want := le.Uint32(b[len(b)-4:]), crc32c.Checksum(b[t.end:len(b)-4]); got != want {
		return record.Corruptf(name, "checksums' checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	t.checked = make([]uint64, (nblocks+63)/64)
	_, err := t.span(0, waitsHeader2)
	return err
}

// Size is the table's length in bytes (a sealed file's: its
// plaintext's).
func (t *WaitsTable) Size() int { return t.size }

// Bytes returns the file (nil for a sealed one: OpenSealedWaits).
func (t *WaitsTable) Bytes() []byte { return t.b }

// Same reports whether u holds the same table as t (its length, header
// and checksums), so that a reader may switch to u, read from disk again,
// and keep what it knows. A sealed table's header and checksums are read
// (and their blocks opened) to compare them; a read that fails is no
// sameness.
func (t *WaitsTable) Same(u *WaitsTable) bool {
	if t.size != u.size || t.end != u.end {
		return false
	}
	for _, r := range [][2]int{{0, waitsHeader2}, {t.end, t.size}} {
		a, err := t.raw(r[0], r[1])
		if err != nil {
			return false
		}
		b, err := u.raw(r[0], r[1])
		if err != nil || string(a) != string(b) {
			return false
		}
	}
	return true
}

// raw returns the table's bytes from to to, unchecked but for a sealed
// table's blocks' seals.
func (t *WaitsTable) raw(from, to int) ([]byte, error) {
	if t.sealed != nil {
		return t.sealed.read(from, to)
	}
	return t.b[from:to:to], nil
}

// span returns the table's bytes from to to (before the entries' end),
// each block it covers checked once (a sealed table's opened, which
// authenticates it, when not in its cache).
func (t *WaitsTable) span(from, to int) ([]byte, error) {
	if from < 0 || to < from || to > t.end {
		return nil, record.Corruptf(t.name, "a read of bytes %d to %d, past the entries' end %d", from, to, t.end)
	}
	if from == to {
		return nil, nil
	}
	if t.sealed != nil {
		return t.sealed.read(from, to)
	}
	for k := from / WaitsBlock; k*WaitsBlock < to; k++ {
		if t.checked[k/64]&(1<<(k%64)) != 0 {
			continue
		}
		lo, hi := k*WaitsBlock, min((k+1)*WaitsBlock, t.end)
		want := binary.LittleEndian.Uint32(t.b[t.end+4*k:])
		if got := crc32c.Checksum(t.b[lo:hi]); got != want {
			return nil, record.Corruptf(t.name, "block %d (bytes %d to %d): checksum mismatch (stored %08x, computed %08x)", k, lo, hi, want, got)
		}
		t.checked[k/64] |= 1 << (k % 64)
	}
	return t.b[from:to:to], nil
}

// Deadline returns the k-th entry of the deadline section: a deadline
// and the run whose open wait has it.
func (t *WaitsTable) Deadline(k int) (int64, int, error) {
	if k < 0 || k >= t.Timers {
		return 0, 0, record.Corruptf(t.name, "deadline %d of %d", k, t.Timers)
	}
	b, err := t.span(waitsHeader2+waitsDL*k, waitsHeader2+waitsDL*(k+1))
	if err != nil {
		return 0, 0, err
	}
	run := int(binary.LittleEndian.Uint32(b[8:]))
	if run >= t.Runs {
		return 0, 0, record.Corruptf(t.name, "deadline %d names run %d of %d", k, run, t.Runs)
	}
	return int64(binary.LittleEndian.Uint64(b)), run, nil
}

// ReadyRun returns the run at place k (from 0) of the ready section.
func (t *WaitsTable) ReadyRun(k int) (int, error) {
	if k < 0 || k >= t.ReadyLen {
		return 0, record.Corruptf(t.name, "ready place %d of %d", k, t.ReadyLen)
	}
	b, err := t.span(t.readyAt+4*k, t.readyAt+4*k+4)
	if err != nil {
		return 0, err
	}
	run := int(binary.LittleEndian.Uint32(b))
	if run >= t.Runs {
		return 0, record.Corruptf(t.name, "ready place %d names run %d of %d", k, run, t.Runs)
	}
	return run, nil
}

// entry returns run i's entry.
func (t *WaitsTable) entry(i int) ([]byte, error) {
	if i < 0 || i >= t.Runs {
		return nil, record.Corruptf(t.name, "run %d of %d", i, t.Runs)
	}
	b, err := t.span(t.runsAt+8*i, t.runsAt+8*i+8)
	if err != nil {
		return nil, err
	}
	from, to := binary.LittleEndian.Uint64(b), uint64(t.end)
	if i+1 < t.Runs {
		if b, err = t.span(t.runsAt+8*i+8, t.runsAt+8*i+16); err != nil {
			return nil, err
		}
		to = binary.LittleEndian.Uint64(b)
	}
	if from < uint64(t.entsAt) || to <= from || to > uint64(t.end) {
		return nil, record.Corruptf(t.name, "run %d: its entry at bytes %d to %d is out of the entries (%d to %d)", i, from, to, t.entsAt, t.end)
	}
	return t.span(int(from), int(to))
}

// RunID returns run i's id (aliasing the file).
func (t *WaitsTable) RunID(i int) ([]byte, error) {
	b, err := t.entry(i)
	if err != nil {
		return nil, err
	}
	d := record.NewFields(b, 0)
	id := d.RunIDBytes()
	if d.Err() != nil {
		return nil, record.Corruptf(t.name, "run %d: %v", i, d.Err())
	}
	return id, nil
}

// rawRunID returns run i's id as its entry's first field holds it,
// unchecked but for its bounds (Run checks it), for Find's comparisons.
func (t *WaitsTable) rawRunID(i int) ([]byte, error) {
	b, err := t.entry(i)
	if err != nil {
		return nil, err
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, record.Corruptf(t.name, "run %d: its id's length is out of its entry", i)
	}
	return b[k : k+int(n)], nil
}

// compareID is strings.Compare(string(b), s) without the conversion's
// allocation (one per probe: Find runs on every commit's Taken).
func compareID(b []byte, s string) int {
	for i := range min(len(b), len(s)) {
		if b[i] != s[i] {
			if b[i] < s[i] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(b) < len(s):
		return -1
	case len(b) > len(s):
		return 1
	}
	return 0
}

// Find returns the index of the run id (ok false: the table has none).
// A sealed table keeps the ids its searches' first waitsFenceDepth probes
// read (at most 2^waitsFenceDepth - 1 of them: those probes are the same
// for every search), so that a search opens only the blocks of its last
// probes, which lie close together.
func (t *WaitsTable) Find(id string) (i int, ok bool, err error) {
	lo, hi := 0, t.Runs
	for depth := 0; lo < hi; depth++ {
		m := int(uint(lo+hi) >> 1)
		var c int
		if sb := t.sealed; sb != nil && depth < waitsFenceDepth {
			rid, ok := sb.fence[m]
			if !ok {
				b, err := t.rawRunID(m)
				if err != nil {
					return 0, false, err
				}
				rid = string(b)
				if sb.fence == nil {
					sb.fence = map[int]string{}
				}
				sb.fence[m] = rid
			}
			c = strings.Compare(rid, id)
		} else {
			b, err := t.rawRunID(m)
			if err != nil {
				return 0, false, err
			}
			c = compareID(b, id)
		}
		switch {
		case c == 0:
			return m, true, nil
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return lo, false, nil
}

// Run decodes run i's entry into r (reusing r's slices, and r.Wait if
// set; payloads alias the file), its ID made by id (nil: a copy). It
// checks the entry alone, as ParseWaits checks each.
func (t *WaitsTable) Run(i int, id func([]byte) string, r *WaitsRun) error {
	b, err := t.entry(i)
	if err != nil {
		return err
	}
	x := r.Wait
	if x == nil {
		x = new(WaitsWait)
	}
	ev := x.Event
	if ev == nil {
		ev = new(WaitsEvent)
	}
	d := record.NewFields(b, 0)
	readWaitsRun(d, len(b), id, r, x, ev)
	if err := d.Done("run entry"); err != nil {
		return record.Corruptf(t.name, "run %d: %v", i, err)
	}
	return nil
}

// parseWaitsTable is ParseWaits of version 2: every block, every entry,
// the sections against the entries (MarshalTable of the content must be
// the file).
func parseWaitsTable(name string, b []byte) (*Waits, error) {
	t, err := OpenWaitsTable(name, b)
	if err != nil {
		return nil, err
	}
	w := &Waits{Version: waitsVersion2, Gen: t.Gen, Replay: t.Replay, High: t.High, Runs: make([]WaitsRun, t.Runs)}
	ready := map[uint64]bool{}
	for i := range w.Runs {
		r := &w.Runs[i]
		if err := t.Run(i, nil, r); err != nil {
			return nil, err
		}
		if i > 0 && w.Runs[i-1].ID >= r.ID {
			return nil, record.Corruptf(name, "run %q follows run %q: the runs are not sorted, or one is there twice", r.ID, w.Runs[i-1].ID)
		}
		if r.Wait != nil && r.Wait.Ready != 0 {
			if ready[r.Wait.Ready] {
				return nil, record.Corruptf(name, "run %q: two waits at place %d of the ready list", r.ID, r.Wait.Ready)
			}
			ready[r.Wait.Ready] = true
		}
	}
	if _, err := t.span(0, t.end); err != nil {
		return nil, err
	}
	if string(w.MarshalTable()) != string(b) {
		return nil, record.Corruptf(name, "its sections do not list its entries' waits (deadlines, ready places, counts)")
	}
	return w, nil
}
