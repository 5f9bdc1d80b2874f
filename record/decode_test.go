package record

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
)

// TestDecodeRules checks that Decode accepts only what the Append functions
// write, and that every refusal is a *CorruptionError with its position.
func TestDecodeRules(t *testing.T) {
	run := AppendRun(nil, "r1", chain.Nonce{1}, 5)
	for _, c := range []struct {
		name, want string
		rec        []byte
	}{
		{"empty", "empty record", nil},
		{"unknown kind", "unknown record kind 200", []byte{200, 1, 2}},
		{"kind zero", "unknown record kind 0", []byte{0}},
		{"trailing byte", "trailing bytes", append(append([]byte(nil), run...), 0)},
		{"truncated", "need 16 bytes", run[:6]},
		{"non-minimal length", "not minimal", append([]byte{1, 0x82, 0x00}, run[2:]...)},
		{"non-minimal seq", "not minimal", append(AppendString([]byte{4}, "r1"), 0x83, 0x00)},
		{"seq zero atom", "seq 0 is not an atom", AppendAtomHeader(nil, "r1", 0, chain.Hash{})},
		{"empty run id", "invalid run id: empty", AppendFail(nil, "", 1, "x")},
		{"control character", "control character", AppendFail(nil, "a\x01", 1, "x")},
		{"run id too long", "exceeds the bound 256", AppendFail(nil, strings.Repeat("a", 257), 1, "x")},
		{"bad checkpoint", "checkpoint record", []byte{6, 'x'}},
		{"bad store head", "store-head record", []byte{7, 'x'}},
		{"end of seq zero", "seq 0 cannot end", AppendEnd(nil, "r1", 0, chain.Hash{}, EndCompleted, 0, nil)},
		{"end status zero", "unknown status 0", AppendEnd(nil, "r1", 1, chain.Hash{}, 0, 0, nil)},
		{"end status four", "unknown status 4", AppendEnd(nil, "r1", 1, chain.Hash{}, 4, 0, nil)},
		{"end result too long", "exceeds the bound", AppendEnd(nil, "r1", 1, chain.Hash{}, EndCompleted, 0, make([]byte, MaxEndResult+1))},
		{"fork of itself", "forked from itself", AppendFork(nil, "r1", chain.Nonce{}, 0, "r1", 0, chain.Hash{})},
		{"fork of an empty parent id", "invalid run id", AppendFork(nil, "r1", chain.Nonce{}, 0, "", 0, chain.Hash{})},
		{"delete at seq one", "seq 1 cannot delete", AppendDelete(nil, "r1", 1, chain.Hash{}, chain.Hash{}, 0, "", delNote("r1", 1, chain.Hash{}, true))},
		{"delete without note", "its checkpoint", AppendDelete(nil, "r1", 3, chain.Hash{}, chain.Hash{}, 0, "", nil)},
		{"delete of another run's note", "not the deletion's", AppendDelete(nil, "r1", 3, chain.Hash{}, chain.Hash{}, 0, "", delNote("r2", 3, chain.Hash{}, true))},
		{"delete note not final", "not the deletion's", AppendDelete(nil, "r1", 3, chain.Hash{}, chain.Hash{}, 0, "", delNote("r1", 3, chain.Hash{}, false))},
		{"delete note of another head", "not the deletion's", AppendDelete(nil, "r1", 3, chain.Hash{}, chain.Hash{}, 0, "", delNote("r1", 3, chain.Hash{1}, true))},
		{"delete reason too long", "exceeds the bound", AppendDelete(nil, "r1", 3, chain.Hash{}, chain.Hash{}, 0, strings.Repeat("x", MaxDeleteReason+1), delNote("r1", 3, chain.Hash{}, true))},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r Record
			err := (&Decoder{}).Decode(c.rec, wal.Pos{Segment: 2, Offset: 128}, "wal/2", &r)
			var ce *CorruptionError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode = %v, want a *CorruptionError", err)
			}
			if ce.File != "wal/2" || ce.Offset != 128 || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q (file %q offset %d), want one at wal/2 offset 128 saying %q", err, ce.File, ce.Offset, c.want)
			}
		})
	}
}

// delNote is the unsigned chain checkpoint a delete record carries.
func delNote(run string, seq uint64, head chain.Hash, final bool) []byte {
	return chain.MarshalCheckpoint(chain.Checkpoint{StoreID: "s", RunID: run, Seq: seq, Head: head, Final: final})
}

func TestFieldsVarintRules(t *testing.T) {
	for _, c := range []struct {
		b      []byte
		signed bool
		ok     bool
	}{
		{[]byte{0x00}, false, true},
		{[]byte{0x80, 0x00}, false, false},
		{[]byte{0xff, 0x01}, false, true},
		{[]byte{0xff, 0x80, 0x00}, false, false},
		{[]byte{0x01}, true, true},        // -1
		{[]byte{0x81, 0x00}, true, false}, // -1, padded
		{[]byte{0x80}, false, false},      // truncated
	} {
		f := NewFields(c.b, 0)
		if c.signed {
			f.Varint("v")
		} else {
			f.Uvarint("v")
		}
		if (f.Done("t") == nil) != c.ok {
			t.Errorf("%x (signed %v): error %v, want ok=%v", c.b, c.signed, f.Err(), c.ok)
		}
	}
}

// TestCursorNamesDamage writes a log, flips a byte of a record in its
// middle, and checks that the cursor stops there with a *CorruptionError
// naming the segment file, the offset, and the run and seq the damage cuts.
func TestCursorNamesDamage(t *testing.T) {
	fs := vfs.NewMem()
	l, err := wal.Open("wal", &wal.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	comp := newRaw()
	recs := [][]byte{AppendRun(nil, "r1", chain.Nonce{1}, 1)}
	for seq := uint64(1); seq <= 4; seq++ {
		recs = append(recs, comp.Compress(AppendAtomHeader(nil, "r1", seq, chain.Hash{byte(seq)}), AppendAtomBody(nil, nil, nil), 0))
	}
	var third wal.Pos
	for i, rec := range recs {
		pos, err := l.Append(t.Context(), rec)
		if err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			third = pos
		}
	}
	file := func(seg uint64) string { return fs.PathJoin("wal", wal.SegmentName(seg)) }
	read := func() (n int, err error) {
		c, err := NewCursor(l, file, wal.Pos{}, &Decoder{Comp: comp})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for c.Next() {
			n++
		}
		return n, c.Err()
	}
	if n, err := read(); n != 5 || err != nil {
		t.Fatalf("intact log: %d records, %v", n, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := fs.OpenReadWrite(file(third.Segment), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, third.Offset+wal.RecordHeaderSize+4); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l, err = wal.Open("wal", &wal.Options{FS: fs, ReadOnly: true, ReadDamaged: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n, err := read()
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("damaged log: %d records, error %v, want a *CorruptionError", n, err)
	}
	if n != 3 || ce.File != file(third.Segment) || ce.Offset != third.Offset || ce.Run != "r1" || ce.Seq != 3 {
		t.Fatalf("damage reported after %d records as %+v, want at %s offset %d, run r1 seq 3", n, ce, file(third.Segment), third.Offset)
	}
	var we *wal.CorruptionError
	if !errors.As(err, &we) {
		t.Fatalf("the cause %v is not the log's *wal.CorruptionError", err)
	}
}

// FuzzDecode: any bytes decode to a record or a *CorruptionError, never a
// panic; a record of a kind with a fixed layout re-encodes to its input.
func FuzzDecode(f *testing.F) {
	comp := newRaw()
	f.Add(AppendRun(nil, "r1", chain.Nonce{1}, 5))
	f.Add(comp.Compress(AppendAtomHeader(nil, "r1", 3, chain.Hash{2}), AppendAtomBody(nil, []ledger.Fingerprint{{1}}, []byte{1}), 0))
	f.Add(AppendFail(nil, "r1", 3, "boom"))
	f.Add(AppendEnd(nil, "r1", 4, chain.Hash{3}, EndCompleted, 9, []byte("done")))
	f.Add(AppendFork(nil, "f", chain.Nonce{4}, 2, "r1", 3, chain.Hash{5}))
	f.Add(AppendDelete(nil, "r1", 5, chain.Hash{3}, chain.Hash{6}, 9, "policy", delNote("r1", 5, chain.Hash{6}, true)))
	f.Add(AppendErase(nil, "r1", 6, chain.Hash{3}, chain.Hash{6}, 9, "request", delNote("r1", 6, chain.Hash{6}, true)))
	f.Add(AppendEraseKey(nil, "r1", 4, chain.Hash{3}, chain.Hash{6}, 9, "email", []uint64{3, 7}, "request", delNote("r1", 4, chain.Hash{6}, false)))
	f.Add(AppendRollback(nil, "r1", 7, 2, chain.Hash{7}, 9, goldenUndo))
	f.Add(AppendRollback(nil, "r1", 1, 0, chain.Hash{7}, 9, nil))
	f.Add(AppendLedger(nil, KindIntent, ledger.AppendIntent(nil, &ledger.Intent{RunID: "r", Seq: 1, Tool: "t", Args: []byte("{}")}), comp, 0))
	// Durable retries: an attempt's intent (version 3) and a failed
	// attempt's certificate (version 2).
	retry := &ledger.RetryPolicy{MaxAttempts: 3, Initial: 100, Multiplier: 2}
	f.Add(AppendLedger(nil, KindIntent, ledger.AppendIntent(nil, &ledger.Intent{RunID: "r", Seq: 1, Tool: "t", Key: "k", Retry: retry, Attempt: 2, First: 5, Started: 9}), comp, 0))
	f.Add(AppendLedger(nil, KindCert, ledger.AppendCertificate(nil, &ledger.Certificate{RunID: "r", Seq: 1, Status: ledger.StatusFailed, Err: "503",
		Attempt: &ledger.Attempt{Number: 2, First: 5, At: 9, Next: 12}}), comp, 0))
	f.Add(AppendNote(nil, KindCheckpoint, chain.MarshalCheckpoint(chain.Checkpoint{StoreID: "s", RunID: "r", Seq: 1})))
	f.Add(AppendStreamChunk(nil, "r", 1, 1, "tokens", 0, []byte("tok")))
	f.Add(AppendStreamChunk(nil, "r", 9, 3, "a.b:c-d_e", 1<<20, nil))
	f.Add(AppendStreamAbandon(nil, "r", 2, 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := &Decoder{Comp: comp, Ledger: true}
		var r Record
		err := d.Decode(b, wal.Pos{Segment: 1, Offset: 64}, "seg", &r)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		var again []byte
		switch r.Kind {
		case KindRun:
			again = AppendRun(nil, r.Run, r.Nonce, r.Created)
		case KindFail:
			again = AppendFail(nil, r.Run, r.Seq, r.Reason)
		case KindEnd:
			again = AppendEnd(nil, r.Run, r.Seq, r.Head, r.Status, r.Ended, r.Result)
		case KindFork:
			again = AppendFork(nil, r.Run, r.Nonce, r.Created, r.Parent, r.Seq, r.ParentHead)
		case KindDelete:
			again = AppendDelete(nil, r.Run, r.Seq, r.Final, r.Head, r.Deleted, r.Reason, r.Note)
		case KindErase:
			again = AppendErase(nil, r.Run, r.Seq, r.Final, r.Head, r.Deleted, r.Reason, r.Note)
		case KindEraseKey:
			again = AppendEraseKey(nil, r.Run, r.Seq, r.Final, r.Head, r.Deleted, r.Key, r.KeyNos, r.Reason, r.Note)
		case KindRollback:
			again = AppendRollback(nil, r.Run, r.Seq, r.To, r.Head, r.Started, r.Undo)
		case KindStreamChunk:
			again = AppendStreamChunk(nil, r.Run, r.Seq, r.Attempt, r.Stream, r.Offset, r.Chunk)
		case KindStreamAbandon:
			again = AppendStreamAbandon(nil, r.Run, r.Seq, r.Attempt)
		case KindAtom:
			again = append(AppendAtomHeader(nil, r.Run, r.Seq, r.Head), r.Body...)
			if _, _, err := d.DecodeAtom(nil, &r, "seg"); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("atom body error %v is not ErrCorrupt", err)
			}
		default:
			return
		}
		if string(again) != string(b) {
			t.Fatalf("decoded %+v re-encodes to %x, not %x", r, again, b)
		}
	})
}

// FuzzAtomBody decodes an uncompressed atom body: what decodes re-encodes
// to its input, and its delta, when it decodes, applies or is refused
// without a panic.
func FuzzAtomBody(f *testing.F) {
	f.Add(AppendAtomBody(nil, nil, frame.AppendDelta(nil, new(frame.Delta).SetObjective("go"))))
	f.Add(AppendAtomBody(nil, []ledger.Fingerprint{{1}, {2}}, frame.AppendDelta(nil, new(frame.Delta).Set("k", []byte("v")))))
	f.Add(append(AppendAtomBodyHeaderExt(nil, nil, []AtomExt{
		{Tag: ExtTagSent, Data: AppendSent(nil, []SentMessage{{To: "b", Payload: []byte("hi")}})},
		{Tag: ExtTagConsumed, Data: AppendConsumed(nil, []MessageID{{From: "c", Seq: 1}})}}),
		frame.AppendDelta(nil, new(frame.Delta).SetObjective("go"))...))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeAtomBody(b)
		if err != nil {
			return
		}
		if enc := append(AppendAtomBodyHeaderExt(nil, a.Actions, a.Exts), a.Delta...); string(enc) != string(b) {
			t.Fatalf("atom body %x re-encodes to %x", b, enc)
		}
		if sent, consumed, err := a.Messages(); err == nil {
			for i, m := range sent {
				if CheckRunID(m.To) != nil || len(m.Payload) > MaxMessageSize {
					t.Fatalf("message %d out of bounds", i)
				}
			}
			for _, id := range consumed {
				if id.Seq == 0 {
					t.Fatalf("consumed %v", id)
				}
			}
		}
		if d, err := frame.DecodeDelta(a.Delta); err == nil {
			f := &frame.Frame{Memory: map[string][]byte{}}
			if f.CanApply(d) == nil {
				if err := f.Apply(d); err != nil {
					t.Fatalf("a delta CanApply accepted does not apply: %v", err)
				}
			}
		}
	})
}

// TestDecodeLoadsDictionary: a record compressed with a dictionary the
// decoder's set lacks is reported as needing that dictionary's file; with
// LoadDict (a reader beside a live writer that trained it since), the
// dictionary is loaded once and the record decodes.
func TestDecodeLoadsDictionary(t *testing.T) {
	dict := []byte(strings.Repeat("an intent of a tool call with its sanitized arguments, ", 8))
	writer := frame.NewDicts()
	if err := writer.Add(7, dict); err != nil {
		t.Fatal(err)
	}
	body := ledger.AppendIntent(nil, &ledger.Intent{RunID: "r", Seq: 1, Tool: "t",
		Args: []byte(`{"note": "an intent of a tool call with its sanitized arguments"}`)})
	rec := AppendLedger(nil, KindIntent, body, frame.NewCompressor(writer), 7)
	pos := wal.Pos{Segment: 1, Offset: 64}

	readerDicts := frame.NewDicts()
	dec := &Decoder{Comp: frame.NewCompressor(readerDicts), Ledger: true, Dicts: readerDicts,
		DictFile: func(id uint32) string { return "dicts/" + string(rune('0'+id)) + ".dict" }}
	var r Record
	err := dec.Decode(rec, pos, "wal/1", &r)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.File != "dicts/7.dict" || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Decode without the dictionary = %v, want the missing dicts/7.dict", err)
	}

	loads := 0
	dec.LoadDict = func(id uint32) error {
		loads++
		if id != 7 {
			t.Fatalf("LoadDict(%d), want 7", id)
		}
		return readerDicts.Add(id, dict)
	}
	if err := dec.Decode(rec, pos, "wal/1", &r); err != nil {
		t.Fatalf("Decode with LoadDict: %v", err)
	}
	if string(r.Plain) != string(body) || loads != 1 {
		t.Fatalf("decoded %q after %d loads, want the body after 1", r.Plain, loads)
	}
	if err := dec.Decode(rec, pos, "wal/1", &r); err != nil || loads != 1 {
		t.Fatalf("second Decode: %v after %d loads, want no second load", err, loads)
	}
}

// TestCursorNamesDamageInFork: damage to a fork's first atom is named as
// that atom (its fork point + 1), not as seq 1: a fork's seqs start at its
// fork point, with or without the cursor skipping the fork record.
func TestCursorNamesDamageInFork(t *testing.T) {
	for _, skip := range []bool{false, true} {
		fs := vfs.NewMem()
		l, err := wal.Open("wal", &wal.Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		comp := newRaw()
		atom := func(run string, seq uint64) []byte {
			return comp.Compress(AppendAtomHeader(nil, run, seq, chain.Hash{byte(seq)}), AppendAtomBody(nil, nil, nil), 0)
		}
		recs := [][]byte{AppendRun(nil, "r1", chain.Nonce{1}, 1), atom("r1", 1), atom("r1", 2), atom("r1", 3),
			AppendFork(nil, "f", chain.Nonce{2}, 2, "r1", 3, chain.Hash{3}), atom("f", 4), atom("f", 5), atom("f", 6)}
		var bad wal.Pos
		for i, rec := range recs {
			pos, err := l.Append(t.Context(), rec)
			if err != nil {
				t.Fatal(err)
			}
			if i == 5 {
				bad = pos
			}
		}
		l.Close()
		file := func(seg uint64) string { return fs.PathJoin("wal", wal.SegmentName(seg)) }
		f, err := fs.OpenReadWrite(file(bad.Segment), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{0xff}, bad.Offset+wal.RecordHeaderSize+4); err != nil {
			t.Fatal(err)
		}
		f.Close()
		l, err = wal.Open("wal", &wal.Options{FS: fs, ReadOnly: true, ReadDamaged: true})
		if err != nil {
			t.Fatal(err)
		}
		dec := &Decoder{Comp: comp}
		if skip {
			dec.Skip = func(k Kind, _ []byte) bool { return k != KindAtom }
		}
		c, err := NewCursor(l, file, wal.Pos{}, dec)
		if err != nil {
			t.Fatal(err)
		}
		for c.Next() {
		}
		var ce *CorruptionError
		if err := c.Err(); !errors.As(err, &ce) || ce.Run != "f" || ce.Seq != 4 || ce.Offset != bad.Offset {
			t.Errorf("skip %v: damage reported as %v, want run f seq 4 at offset %d", skip, err, bad.Offset)
		}
		c.Close()
		l.Close()
	}
}

// TestAtomBodyExtensionRules: a version 2 body has one encoding; anything
// else is damage named by what is wrong.
func TestAtomBodyExtensionRules(t *testing.T) {
	head := func(exts ...byte) []byte { return append([]byte{AtomBodyVersionExt, 0}, exts...) }
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		{"no extension in a version 2 body", head(0), "extension count 0"},
		{"too many extensions", head(MaxAtomExts + 1), "extension count 17"},
		{"unknown tag", head(1, 9, 0), "unknown atom extension tag 9"},
		{"tag zero", head(1, 0, 0), "unknown atom extension tag 0"},
		{"tags out of order", head(2, 3, 0, 1, 0), "tag 1 after tag 3"},
		{"a tag twice", head(2, 1, 0, 1, 0), "tag 1 after tag 1"},
		{"data beyond the body", head(1, 1, 5, 1), "extension data"},
		{"version 3", []byte{3, 0}, "unknown atom body version 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeAtomBody(c.body)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("DecodeAtomBody(%x) = %v, want an error with %q", c.body, err, c.want)
			}
		})
	}
	// Without extensions the writer keeps version 1, byte for byte.
	fps := []ledger.Fingerprint{{1}}
	if got, want := AppendAtomBodyHeaderExt(nil, fps, nil), AppendAtomBodyHeader(nil, fps); !bytes.Equal(got, want) {
		t.Fatalf("no extensions: %x, want version 1's %x", got, want)
	}
	body := append(AppendAtomBodyHeaderExt(nil, fps, []AtomExt{{Tag: ExtTagSent, Data: []byte("m")}}), 0x07)
	a, err := DecodeAtomBody(body)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := a.Ext(ExtTagSent); !ok || string(d) != "m" || !bytes.Equal(a.Delta, []byte{0x07}) || a.Actions[0] != fps[0] {
		t.Fatalf("read back %+v", a)
	}
}

// TestDecodeRollbackRules: a rollback record whose target, entries or
// compensations break format.go's rules is damage naming what is wrong.
func TestDecodeRollbackRules(t *testing.T) {
	undo := func(seq uint64, c *ledger.Compensation) Undo {
		return Undo{Seq: seq, Action: ledger.Fingerprint{1}, Tool: "t", Compensation: c}
	}
	comp := &ledger.Compensation{Tool: "u", Key: "k"}
	for _, c := range []struct {
		name, want string
		rec        []byte
	}{
		{"seq 0", "seq 0 cannot complete a rollback", AppendRollback(nil, "r", 0, 0, chain.Hash{}, 0, nil)},
		{"target not before seq", "not before its own seq", AppendRollback(nil, "r", 3, 3, chain.Hash{}, 0, nil)},
		{"entry at the target", "is not after the target", AppendRollback(nil, "r", 5, 2, chain.Hash{}, 0, []Undo{undo(2, nil)})},
		{"entry past the seq", "is not after the target", AppendRollback(nil, "r", 5, 2, chain.Hash{}, 0, []Undo{undo(6, nil)})},
		{"oldest first", "newest first", AppendRollback(nil, "r", 5, 0, chain.Hash{}, 0, []Undo{undo(1, nil), undo(2, nil)})},
		{"compensation of no tool", "without a tool", AppendRollback(nil, "r", 5, 0, chain.Hash{}, 0, []Undo{{Seq: 1, Compensation: comp}})},
		{"compensation without a key", "without a tool or a key",
			AppendRollback(nil, "r", 5, 0, chain.Hash{}, 0, []Undo{undo(1, &ledger.Compensation{Tool: "u"})})},
		{"unknown how", "unknown how 3", func() []byte {
			b := AppendRollback(nil, "r", 5, 0, chain.Hash{}, 0, []Undo{undo(1, comp)})
			b[len(b)-6] = 3 // the how byte, before "u" and "k"
			return b
		}()},
		{"count beyond the record", "exceeds the record", append(AppendRollback(nil, "r", 5, 0, chain.Hash{}, 0, nil)[:38], 0x7f)},
		{"trailing bytes", "trailing bytes", append(AppendRollback(nil, "r", 5, 0, chain.Hash{}, 0, []Undo{undo(1, comp)}), 0)},
	} {
		var r Record
		err := (&Decoder{}).Decode(c.rec, wal.Pos{Segment: 2, Offset: 64}, "wal/2", &r)
		var ce *CorruptionError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) || ce.Offset != 64 {
			t.Errorf("%s: %v, want a *CorruptionError at offset 64 saying %q", c.name, err, c.want)
		}
	}
}

// TestCursorInternsRunIDs checks that the records of one run a cursor
// reads share one run-id string, that Decode alone still gives each its
// own, and that Known's seqs and those read are both what damage names.
func TestCursorInternsRunIDs(t *testing.T) {
	fs := vfs.NewMem()
	l, err := wal.Open("wal", &wal.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	comp := newRaw()
	recs := [][]byte{AppendRun(nil, "r1", chain.Nonce{1}, 1), AppendRun(nil, "r2", chain.Nonce{2}, 1)}
	for seq := uint64(1); seq <= 3; seq++ {
		for _, run := range []string{"r1", "r2"} {
			recs = append(recs, comp.Compress(AppendAtomHeader(nil, run, seq, chain.Hash{byte(seq)}), AppendAtomBody(nil, nil, nil), 0))
		}
	}
	for _, rec := range recs {
		if _, err := l.Append(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
	}
	c, err := NewCursor(l, func(uint64) string { return "seg" }, wal.Pos{}, &Decoder{Comp: comp})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Known(map[string]uint64{"r0": 7})
	first := map[string]*byte{}
	for c.Next() {
		r := c.Record()
		p := unsafe.StringData(r.Run)
		if q, ok := first[r.Run]; !ok {
			first[r.Run] = p
		} else if p != q {
			t.Errorf("%s seq %d: a run id string of its own", r.Run, r.Seq)
		}
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	var a, b Record
	if err := (&Decoder{}).Decode(recs[2], wal.Pos{}, "", &a); err != nil {
		t.Fatal(err)
	}
	if err := (&Decoder{}).Decode(recs[2], wal.Pos{}, "", &b); err != nil {
		t.Fatal(err)
	}
	if unsafe.StringData(a.Run) == unsafe.StringData(b.Run) {
		t.Error("Decode shares run-id strings between calls")
	}
	got := c.names.into(c.before)
	if want := map[string]uint64{"r0": 7, "r1": 3, "r2": 3}; len(got) != len(want) || got["r0"] != 7 || got["r1"] != 3 || got["r2"] != 3 {
		t.Errorf("seqs damage would name %v, want %v", got, want)
	}
}
