package offline

// Verify's checks of the files derived from the log and of the log's
// completeness: CHECKPOINT's rows against the runs of the log, the log
// against CHECKPOINT's replay position, and with Deep the ledger table
// against the log's intents and certificates, every intent's fingerprint
// and every certificate against its intent.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// derivedCheck is what the scan gathers for these checks.
type derivedCheck struct {
	cp     *layout.Checkpoint // nil: none, or unreadable (reported)
	replay wal.Pos            // cp's replay position
	atRec  bool               // a record starts or ends at replay, or replay is the log's end
	end    wal.Pos            // end of the last record read

	// Before cp's replay position: the runs created (with their nonce).
	created map[string]chain.Nonce
	// seqs holds each run's last seq before cp's replay position and its
	// last seq read so far: one entry per run, found once per atom.
	seqs map[string]*runSeqs

	// Deep: the ledger as of the replay position, rebuilt from the log,
	// and where each intent was (to name a certificate's or entry's run).
	ledger     *ledger.Ledger
	intents    map[ledger.Fingerprint]intentAt
	intentLocs map[ledger.Loc]ledger.Fingerprint
	certLocs   map[ledger.Loc]certAt
	table      []byte // the ledger table CHECKPOINT names; nil if none
	// fpRun names the run of each action's intent or certificate.
	fpRun map[ledger.Fingerprint]string
}

type runSeqs struct {
	before uint64 // the last seq before cp's replay position
	all    uint64 // the last seq read
}

// runSeqs returns the entry of run, made if there is none.
func (dc *derivedCheck) runSeqs(run string) *runSeqs {
	s := dc.seqs[run]
	if s == nil {
		s = &runSeqs{}
		dc.seqs[run] = s
	}
	return s
}

// lastSeqs returns run's last seq before cp's replay position and its
// last seq in the log (0 and 0 for a run the log does not hold).
func (dc *derivedCheck) lastSeqs(run string) (before, all uint64) {
	if s := dc.seqs[run]; s != nil {
		return s.before, s.all
	}
	return 0, 0
}

type certAt struct {
	fp     ledger.Fingerprint
	status ledger.Status
}

type intentAt struct {
	run string
	seq uint64
}

func newDerivedCheck() *derivedCheck {
	return &derivedCheck{created: map[string]chain.Nonce{}, seqs: map[string]*runSeqs{},
		ledger: ledger.New(), intents: map[ledger.Fingerprint]intentAt{},
		intentLocs: map[ledger.Loc]ledger.Fingerprint{}, certLocs: map[ledger.Loc]certAt{}, fpRun: map[ledger.Fingerprint]string{}}
}

// before reports whether pos lies before CHECKPOINT's replay position.
func (dc *derivedCheck) before(pos wal.Pos) bool { return dc.cp != nil && pos.Less(dc.replay) }

// noteRecord is called for every record the scan reads, in log order.
func (vr *verifyRun) noteRecord(pos, next wal.Pos) {
	dc := vr.dc
	// The replay position is where a record starts, or where one ends: a
	// checkpoint taken when the log's end was a full segment's seal names
	// the seal's offset (the log's End then), which no record starts at.
	if dc.cp != nil && (pos == dc.replay || next == dc.replay) {
		dc.atRec = true
	}
	dc.end = next
}

func (vr *verifyRun) noteRun(r *record.Record) {
	dc := vr.dc
	if r.Kind == record.KindFork { // its seqs start at its fork point
		s := dc.runSeqs(r.Run)
		s.all = max(s.all, r.Seq)
		if dc.before(r.Pos) {
			s.before = max(s.before, r.Seq)
		}
	}
	if dc.before(r.Pos) {
		dc.created[r.Run] = r.Nonce
	}
}

func (vr *verifyRun) noteAtom(a *record.Record) {
	dc := vr.dc
	s := dc.runSeqs(a.Run)
	s.all = max(s.all, a.Seq)
	if dc.before(a.Pos) {
		s.before = max(s.before, a.Seq)
	}
}

// noteIntent checks an intent's fingerprint (Deep) and records it.
func (vr *verifyRun) noteIntent(in *ledger.Intent, pos wal.Pos, loc string) {
	if !vr.deep {
		return
	}
	if err := in.CheckFingerprint(); err != nil {
		vr.fail(in.RunID, in.Seq, loc, "intent: %v", err)
	}
	vr.noteCompensation(in) // verify_rollback.go
	vr.noteAttempt(in, loc) // verify_retry.go
	if _, ok := vr.dc.intents[in.Fingerprint]; !ok {
		vr.dc.intents[in.Fingerprint] = intentAt{run: in.RunID, seq: in.Seq}
	}
	vr.dc.intentLocs[pos] = in.Fingerprint
	vr.dc.fpRun[in.Fingerprint] = in.RunID
	if vr.dc.before(pos) {
		vr.dc.ledger.ApplyIntent(in, pos)
	}
}

// noteCert checks a certificate against its intent (Deep) and records it.
func (vr *verifyRun) noteCert(c *ledger.Certificate, pos wal.Pos, loc string) {
	if !vr.deep {
		return
	}
	in, ok := vr.dc.intents[c.Fingerprint]
	switch {
	case !ok && c.Status == ledger.StatusDone:
		// Exec runs only once its intent is durable. A resolution needs
		// none: Resolve and ResolveFailed with an explicit key settle an
		// action this store has no record of (ledger.Ledger.Resolve).
		vr.fail(c.RunID, c.Seq, loc, "certificate of action %x, which has no intent before it", c.Fingerprint[:8])
	case !ok:
	case in.run != c.RunID && !vr.sameLineage(in.run, c.RunID):
		// (Its seq and index may differ: an action settled by Resolve in a
		// later attempt of the atom.)
		vr.fail(c.RunID, c.Seq, loc, "certificate of action %x names run %q, its intent run %q", c.Fingerprint[:8], c.RunID, in.run)
	}
	vr.noteAttemptOutcome(c, loc) // verify_retry.go
	vr.dc.certLocs[pos] = certAt{fp: c.Fingerprint, status: c.Status}
	vr.dc.fpRun[c.Fingerprint] = c.RunID
	if vr.dc.before(pos) {
		vr.dc.ledger.ApplyCertificate(c, pos, false)
	}
}

// logDamage reports damage the scan met in the log, with the run and seq
// it reaches (the cursor names them from the records around it).
func (vr *verifyRun) logDamage(err error) {
	var ce *record.CorruptionError
	if !errors.As(err, &ce) {
		vr.v.Corrupt(vr.db.path(layout.WALDir), err)
		return
	}
	vr.fail(ce.Run, ce.Seq, fmt.Sprintf("%s offset %d", ce.File, ce.Offset), "%s", ce.Reason)
	var we *wal.CorruptionError
	if errors.As(err, &we) {
		vr.damaged = append(vr.damaged, damagedRecord{pos: wal.Pos{Segment: we.Segment, Offset: we.Offset}, file: ce.File})
	}
}

// damagedRecord is a record of the log that cannot be read.
type damagedRecord struct {
	pos  wal.Pos
	file string
}

// nameDamagedLedgerRecords names, for each unreadable record that the
// ledger table says is an action's intent or certificate, that action's
// run and seq: from the action's other record, or from CHECKPOINT's list
// of the actions of an atom in flight. The log alone can only name the
// atoms around an unreadable record; an intent of an atom that never
// committed has none of its own (Deep; the table must be CHECKPOINT's).
func (vr *verifyRun) nameDamagedLedgerRecords() {
	dc := vr.dc
	if len(vr.damaged) == 0 || dc.table == nil || dc.cp == nil || layout.CheckLedgerTable(dc.table, dc.cp.LedgerGen, dc.replay) != "" {
		return
	}
	if err := ledger.New().LoadTable(dc.table); err != nil {
		return
	}
	owners := map[ledger.Loc]ledger.Fingerprint{}
	for t, i := newTableView(dc.table), 0; i < t.len(); i++ {
		e := t.at(i)
		if e.intent != (ledger.Loc{}) {
			owners[e.intent] = e.fp
		}
		if e.cert != (ledger.Loc{}) {
			owners[e.cert] = e.fp
		}
	}
	for _, d := range vr.damaged {
		fp, ok := owners[d.pos]
		if !ok {
			continue
		}
		run, seq := "", uint64(0)
		if in, ok := dc.intents[fp]; ok {
			run, seq = in.run, in.seq
		}
		for i := range dc.cp.Runs {
			c := &dc.cp.Runs[i]
			for _, a := range c.Inflight {
				if run == "" && a.FP == fp {
					run, seq = c.ID, c.LastSeq+1
				}
			}
		}
		if run != "" {
			vr.fail(run, seq, fmt.Sprintf("%s offset %d", d.file, d.pos.Offset),
				"the unreadable record is an intent or certificate of action %x of run %q seq %d (the ledger table names its position)", fp[:8], run, seq)
		}
	}
}

// checkLogPresent reports a log that is missing at its ends: no segment
// although STORE exists, a first segment other than 1 that RETENTION does
// not explain.
func (vr *verifyRun) checkLogPresent(log *wal.Log) {
	db := vr.db
	if log == nil {
		vr.fail("", 0, db.path(layout.WALDir), "missing: the log is gone, but STORE says a store was here")
		return
	}
	segs := log.Segments()
	if len(segs) == 0 {
		vr.fail("", 0, db.path(layout.WALDir), "holds no log segment: the log is gone, but STORE says a store was here")
		return
	}
	vr.checkRetention(segs[0].ID)
}

// finishDerived compares CHECKPOINT and (Deep) the ledger table with the
// log once it is read whole.
func (vr *verifyRun) finishDerived(rep *chain.Report) {
	db, dc := vr.db, vr.dc
	vr.nameDamagedLedgerRecords()
	if cp := dc.cp; cp != nil {
		name := db.path(layout.CheckpointName)
		if cp.Dict > db.newestDict {
			vr.fail("", 0, db.fs.PathJoin(db.path(layout.DictsDir), layout.DictFileName(cp.Dict)),
				"missing: %s was written after it existed, and the log's records may need it", name)
		}
		switch {
		case dc.end.Less(dc.replay):
			vr.fail("", 0, db.segmentFile(dc.replay.Segment), "the log ends at %v, but %s replays from %v: records or segments are missing",
				dc.end, name, dc.replay)
		case !dc.atRec && dc.replay != dc.end:
			vr.fail("", 0, name, "replays from %v, where no record of the log starts", dc.replay)
		}
		listed := map[string]bool{}
		for i := range cp.Runs {
			c := &cp.Runs[i]
			listed[c.ID] = true
			nonce, ok := dc.created[c.ID]
			before, all := dc.lastSeqs(c.ID)
			switch {
			case !ok:
				vr.fail(c.ID, 0, name, "lists run %q, which the log does not create before its replay position", c.ID)
			case nonce != c.Nonce:
				vr.fail(c.ID, 0, name, "run %q has another nonce than its creation record", c.ID)
			// The checkpoint takes the replay position below every write in
			// flight, then the runs: an atom committed in between is at or
			// after the position and already in the table. So the table's
			// seq lies between the log's before the position and its last.
			case c.LastSeq < before || c.LastSeq > all:
				vr.fail(c.ID, min(before, c.LastSeq)+1, name, "run %q at seq %d, but the log holds seq %d of it before the replay position and %d in all",
					c.ID, c.LastSeq, before, all)
			}
		}
		for id := range dc.created {
			if !listed[id] && !vr.deleted(id) {
				vr.fail(id, 0, name, "does not list run %q, which the log creates before its replay position", id)
			}
		}
	}
	if !vr.deep {
		// Their checksums were checked (frame files) or are checked by
		// the engine when it loads them (the ledger table), and the engine
		// rebuilds either from the log when they do not match; only Deep
		// compares their contents with the log.
		rep.Unchecked = append(rep.Unchecked, "frame files (their frames)", "the ledger table (its entries)")
		return
	}
	if dc.cp != nil && dc.cp.LedgerGen != 0 {
		vr.compareLedgerTable()
	}
}

// compareLedgerTable checks the ledger table CHECKPOINT names against
// the log: every entry's intent and certificate locations hold records of
// that action (with the entry's status), and every action the log's
// records before the replay position settle has its entry. (Records just
// after the replay position may be in the table too: the engine's
// checkpoint takes the table after the position.) A table that is
// missing, damaged or not the one CHECKPOINT names is not compared: the
// engine rebuilds it from the log.
func (vr *verifyRun) compareLedgerTable() {
	db, dc := vr.db, vr.dc
	name := db.ledgerTableName(dc.cp.LedgerGen)
	if dc.table == nil || layout.CheckLedgerTable(dc.table, dc.cp.LedgerGen, dc.replay) != "" {
		return
	}
	if err := ledger.New().LoadTable(dc.table); err != nil {
		return
	}
	at := func(fp ledger.Fingerprint) (string, uint64) {
		in := dc.intents[fp]
		return in.run, in.seq
	}
	// Both tables are in strictly ascending fingerprint order (LoadTable
	// checked the stored one): the second loop walks them side by side,
	// holding no index of either.
	stored := newTableView(dc.table)
	for i := range stored.len() {
		e := stored.at(i)
		run, seq := at(e.fp)
		if e.intent != (ledger.Loc{}) && dc.intentLocs[e.intent] != e.fp {
			vr.fail(run, seq, name, "entry of action %x names an intent at %d:%d that is not its intent", e.fp[:8], e.intent.Segment, e.intent.Offset)
			return
		}
		if e.cert != (ledger.Loc{}) {
			// An action tried again after a failure (a retry policy's next
			// attempt, or a later Do) is an intent after its failed
			// certificate until its new outcome.
			again := e.status == ledger.StatusIntent && e.cert.Less(e.intent)
			if c, ok := dc.certLocs[e.cert]; !ok || c.fp != e.fp || (c.status != e.status && !(again && c.status == ledger.StatusFailed)) {
				vr.fail(run, seq, name, "entry of action %x names a certificate at %d:%d that is not its certificate", e.fp[:8], e.cert.Segment, e.cert.Offset)
				return
			}
		} else if e.status != ledger.StatusIntent {
			vr.fail(run, seq, name, "entry of action %x is %v without a certificate", e.fp[:8], e.status)
			return
		}
		if e.intent == (ledger.Loc{}) && e.cert == (ledger.Loc{}) {
			vr.fail(run, seq, name, "entry of action %x names no record", e.fp[:8])
			return
		}
	}
	want, j := newTableView(dc.ledger.AppendTable(nil)), 0
	for k := range want.len() {
		w := want.at(k)
		for ; j < stored.len(); j++ {
			if fp := stored.at(j).fp; bytes.Compare(fp[:], w.fp[:]) >= 0 {
				break
			}
		}
		var h tableEntry
		ok := j < stored.len()
		if ok {
			h = stored.at(j)
			ok = h.fp == w.fp
		}
		run, seq := at(w.fp)
		switch {
		case !ok && vr.deleted(dc.fpRun[w.fp]):
			// Forgotten with the deleted run's reclaimed records.
		case !ok:
			vr.fail(run, seq, name, "has no entry for action %x, which the log records before the replay position", w.fp[:8])
			return
		case w.status != ledger.StatusIntent && (h.status != w.status || h.cert != w.cert):
			vr.fail(run, seq, name, "entry of action %x is %v at %d:%d, the log certifies it %v at %d:%d",
				w.fp[:8], h.status, h.cert.Segment, h.cert.Offset, w.status, w.cert.Segment, w.cert.Offset)
			return
		}
	}
}

// tableEntry is one entry of a ledger table, as stored.
type tableEntry struct {
	fp           ledger.Fingerprint
	status       ledger.Status
	intent, cert ledger.Loc
}

// tableView reads the entries of a table that LoadTable accepted (see
// ledger/format.go: 72-byte entries after a 24- or 48-byte header, or, in
// version 3, 48-byte entries after a 48-byte header, in strictly ascending
// fingerprint order) in place: a table of n actions costs no more than its
// bytes.
type tableView struct {
	b          []byte
	hdr, esize int
}

func newTableView(b []byte) tableView {
	switch binary.LittleEndian.Uint16(b[4:]) {
	case 2:
		return tableView{b: b, hdr: 48, esize: 72}
	case 3:
		return tableView{b: b, hdr: 48, esize: 48}
	}
	return tableView{b: b, hdr: 24, esize: 72}
}

// len is the number of entries.
func (t tableView) len() int { return max(0, (len(t.b)-t.hdr)/t.esize) }

// at returns entry i.
func (t tableView) at(i int) tableEntry {
	e := t.b[t.hdr+i*t.esize : t.hdr+(i+1)*t.esize]
	if t.esize == 48 { // the status in the top two bits of the intent's offset
		u32 := func(i int) uint64 { return uint64(binary.LittleEndian.Uint32(e[i:])) }
		io := u32(36)
		return tableEntry{fp: ledger.Fingerprint(e[:32]), status: ledger.Status(io>>30) + ledger.StatusIntent,
			intent: ledger.Loc{Segment: u32(32), Offset: int64(io & (1<<30 - 1))}, cert: ledger.Loc{Segment: u32(40), Offset: int64(u32(44))}}
	}
	loc := func(b []byte) ledger.Loc {
		return ledger.Loc{Segment: binary.LittleEndian.Uint64(b), Offset: int64(binary.LittleEndian.Uint64(b[8:]))}
	}
	return tableEntry{fp: ledger.Fingerprint(e[:32]), status: ledger.Status(e[32]), intent: loc(e[40:]), cert: loc(e[56:])}
}
