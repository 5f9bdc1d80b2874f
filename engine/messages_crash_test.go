package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/crashmem"
	"github.com/google/go-cmp/cmp"
)

// The message ring of the power-loss test: a sends to b, b to c, c to a.
// Atom k of each run consumes its source's message of atom k (a's atom k,
// the message of c's atom k-1), then sends one message; each payload
// names its sender, seq and the process that sent it (the epoch), so that
// a message of an atom that never committed, seen before a crash, cannot
// pass for the one its seq committed with afterwards.
var (
	ringRuns   = []string{"a", "b", "c"}
	ringSource = map[string]string{"a": "c", "b": "a", "c": "b"}
	ringDest   = map[string]string{"a": "b", "b": "c", "c": "a"}
)

const ringAtoms = 4

// ringAtom runs atom k of run: receive (from its source, unless it is a's
// first), record what came and what goes in the frame, send, commit.
func ringAtom(ctx context.Context, run *Run, epoch int) error {
	a, err := run.Begin(ctx)
	if err != nil {
		return err
	}
	k, id := a.Seq(), run.ID()
	d := new(frame.Delta)
	if id != "a" || k > 1 {
		wait, cancel := context.WithTimeout(ctx, 2*time.Minute) // a hang guard: the sender commits first
		m, err := a.ReceiveFrom(wait, ringSource[id])
		cancel()
		if err != nil {
			a.Fail(ctx, err.Error())
			return fmt.Errorf("run %s seq %d: receive: %w", id, k, err)
		}
		d.Set(fmt.Sprint("got/", k), m.Payload)
		d.Set(fmt.Sprint("got-id/", k), []byte(m.ID.String()))
	}
	p := []byte(fmt.Sprintf("%s#%d@%d", id, k, epoch))
	d.Set(fmt.Sprint("sent/", k), p)
	if err := a.Send(ctx, ringDest[id], p); err != nil {
		return err
	}
	return a.Commit(ctx, d)
}

// ringRound runs the ring to ringAtoms atoms per run from wherever the
// store is, and returns the first error (the process then stops).
func ringRound(db *DB, epoch int, acked map[string]uint64, cut *powerCut) error {
	runs := map[string]*Run{}
	for _, id := range ringRuns {
		r, err := db.Run(ctx, id)
		if err != nil {
			return err
		}
		runs[id] = r
	}
	for k := uint64(1); k <= ringAtoms; k++ {
		for _, id := range ringRuns {
			if runs[id].LastSeq() >= k {
				continue
			}
			if err := ringAtom(ctx, runs[id], epoch); err != nil {
				return err
			}
			if cut == nil || !cut.cutBefore() {
				acked[id] = k
			}
		}
	}
	// a ends with c's last message not consumed: it is never delivered.
	if runs["a"].Status() == StatusActive {
		return runs["a"].End(ctx, StatusCompleted, nil)
	}
	return nil
}

// TestMessagesPowerLoss cuts the power at every filesystem operation of
// three runs exchanging messages (each crash stops a sender and a
// receiver at once), in both durability modes, then resumes: no
// acknowledged atom lost, every message consumed once and in order, none
// of an atom that did not commit, the frames those of a ring that never
// crashed (epochs aside), nothing left in the inboxes (the last message
// was to a run that then ended), and verify passes.
func TestMessagesPowerLoss(t *testing.T) {
	base := vfs.NewCrashableMem()
	db, err := Open("store", messageOptions(base))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ringRuns {
		if _, err := db.Run(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	want := ringTrial(t, base, Strict, 0, 0, nil)
	everyPowerCut(t, 4, 2, "", func(t *testing.T, mode Durability, pct int, target uint64) uint64 {
		if target == 0 {
			return ringOps(t, base, mode, pct, want)
		}
		ringTrial(t, base, mode, pct, target, want)
		return 0
	})
}

func messageOptions(fs vfs.FS) *Options {
	o := testOptions(fs)
	o.RestartTail = 2 << 10 // engine checkpoints (and INBOX) within the ring
	return o
}

// ringOps counts the filesystem operations of an uncut trial.
func ringOps(t *testing.T, base *vfs.MemFS, mode Durability, pct int, want map[string]map[string]string) uint64 {
	t.Helper()
	mem := base.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	cut := &powerCut{mem: crashmem.New(mem), down: &downstream{}, target: 0}
	opts := messageOptions(mem)
	opts.Durability = mode
	opts.FS = errorfs.Wrap(cut.mem, cut)
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := ringRound(db, 1, map[string]uint64{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if cut.n.Load() == 0 {
		t.Fatal("the trial performed no filesystem operation")
	}
	return cut.n.Load()
}

// ringTrial runs the ring on a copy of base with a power cut at operation
// target (none if 0), resumes it on what the cut left and checks it. It
// returns the frames of the runs, epochs removed.
func ringTrial(t *testing.T, base *vfs.MemFS, mode Durability, pct int, target uint64, want map[string]map[string]string) map[string]map[string]string {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%v, crash at op %d: "+format, append([]any{mode, target}, args...)...)
	}
	mem, cut := newPowerCut(base, pct, target)
	opts := messageOptions(mem)
	opts.Durability = mode
	opts.FS = errorfs.Wrap(cut.mem, cut)
	acked := map[string]uint64{}
	if db, err := Open("store", opts); err == nil {
		ringRound(db, 1, acked, cut) // the process that loses power
		db.Close()
	} else if !cut.cutBefore() {
		fail("open: %v", err)
	}
	fs := cut.survivor(mem)
	o := messageOptions(fs)
	o.Durability = mode
	db, err := Open("store", o)
	if err != nil {
		fail("reopen: %v", err)
	}
	for _, id := range ringRuns {
		if r, err := db.Run(ctx, id); err != nil || r.LastSeq() < acked[id] {
			fail("run %s after the restart: seq %d, %v; %d were acknowledged", id, r.LastSeq(), err, acked[id])
		}
	}
	if err := ringRound(db, 2, map[string]uint64{}, nil); err != nil {
		fail("resume: %v", err)
	}
	frames := map[string]*frame.Frame{}
	for _, id := range ringRuns {
		frames[id] = openRun(t, db, id).State()
	}
	// Every message consumed is the one its sender's committed atom sent,
	// each once, in order: got/k of a run is sent/k of its source (c's
	// k-1 for a).
	for _, id := range ringRuns {
		src := ringSource[id]
		for k := uint64(1); k <= ringAtoms; k++ {
			sk := k
			if id == "a" {
				if k == 1 {
					continue
				}
				sk = k - 1
			}
			got, sent := frames[id].Memory[fmt.Sprint("got/", k)], frames[src].Memory[fmt.Sprint("sent/", sk)]
			if got == nil || string(got) != string(sent) {
				fail("run %s seq %d consumed %q; %s's atom %d sent %q", id, k, got, src, sk, sent)
			}
			if gid, want := string(frames[id].Memory[fmt.Sprint("got-id/", k)]), (MessageID{From: src, Seq: sk}).String(); gid != want {
				fail("run %s seq %d consumed message %s, want %s", id, k, gid, want)
			}
		}
	}
	// Nothing is left: c's last message was to a, which ended.
	for _, id := range ringRuns {
		if in := inboxOf(t, openRun(t, db, id)); len(in) != 0 {
			fail("%s's inbox %q, want it empty", id, in)
		}
	}
	if err := db.Close(); err != nil {
		fail("close: %v", err)
	}
	// The inbox after a restart from what Close wrote is the same.
	db, err = Open("store", o)
	if err != nil {
		fail("reopen: %v", err)
	}
	for _, id := range ringRuns {
		if in := inboxOf(t, openRun(t, db, id)); len(in) != 0 {
			fail("%s's inbox after a clean restart: %q", id, in)
		}
	}
	db.Close()
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs, Deep: true})
	if err != nil || !rep.OK {
		fail("verify: %v %v", err, rep.Failures)
	}
	out := map[string]map[string]string{}
	for id, f := range frames {
		m := map[string]string{}
		for k, v := range f.Memory {
			s := string(v)
			if i := strings.IndexByte(s, '@'); i >= 0 {
				s = s[:i]
			}
			m[k] = s
		}
		out[id] = m
	}
	if want != nil {
		if diff := cmp.Diff(want, out); diff != "" {
			fail("the frames differ from a ring that never crashed (-want +got):\n%s", diff)
		}
	}
	return out
}
