package engine

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// logStore builds a store of three runs over several segments, closed
// cleanly, and returns its files.
//
// Its newest segment has a record past its first that a later record
// vouches for (vouchedRecordInSegment): which records Close writes in one
// group commit depends on timing, so a run of a few more atoms is tried
// until the store has one.
func logStore(t *testing.T) map[string][]byte {
	t.Helper()
	for n := 25; n < 45; n++ {
		fs, _ := buildDerivedStore(t, n, 25)
		files := copyFiles(t, fs, "store")
		segs := segmentPaths(files)
		if len(segs) > 0 && vouchedRecordInSegment(files[segs[len(segs)-1]]) >= 0 {
			return files
		}
	}
	t.Fatal("no store of 25 to 44 atoms per run has a record past the first of its newest segment that a later one vouches for")
	return nil
}

func segmentPaths(files map[string][]byte) []string {
	var segs []string
	for p := range files {
		if strings.HasSuffix(p, ".wal") {
			segs = append(segs, p)
		}
	}
	slices.Sort(segs)
	return segs
}

// recordInSegment returns the offset of a byte inside the payload of the
// k-th record of the segment at path.
func recordInSegment(t *testing.T, b []byte, k int) int {
	t.Helper()
	off := wal.SegmentHeaderSize
	for i := 0; ; i++ {
		if off+wal.RecordHeaderSize > len(b) {
			t.Fatalf("segment has fewer than %d records", k+1)
		}
		n := int(b[off+4]) | int(b[off+5])<<8 | int(b[off+6])<<16 | int(b[off+7])<<24
		if i == k {
			return off + wal.RecordHeaderSize + n/2
		}
		off += (wal.RecordHeaderSize + n + wal.RecordAlign - 1) &^ (wal.RecordAlign - 1)
	}
}

// vouchedRecordInSegment returns the offset of a byte inside the payload
// of a record of the segment b, the second or a later one, that a later
// record vouches for (its synced mark lies past the record's start), or
// -1: a record of the segment's last group commit cannot be told from a
// torn write and is trimmed, by design (wal's Caveats).
func vouchedRecordInSegment(b []byte) int {
	type rec struct{ off, n int }
	var recs []rec
	synced := 0
	for off := wal.SegmentHeaderSize; off+wal.RecordHeaderSize <= len(b); {
		n := int(b[off+4]) | int(b[off+5])<<8 | int(b[off+6])<<16 | int(b[off+7])<<24
		if n == 0 && b[off+8] == 0 {
			break // zeros: the end of the records
		}
		recs = append(recs, rec{off, n})
		synced = max(synced, int(b[off+12])|int(b[off+13])<<8|int(b[off+14])<<16|int(b[off+15])<<24)
		off += (wal.RecordHeaderSize + n + wal.RecordAlign - 1) &^ (wal.RecordAlign - 1)
	}
	for i := 1; i < len(recs); i++ {
		if r := recs[i]; r.off < synced && r.n > 0 {
			return r.off + wal.RecordHeaderSize + r.n/2
		}
	}
	return -1
}

// TestLogDamageRefusedAndUntouched: a store whose log is missing a segment
// or holds a damaged record is refused by Open, naming what is missing or
// where (file, offset, run and seq), and the refused Open leaves every
// file of the store byte-identical. Verify reports the same damage.
func TestLogDamageRefusedAndUntouched(t *testing.T) {
	files := logStore(t)
	segs := segmentPaths(files)
	if len(segs) < 3 {
		t.Fatalf("the store has %d segments, want at least 3", len(segs))
	}
	mid := segs[len(segs)/2]
	for _, tc := range []struct {
		name   string
		damage func(m map[string][]byte)
		want   []string // in Open's error
	}{
		{"middle segment deleted", func(m map[string][]byte) { delete(m, mid) },
			[]string{"segment missing"}},
		{"first segment deleted", func(m map[string][]byte) { delete(m, segs[0]) },
			[]string{segs[0], "missing"}},
		{"newest segment deleted", func(m map[string][]byte) { delete(m, segs[len(segs)-1]) },
			[]string{segs[len(segs)-1], "missing"}},
		{"every segment deleted", func(m map[string][]byte) {
			for _, s := range segs {
				delete(m, s)
			}
		}, []string{"store/wal", "the log is gone"}},
		{"every segment and CHECKPOINT deleted", func(m map[string][]byte) {
			for _, s := range segs {
				delete(m, s)
			}
			delete(m, "store/CHECKPOINT")
		}, []string{"store/wal", "the log is gone"}},
		{"record flipped, whole replay", func(m map[string][]byte) {
			b := bytes.Clone(m[mid])
			b[recordInSegment(t, b, 3)] ^= 0x10
			m[mid] = b
			delete(m, "store/CHECKPOINT")
		}, []string{mid, "offset", "run \"", "seq"}},
		{"record flipped in the newest segment", func(m map[string][]byte) {
			last := segs[len(segs)-1]
			b := bytes.Clone(m[last])
			b[vouchedRecordInSegment(b)] ^= 0x10 // logStore made sure there is one
			m[last] = b
			delete(m, "store/CHECKPOINT")
		}, []string{segs[len(segs)-1], "offset"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string][]byte{}
			for k, v := range files {
				m[k] = v
			}
			tc.damage(m)
			fs := cloneStore(t, m)
			before := copyFiles(t, fs, "store")
			o := testOptions(fs)
			o.Logger = slog.New(slog.DiscardHandler)
			db, err := Open("store", o)
			if err == nil {
				db.Close()
				t.Fatal("Open accepted a store with a damaged log")
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Open's error %q does not say %q", err, w)
				}
			}
			after := copyFiles(t, fs, "store")
			delete(after, "store/LOCK")
			delete(before, "store/LOCK")
			if len(after) != len(before) {
				t.Errorf("the refused Open left %d files, there were %d", len(after), len(before))
			}
			for p, b := range before {
				if !bytes.Equal(after[p], b) {
					t.Errorf("the refused Open changed %s", p)
				}
			}
			rep, verr := Verify(ctx, "store", &VerifyOptions{FS: fs})
			if verr != nil {
				t.Fatal(verr)
			}
			if rep.OK {
				t.Fatal("Verify passes the damaged log")
			}
			t.Logf("Open: %v", err)
			t.Logf("Verify: %v", rep.Failures)
		})
	}
}

// TestLogDamageNamesRunAndSeq: a flipped byte inside an atom record of
// the middle of the log is reported by Open (whole replay) and Verify with
// the run and seq of that atom, found from the records around it.
func TestLogDamageNamesRunAndSeq(t *testing.T) {
	files := logStore(t)
	segs := segmentPaths(files)
	mid := segs[len(segs)/2]
	// Find an atom record in the middle segment and note its run and seq.
	fs := cloneStore(t, files)
	l, err := wal.Open("store/wal", &wal.Options{FS: fs, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := l.NewReader(wal.Pos{})
	if err != nil {
		t.Fatal(err)
	}
	// The atom must not be its run's last: the damage is told to be that
	// run's atom by the run's next atom, which skips its seq. Which atom
	// opens the middle segment depends on the records' sizes (on when the
	// background trained the dictionary), so the first one that has a
	// successor is taken.
	type atomAt struct {
		pos wal.Pos
		run string
		seq uint64
	}
	var inMid []atomAt
	last := map[string]uint64{}
	for rd.Next() {
		var a record.Record
		if err := (&record.Decoder{}).Decode(rd.Record(), rd.Pos(), "", &a); err != nil {
			t.Fatal(err)
		}
		if a.Kind != record.KindAtom {
			continue
		}
		last[a.Run] = max(last[a.Run], a.Seq)
		if wal.SegmentName(rd.Pos().Segment) == mid[len("store/wal/"):] {
			inMid = append(inMid, atomAt{rd.Pos(), a.Run, a.Seq})
		}
	}
	rd.Close()
	l.Close()
	var target wal.Pos
	var run string
	var seq uint64
	for _, a := range inMid {
		if a.seq < last[a.run] {
			target, run, seq = a.pos, a.run, a.seq
			break
		}
	}
	if run == "" {
		t.Fatalf("no atom in the middle segment with a later atom of its run (%d atoms in it)", len(inMid))
	}
	b := bytes.Clone(files[mid])
	b[int(target.Offset)+wal.RecordHeaderSize+40] ^= 0x04
	files[mid] = b
	delete(files, "store/CHECKPOINT") // Open replays the whole log
	fs = cloneStore(t, files)
	want := fmt.Sprintf("run %q seq %d", run, seq)

	_, err = Open("store", testOptions(fs))
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Run != run || ce.Seq != seq || ce.Offset != target.Offset || !strings.Contains(ce.File, mid) {
		t.Fatalf("Open: %v, want a corruption of %s offset %d, %s", err, mid, target.Offset, want)
	}
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || !strings.Contains(fmt.Sprint(rep.Failures), want) {
		t.Fatalf("Verify does not name %s: %v", want, rep.Failures)
	}
}

// TestStoreCreation: STORE is written only once the first segment exists,
// so a log without STORE and without records is a creation that crashed
// (Open completes it), while STORE without a log, or a log with records
// without STORE, is refused.
func TestStoreCreation(t *testing.T) {
	t.Run("crashed creation", func(t *testing.T) {
		fs := vfs.NewMem()
		db, err := Open("store", testOptions(fs))
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		if err := fs.Remove("store/STORE"); err != nil {
			t.Fatal(err)
		}
		db, err = Open("store", testOptions(fs))
		if err != nil {
			t.Fatalf("Open of a store whose creation crashed before STORE: %v", err)
		}
		if !db.Stats().Open.Created {
			t.Error("the store was not reported created")
		}
		db.Close()
	})
	t.Run("STORE without a log", func(t *testing.T) {
		fs := vfs.NewMem()
		seedStore(t, testOptions(fs), "r", 3)
		names, _ := fs.List("store/wal")
		for _, n := range names {
			fs.Remove("store/wal/" + n)
		}
		fs.Remove("store/CHECKPOINT")
		if _, err := Open("store", testOptions(fs)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "log is gone") {
			t.Fatalf("Open: %v, want a refusal saying the log is gone", err)
		}
	})
	t.Run("log without STORE", func(t *testing.T) {
		fs := vfs.NewMem()
		seedStore(t, testOptions(fs), "r", 3)
		fs.Remove("store/STORE")
		if _, err := Open("store", testOptions(fs)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "STORE") {
			t.Fatalf("Open: %v, want a refusal naming STORE", err)
		}
	})
}

// TestCheckpointRowsAgainstLog (issue 20): a CHECKPOINT crafted with a
// valid checksum that drops a real run, lists runs the log does not hold
// and moves a run back: Verify reports each, and the engine trusts the
// log: it never creates the dropped run again, serves it as the log says,
// and does not list the invented runs.
func TestCheckpointRowsAgainstLog(t *testing.T) {
	fs, _ := buildDerivedStore(t, 10, 10)
	want, err := readAnswers(cloneStore(t, copyFiles(t, fs, "store")))
	if err != nil {
		t.Fatal(err)
	}
	forgeCheckpoint(t, fs, func(cp *layout.Checkpoint) {
		var rows []layout.CheckpointRun
		for _, r := range cp.Runs {
			switch r.ID {
			case "alpha": // dropped
			case "beta": // moved back to seq 4, with no frame file of its own
				r.LastSeq, r.FrameSeq, r.IndexedSeq, r.SnapSeq = 4, 4, 4, 4
				rows = append(rows, r)
			default:
				rows = append(rows, r)
			}
		}
		for i := 0; i < 2000; i++ {
			rows = append(rows, layout.CheckpointRun{ID: fmt.Sprintf("invented-%05d", i), LastSeq: 3, FrameSeq: 3, IndexedSeq: 3})
		}
		cp.Runs = rows
	})

	rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	failures := fmt.Sprint(rep.Failures)
	for _, w := range []string{`does not list run "alpha"`, `run "invented-00000", which the log does not create`, `run "beta" at seq 4`} {
		if !strings.Contains(failures, w) {
			t.Errorf("Verify does not report %q: %v", w, failures)
		}
	}

	o := testOptions(fs)
	o.Logger = slog.New(slog.DiscardHandler)
	db, err := Open("store", o)
	if err != nil {
		t.Fatal(err)
	}
	alpha, err := db.Run(ctx, "alpha") // not listed: the log is read first
	if err != nil {
		t.Fatal(err)
	}
	if alpha.LastSeq() != want.runs["alpha"].last || alpha.Head() != want.runs["alpha"].head {
		t.Fatalf("run alpha at seq %d, want %d", alpha.LastSeq(), want.runs["alpha"].last)
	}
	beta, err := db.Run(ctx, "beta")
	if err != nil {
		t.Fatal(err)
	}
	if beta.LastSeq() != want.runs["beta"].last || beta.Head() != want.runs["beta"].head {
		t.Fatalf("run beta at seq %d, want %d", beta.LastSeq(), want.runs["beta"].last)
	}
	if st := db.Stats(); !strings.Contains(st.CheckpointMismatch, "alpha") || st.Runs != 3 {
		t.Errorf("Stats: %d runs, mismatch %q", st.Runs, st.CheckpointMismatch)
	}
	infos, _ := db.Runs()
	if len(infos) != 3 {
		t.Errorf("Runs lists %d runs, want the log's 3", len(infos))
	}
	for _, id := range []string{"alpha", "beta"} {
		r, _ := db.Run(ctx, id)
		f, err := r.StateE()
		if err != nil || !bytes.Equal(frame.AppendFrame(nil, f), want.runs[id].state) {
			t.Errorf("run %s: state differs from the log's (%v)", id, err)
		}
	}
	a, err := alpha.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, msg("after")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// One creation record of alpha in the whole log, and its seqs follow on.
	l, err := wal.Open("store/wal", &wal.Options{FS: fs, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rd, err := l.NewReader(wal.Pos{})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	created := 0
	for rd.Next() {
		var r record.Record
		if err := (&record.Decoder{}).Decode(rd.Record(), rd.Pos(), "", &r); err == nil && r.Kind == record.KindRun && r.Run == "alpha" {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("run alpha has %d creation records", created)
	}
	checkStore(t, fs, testOptions(fs))
}

// TestVerifyDeepLedgerRecords (issue 11 req 6): verify --deep recomputes
// every intent's fingerprint from its tool, args and key, and checks every
// certificate against its intent; without Deep neither is reported, and
// the report says what it did not compare.
func TestVerifyDeepLedgerRecords(t *testing.T) {
	fs := vfs.NewMem()
	seedStore(t, testOptions(fs), "r", 5)
	db, err := Open("store", testOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	in, err := ledger.NewIntent(ledger.Action{Tool: "mail.send", Args: []byte(`{"to":"x"}`), Key: "k"}, "r", 6, 0)
	if err != nil {
		t.Fatal(err)
	}
	in.Tool = "mail.forged" // the fingerprint no longer matches
	forgedIntent := record.AppendLedger(nil, record.KindIntent, ledger.AppendIntent(nil, in), db.comp, 0)
	orphan := &ledger.Certificate{Fingerprint: ledger.Fingerprint{0xee}, RunID: "r", Seq: 6, Status: ledger.StatusDone, Result: []byte("x")}
	orphanCert := record.AppendLedger(nil, record.KindCert, ledger.AppendCertificate(nil, orphan), db.comp, 0)
	for _, rec := range [][]byte{forgedIntent, orphanCert} {
		if _, err := db.append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Unchecked) == 0 {
		t.Fatalf("plain verify: ok %v, unchecked %v: %v", rep.OK, rep.Unchecked, rep.Failures)
	}
	rep, err = Verify(ctx, "store", &VerifyOptions{FS: fs, Deep: true})
	if err != nil {
		t.Fatal(err)
	}
	failures := fmt.Sprint(rep.Failures)
	if rep.OK || !strings.Contains(failures, "does not match its tool, args and key") ||
		!strings.Contains(failures, "certificate of action ee00000000000000, which has no intent before it") {
		t.Fatalf("verify --deep: %v", failures)
	}
	if len(rep.Unchecked) != 0 {
		t.Fatalf("verify --deep says it did not compare %v", rep.Unchecked)
	}
}
