package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/zeebo/blake3"
)

// refResult is the certified result of the i-th atom's j-th action in the
// reference tests: long enough that a copy of it shows in the record.
func refResult(i, j int) string {
	return fmt.Sprintf(`{"atom":%d,"action":%d,"listing":%q}`, i, j, strings.Repeat(fmt.Sprintf("object-%d-%d ", i, j), 12))
}

// commitWithResults commits n atoms of run id, each with two actions whose
// results its delta records (the second as a tool message, the first as a
// tool output), and returns the frames at every seq (want[0] the empty
// one) and the position of each atom's record.
func commitWithResults(t *testing.T, db *DB, id string, n int) []*frame.Frame {
	t.Helper()
	run, err := db.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := []*frame.Frame{{Memory: map[string][]byte{}}}
	for i := 1; i <= n; i++ {
		a, err := run.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got [2][]byte
		for j := range got {
			res := refResult(i, j)
			got[j], err = a.Do(ctx, ledger.Action{Tool: "ls", Args: fmt.Appendf(nil, `{"i":%d,"j":%d}`, i, j)},
				func(context.Context, string) ([]byte, error) { return []byte(res), nil })
			if err != nil {
				t.Fatal(err)
			}
		}
		d := new(frame.Delta).
			AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: fmt.Sprint("listing ", i)}).
			AppendMessage(frame.Message{Role: frame.RoleTool, CallID: fmt.Sprint("c", i), Tool: "ls", Content: string(got[1])}).
			ToolOutput(fmt.Sprint("o", i), "ls", got[0]).
			Set("last", []byte(fmt.Sprint(i)))
		if err := a.Commit(ctx, d); err != nil {
			t.Fatal(err)
		}
		f := want[len(want)-1].Clone()
		if err := f.Apply(d); err != nil {
			t.Fatal(err)
		}
		want = append(want, f)
	}
	return want
}

// storedBody returns the decompressed body of run's atom at seq, as the
// log holds it.
func storedBody(t *testing.T, db *DB, run *Run, seq uint64) []byte {
	t.Helper()
	run.mu.Lock()
	pos := run.mu.book.Positions[seq-run.mu.book.IndexedSeq-1]
	run.mu.Unlock()
	a, err := db.readAtom(pos, run.id, seq)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := db.comp.Decompress(nil, a.Body)
	if err != nil {
		t.Fatal(err)
	}
	return plain
}

func sameFrame(t *testing.T, what string, got, want *frame.Frame) {
	t.Helper()
	if !bytes.Equal(frame.AppendFrame(nil, got), frame.AppendFrame(nil, want)) {
		t.Fatalf("%s: frame differs from the inline deltas' (%d messages, want %d)", what, len(got.Messages), len(want.Messages))
	}
}

// TestCommitRefersToCertifiedResults: a delta's copy of a certified result
// of its atom is stored as a reference, and every reader (State after a
// crash and after a clean close, StateAt, verify --deep at the end) gets
// the frame of the inline deltas.
func TestCommitRefersToCertifiedResults(t *testing.T) {
	for _, mode := range []Durability{Strict, Relaxed} {
		t.Run(mode.String(), func(t *testing.T) {
			fs := vfs.NewMem()
			opts := testOptions(fs)
			opts.Durability = mode
			opts.SnapshotEvery = 1 << 20 // StateAt reads the log
			db, err := Open("store", opts)
			if err != nil {
				t.Fatal(err)
			}
			want := commitWithResults(t, db, "r", 12)
			run, _ := db.Run(ctx, "r")
			for seq := uint64(1); seq <= 12; seq++ {
				body := storedBody(t, db, run, seq)
				for j := range 2 {
					if bytes.Contains(body, []byte(refResult(int(seq), j))) {
						t.Fatalf("seq %d: the atom's record holds a copy of certified result %d", seq, j)
					}
				}
			}
			crash(db) // replay the tail: every frame comes from the log
			db = openTest(t, fs, opts)
			run, err = db.Run(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			st, err := run.StateE()
			if err != nil {
				t.Fatal(err)
			}
			sameFrame(t, "State after a crash", st, want[12])
			for _, seq := range []uint64{1, 5, 11} {
				f, err := run.StateAt(ctx, seq)
				if err != nil {
					t.Fatal(err)
				}
				sameFrame(t, fmt.Sprint("StateAt ", seq), f, want[seq])
			}
			info, err := run.Atom(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			if ops := info.Delta.Ops(); ops[1].Content != refResult(3, 1) || len(ops[1].Refs) != 0 {
				t.Fatalf("Run.Atom shows the tool message as %+v, want the certified result", ops[1])
			}
		})
	}
}

// TestInlineResultsKnob: the benchmarks' baseline stores the results
// inline, so the test above would see them if Commit did not refer.
func TestInlineResultsKnob(t *testing.T) {
	inlineResults.Store(true)
	defer inlineResults.Store(false)
	fs := vfs.NewMem()
	db := openTest(t, fs, nil)
	commitWithResults(t, db, "r", 2)
	run, _ := db.Run(ctx, "r")
	if body := storedBody(t, db, run, 2); !bytes.Contains(body, []byte(refResult(2, 1))) {
		t.Fatal("with inline results, the atom's record does not hold the result")
	}
}

// TestReferenceTampered: an atom whose delta refers to a certified result
// it cannot have, or whose referenced certificate is not the one its chain
// covers, is reported by verify at its seq, and the engine refuses to
// build a frame from the first kind.
func TestReferenceTampered(t *testing.T) {
	refDelta := func() []byte {
		return frame.AppendDelta(nil, new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleTool, CallID: "c", Content: "x"}).
			ReferResults([][]byte{[]byte("x")}))
	}
	forgedFP := ledger.Fingerprint{0xfe, 31: 0xef}
	cases := []struct {
		name   string
		forge  func(db *DB, run *Run)
		kind   chain.Kind
		detail string
		engine bool // the engine's State sees it too
	}{
		{"reference to no action", func(db *DB, run *Run) {
			// Chained correctly (the chain is not keyed): only the
			// reference is wrong.
			body := record.AppendAtomBody(nil, nil, refDelta())
			head := db.hasher.Link(run.id, 5, run.Head(), body)
			db.log.Append(ctx, db.comp.Compress(record.AppendAtomHeader(nil, run.id, 5, head), body, 0))
		}, chain.KindCorrupt, "refers to certified result 0; the atom lists 0 actions", true},
		{"reference to an uncertified action", func(db *DB, run *Run) {
			body := record.AppendAtomBody(nil, []ledger.Fingerprint{forgedFP}, refDelta())
			head := db.hasher.Link(run.id, 5, run.Head(), append(body, make([]byte, 32)...))
			db.log.Append(ctx, db.comp.Compress(record.AppendAtomHeader(nil, run.id, 5, head), body, 0))
		}, chain.KindCorrupt, "which has no certificate before the atom", true},
		{"referenced certificate changed", func(db *DB, run *Run) {
			// The atom was linked over the result "x"; the certificate it
			// refers to now says "changed".
			c := &ledger.Certificate{Fingerprint: forgedFP, RunID: run.id, Seq: 5, Status: ledger.StatusDone, Result: []byte("changed")}
			db.log.Append(ctx, db.comp.Compress([]byte{byte(record.KindCert)}, ledger.AppendCertificate(nil, c), 0))
			body := record.AppendAtomBody(nil, []ledger.Fingerprint{forgedFP}, refDelta())
			sum := blake3.Sum256([]byte("x"))
			head := db.hasher.Link(run.id, 5, run.Head(), append(body, sum[:]...))
			db.log.Append(ctx, db.comp.Compress(record.AppendAtomHeader(nil, run.id, 5, head), body, 0))
		}, chain.KindHashMismatch, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			opts := testOptions(fs)
			db, err := Open("store", opts)
			if err != nil {
				t.Fatal(err)
			}
			run := commitN(t, db, "r", 4)
			commitN(t, db, "other", 3)
			tc.forge(db, run)
			crash(db)
			for _, deep := range []bool{false, true} {
				rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs, Deep: deep})
				if err != nil {
					t.Fatal(err)
				}
				var found bool
				for _, f := range rep.Failures {
					if f.RunID == "r" && f.Kind == tc.kind && f.Seq == 5 && strings.Contains(f.String(), tc.detail) && strings.Contains(f.String(), "wal ") {
						found = true
					}
					if f.RunID == "other" {
						t.Errorf("failure in the untouched run: %s", f)
					}
				}
				if rep.OK || !found {
					t.Fatalf("deep %v: want %s at run r seq 5 saying %q, with its place in the log; got %v", deep, tc.kind, tc.detail, rep.Failures)
				}
			}
			if !tc.engine {
				return
			}
			db, err = Open("store", opts)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("open: %v, want a corruption error", err)
				}
				return
			}
			defer db.Close()
			r, err := db.Run(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.StateE()
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.Run != "r" || ce.Seq != 5 {
				t.Fatalf("State of the tampered run: %v, want a corruption error of run r seq 5", err)
			}
		})
	}
}
