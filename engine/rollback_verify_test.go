package engine

// Verify, inspect and export of rollbacks: a rollback record changed,
// dropped, replaced or written wrong is reported; the read-only tools show
// what each rollback undid.

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// TestRollbackTampered: a rollback record changed, removed or replaced
// after its atom sealed it is reported by verify, naming the run and the
// seq of the atom that completes the rollback.
func TestRollbackTampered(t *testing.T) {
	for _, c := range []struct {
		name  string
		forge func(rec []byte) []byte
	}{
		{"another target", func(rec []byte) []byte {
			r := decodeForTest(t, rec)
			return record.AppendRollback(nil, r.Run, r.Seq, r.To-1, r.Head, r.Started, r.Undo)
		}},
		{"an undo dropped", func(rec []byte) []byte {
			r := decodeForTest(t, rec)
			return record.AppendRollback(nil, r.Run, r.Seq, r.To, r.Head, r.Started, r.Undo[1:])
		}},
		{"another time", func(rec []byte) []byte {
			r := decodeForTest(t, rec)
			return record.AppendRollback(nil, r.Run, r.Seq, r.To, r.Head, r.Started+1, r.Undo)
		}},
		{"removed", func(rec []byte) []byte {
			r := decodeForTest(t, rec)
			return record.AppendFail(nil, r.Run, r.Seq, "nothing to see")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			db, err := Open("store", testOptions(mem))
			if err != nil {
				t.Fatal(err)
			}
			run, _ := db.Run(ctx, "saga")
			w := newWorld()
			for seq := 1; seq <= 4; seq++ {
				commitStep(t, run, w, pay(seq, true))
			}
			forgeRollbackRecord = c.forge
			_, err = run.Rollback(ctx, 2, RollbackOptions{Exec: w.undoExec})
			forgeRollbackRecord = nil
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range rep.Failures {
				found = found || f.RunID == "saga" && f.Seq == 5
			}
			if rep.OK || !found {
				t.Fatalf("OK %v, failures %v; want run saga seq 5 reported", rep.OK, rep.Failures)
			}
		})
	}
}

func decodeForTest(t *testing.T, rec []byte) *record.Record {
	var r record.Record
	if err := (&record.Decoder{}).Decode(rec, wal.Pos{}, "test", &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// TestRollbackInspected: inspect lists a run's rollbacks with what each
// undid and whether it completed, and export carries the completed one on
// the line of the atom that completes it.
func TestRollbackInspected(t *testing.T) {
	mem := vfs.NewMem()
	db := openTest(t, mem, nil)
	run, _ := db.Run(ctx, "saga")
	w := newWorld()
	commitStep(t, run, w, pay(1, true))
	commitStep(t, run, w, pay(2, true), ledger.Action{Tool: "mail", Args: []byte(`{}`)})
	if _, err := run.Rollback(ctx, 1, RollbackOptions{Exec: w.undoExec, AllowNotUndone: true}); err != nil {
		t.Fatal(err)
	}
	commitStep(t, run, w, pay(4, false))
	stop := errors.New("stop")
	if _, err := run.Rollback(ctx, 3, RollbackOptions{Exec: func(Undo) ledger.Exec {
		return func(context.Context, string) ([]byte, error) { return nil, stop }
	}}); !errors.Is(err, stop) {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	in, err := Inspect(ctx, "store", &InspectOptions{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	runs := in.Runs()
	if len(runs) != 1 || len(runs[0].Rollbacks) != 2 {
		t.Fatalf("inspect: %+v", runs)
	}
	first, second := runs[0].Rollbacks[0], runs[0].Rollbacks[1]
	if first.Seq != 3 || first.To != 1 || !first.Completed || len(first.Undo) != 2 || first.Undo[0].Tool != "mail" ||
		first.Undo[0].Compensation != nil || first.Undo[1].Compensation == nil || first.Undo[1].Compensation.Tool != "refund" {
		t.Fatalf("the completed rollback: %+v", first)
	}
	if second.Seq != 5 || second.To != 3 || second.Completed || len(second.Undo) != 1 {
		t.Fatalf("the pending rollback: %+v", second)
	}
	var out bytes.Buffer
	if n, err := in.Export(ctx, &out, "saga", 0, 0); err != nil || n != 4 {
		t.Fatalf("export: %d lines, %v", n, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if !strings.Contains(lines[2], `"rollback":{"seq":3,"to":1,`) || !strings.Contains(lines[2], `"op":"replace_frame"`) ||
		strings.Contains(lines[3], `"rollback"`) {
		t.Fatalf("export:\n%s", out.String())
	}
}

// TestRollbackRecordWrong: a rollback record whose entries contradict the
// intents of the actions they name (a compensation other than the
// recorded one, an action called not undone that has one) is reported by
// a deep verify at the run and the rollback's seq, also while no atom has
// sealed the record yet.
func TestRollbackRecordWrong(t *testing.T) {
	for _, c := range []struct {
		name, want string
		edit       func(u []record.Undo)
	}{
		{"another compensation", "is not the one its intent records", func(u []record.Undo) {
			c := *u[0].Compensation
			c.Args = []byte(`{"n":99}`)
			u[0].Compensation = &c
		}},
		{"called not undone", "its intent records a compensation", func(u []record.Undo) { u[0].Compensation = nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			db, err := Open("store", testOptions(mem))
			if err != nil {
				t.Fatal(err)
			}
			run, _ := db.Run(ctx, "saga")
			w := newWorld()
			for seq := 1; seq <= 3; seq++ {
				commitStep(t, run, w, pay(seq, true))
			}
			// The record in the log contradicts the intents, and the
			// rollback stays pending: no atom seals it, so only the check
			// against the intents can tell.
			defer func() { forgeRollbackRecord = nil }()
			var r record.Record
			forgeRollbackRecord = func(rec []byte) []byte {
				if err := (&record.Decoder{}).Decode(rec, wal.Pos{}, "test", &r); err != nil {
					t.Fatal(err)
				}
				undo := append([]record.Undo(nil), r.Undo...)
				c.edit(undo)
				return record.AppendRollback(nil, r.Run, r.Seq, r.To, r.Head, r.Started, undo)
			}
			stop := errors.New("stop")
			if _, err := run.Rollback(ctx, 1, RollbackOptions{Exec: func(Undo) ledger.Exec {
				return func(context.Context, string) ([]byte, error) { return nil, stop }
			}}); !errors.Is(err, stop) {
				t.Fatal(err)
			}
			db.Close()
			rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: true})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range rep.Failures {
				found = found || f.RunID == "saga" && f.Seq == 4 && strings.Contains(f.Detail, c.want)
			}
			if rep.OK || !found {
				t.Fatalf("OK %v, failures %v; want run saga seq 4: %s", rep.OK, rep.Failures, c.want)
			}
		})
	}
}
