package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/offline"
)

const inspectUsage = "inspect DIR [RUN] [--seq N] [--json] [--keyring FILE]"

const inspectAbout = `Inspect shows what is inside the store in DIR, read-only:
  inspect DIR                 the runs: status, atoms, last seq, head, last
                              snapshot, latest checkpoint, unfinished atom,
                              in-doubt actions; how each ended run ended; and
                              the lineage tree of the runs that have forks
  inspect DIR RUN             one run: its summary, status and end, the run
                              it was forked from and its forks, its unfinished
                              atom and in-doubt actions, and its frame at the
                              last seq, and its streams out (their names and
                              chunk counts)
  inspect DIR RUN --seq N     atom N: its delta, its actions with their
                              certificates, and the frame at N (StateAt)

A run is "active" until it ends "completed", "failed" or "cancelled" (its end
record: the time and the result it ended with, cut to one line; whole in
--json, "end"). A fork's seqs continue its parent's ("parent", "forked_at").
An unfinished atom (begun, neither committed nor failed) is "running" when a
live process holds the store open (this one, or another on this machine,
seen through the lock on DIR/LOCK without taking it), and "interrupted"
otherwise: a crash stopped it. An action with an intent and no certificate
is "running" in a running atom (its exec may be running now; an action that
an earlier crash left in doubt and the agent has not yet settled looks the
same) and "in doubt" everywhere else. A checkpoint is "signed" or "unsigned"
as written; only verify --pubkey checks a signature ("verified").
In an encrypted store the values of erasable memory keys are shown opened
with the keyring; a key whose values were erased (erase --memory-key) is
shown as "KEY: erased" in a frame ("erased_keys" in --json) and as
set_sealed ... erased in a delta, never with a value.
Exit 0 on success, 1 if a record cannot be decoded, 2 on a usage or I/O error.`

const inspectExamples = `  continuumctl inspect ./agent-store
  continuumctl inspect ./agent-store deploy-42
  continuumctl inspect ./agent-store deploy-42 --seq 7 --json`

type runView struct {
	ID      string `json:"id"`
	Created string `json:"created,omitempty"`
	// Status is active, completed, failed or cancelled; End is how the run
	// ended (absent while it is active).
	Status string               `json:"status"`
	End    *offline.ExportedEnd `json:"end,omitempty"`
	// Parent is the run this one was forked from ("": none), at seq
	// ForkedAt of the parent.
	Parent           string                   `json:"parent"`
	ForkedAt         uint64                   `json:"forked_at"`
	Atoms            uint64                   `json:"atoms"`
	LastSeq          uint64                   `json:"last_seq"`
	Head             string                   `json:"head"`
	Fails            int                      `json:"fails"`
	SnapshotSeq      uint64                   `json:"snapshot_seq"`
	FrameSeq         uint64                   `json:"frame_seq"`
	CheckpointSeq    uint64                   `json:"checkpoint_seq"`
	CheckpointSigned bool                     `json:"checkpoint_signed"`
	Running          uint64                   `json:"running"`
	Interrupted      uint64                   `json:"interrupted"`
	AtomActions      []offline.ExportedAction `json:"atom_actions"`
	InDoubt          []offline.ExportedAction `json:"in_doubt"`
	// Rollbacks are the run's rollbacks, completed or pending, in log order; absent if none.
	Rollbacks []offline.ExportedRollback `json:"rollbacks,omitempty"`
	// Waits are the run's waits in log order, the last one its current
	// wait unless an atom took it; PendingEvents the events no wait took
	// yet, in the order sent. Absent if none.
	Waits         []offline.ExportedWait  `json:"waits,omitempty"`
	PendingEvents []offline.ExportedEvent `json:"pending_events,omitempty"`
	// Deprecated: in_flight is running or interrupted, in_flight_actions
	// is atom_actions; both go in the release after next.
	InFlight        uint64                   `json:"in_flight"`
	InFlightActions []offline.ExportedAction `json:"in_flight_actions"`
}

func viewRun(r engine.RunSummary) runView {
	v := runView{ID: r.ID, Created: timeString(r.Created), Status: r.Status, End: offline.NewExportedEnd(r),
		Parent: r.Parent, ForkedAt: r.ForkedAt, Atoms: r.Atoms, LastSeq: r.LastSeq, Head: r.Head.String(),
		Fails: r.Fails, SnapshotSeq: r.SnapshotSeq, FrameSeq: r.FrameSeq, CheckpointSeq: r.CheckpointSeq,
		CheckpointSigned: r.CheckpointSigned, Running: r.Running, Interrupted: r.Interrupted,
		AtomActions: offline.NewExportedActions(r.AtomActions), InDoubt: offline.NewExportedActions(r.InDoubt),
		Rollbacks: offline.NewExportedRollbacks(r.Rollbacks),
		InFlight:  max(r.Running, r.Interrupted), InFlightActions: offline.NewExportedActions(r.AtomActions)}
	for _, w := range r.Waits {
		v.Waits = append(v.Waits, offline.NewExportedWait(w))
	}
	for i := range r.PendingEvents {
		v.PendingEvents = append(v.PendingEvents, *offline.NewExportedEvent(&r.PendingEvents[i]))
	}
	return v
}

func runInspect(args []string, stdout, stderr io.Writer) int {
	fs := ctl.Flags("inspect", inspectUsage, inspectAbout, inspectExamples, stderr)
	keyring := keyringFlag(fs)
	seq := fs.Uint64("seq", 0, "show atom `N` of RUN and the frame at N")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	pos, code, ok := cli.ParseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) < 1 || len(pos) > 2 {
		return cli.UsageErr(fs, stderr, "want DIR and optionally RUN, got %d arguments", len(pos))
	}
	seqSet := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "seq" {
			seqSet = true
		}
	})
	if seqSet && len(pos) != 2 {
		return cli.UsageErr(fs, stderr, "--seq needs a RUN")
	}
	dir := pos[0]
	in, code := openInspector("inspect", dir, *keyring, stderr)
	if in == nil {
		return code
	}
	defer in.Close()
	ctx := context.Background()

	if len(pos) == 1 {
		runs := in.Runs()
		if *asJSON {
			views := make([]runView, 0, len(runs))
			for _, r := range runs {
				views = append(views, viewRun(r))
			}
			return done(stderr, "inspect", writeJSON(stdout, struct {
				Store   string    `json:"store"`
				Dir     string    `json:"dir"`
				Created string    `json:"created"`
				Live    bool      `json:"live"`          // a live process holds the store open
				PID     int       `json:"pid,omitempty"` // its pid, when known
				Runs    []runView `json:"runs"`
			}{in.StoreID(), dir, timeString(in.Created()), in.Holder().Live, in.Holder().PID, views}))
		}
		printRuns(stdout, in, dir, runs)
		return cli.ExitOK
	}

	id := pos[1]
	r, ok := in.Run(id)
	if !ok {
		fmt.Fprintf(stderr, "continuumctl inspect: store %s has no run %q\n", dir, id)
		return cli.ExitUsage
	}
	if !seqSet {
		f, erased, err := in.StateAtWithErased(ctx, id, r.LastSeq)
		if err != nil {
			return ctl.Fail(stderr, "inspect", err)
		}
		streams, err := in.Streams(id)
		if err != nil {
			return ctl.Fail(stderr, "inspect", err)
		}
		if *asJSON {
			type runFrame struct {
				Run   runView   `json:"run"`
				Frame frameView `json:"frame"`
				// Streams are the run's streams out, by name; absent if none.
				Streams []offline.StreamSummary `json:"streams,omitempty"`
			}
			big := newBigJSON()
			return done(stderr, "inspect", writeJSONStreamed(stdout, runFrame{viewRun(r), viewFrameStreamed(f, erased, big), streams}, big,
				func() any { return runFrame{viewRun(r), viewFrame(f, erased), streams} }))
		}
		printRun(stdout, in.Holder(), r, in.Runs())
		if len(streams) > 0 {
			parts := make([]string, len(streams))
			for i, st := range streams {
				parts[i] = fmt.Sprintf("%s (%d chunks)", st.Name, st.Chunks)
			}
			fmt.Fprintf(stdout, "  streams: %s (export --stream NAME)\n", strings.Join(parts, ", "))
		}
		fmt.Fprintf(stdout, "frame at seq %d:\n", r.LastSeq)
		printFrame(stdout, f, erased, "  ")
		return cli.ExitOK
	}

	if r.Parent != "" && *seq != 0 && *seq <= r.ForkedAt {
		fmt.Fprintf(stderr, "continuumctl inspect: seq %d of run %q is its parent's: it was forked from run %q at seq %d (inspect DIR %s --seq %d)\n",
			*seq, id, r.Parent, r.ForkedAt, r.Parent, *seq)
		return cli.ExitUsage
	}
	if first := r.ForkedAt + 1; *seq == 0 || *seq > r.LastSeq {
		switch {
		case r.Atoms == 0:
			fmt.Fprintf(stderr, "continuumctl inspect: run %q has no atom of its own, not %d\n", id, *seq)
		case r.Parent != "":
			fmt.Fprintf(stderr, "continuumctl inspect: run %q has atoms %d..%d of its own, not %d\n", id, first, r.LastSeq, *seq)
		default:
			fmt.Fprintf(stderr, "continuumctl inspect: run %q has atoms 1..%d, not %d\n", id, r.LastSeq, *seq)
		}
		return cli.ExitUsage
	}
	a, err := in.Atom(ctx, id, *seq)
	if err != nil {
		return ctl.Fail(stderr, "inspect", err)
	}
	f, erased, err := in.StateAtWithErased(ctx, id, *seq)
	if err != nil {
		return ctl.Fail(stderr, "inspect", err)
	}
	if *asJSON {
		type atomFrame struct {
			Atom  offline.ExportedAtom `json:"atom"`
			Frame frameView            `json:"frame"`
		}
		big := newBigJSON()
		return done(stderr, "inspect", writeJSONStreamed(stdout, atomFrame{offline.NewExportedAtom(a), viewFrameStreamed(f, erased, big)}, big,
			func() any { return atomFrame{offline.NewExportedAtom(a), viewFrame(f, erased)} }))
	}
	fmt.Fprintf(stdout, "run %q atom %d\n", id, a.Seq)
	fmt.Fprintf(stdout, "  head %s\n", a.Head)
	fmt.Fprintf(stdout, "  at wal %s, %d bytes (%d decompressed)\n", a.Pos, a.Size, a.RawSize)
	if a.Branch != "" {
		reads := "none declared"
		if len(a.Reads) > 0 {
			names := make([]string, len(a.Reads))
			for i, k := range a.Reads {
				names[i] = k.String()
			}
			reads = strings.Join(names, ", ")
		}
		fmt.Fprintf(stdout, "  branch %q: read the state at seq %d; reads %s\n", a.Branch, a.Base, reads)
	}
	ops := offline.NewExportedOps(a)
	fmt.Fprintf(stdout, "delta: %d ops\n", len(ops))
	for _, op := range ops {
		fmt.Fprintf(stdout, "  %s\n", describeOp(op))
	}
	fmt.Fprintf(stdout, "actions: %d\n", len(a.Actions))
	for _, act := range a.Actions {
		printAction(stdout, act, "  ")
	}
	if len(a.Sent) > 0 {
		fmt.Fprintf(stdout, "messages sent: %d\n", len(a.Sent))
		for i, m := range a.Sent {
			fmt.Fprintf(stdout, "  %d to %q: %d bytes\n", i, m.To, len(m.Payload))
		}
	}
	if len(a.Consumed) > 0 {
		fmt.Fprintf(stdout, "messages consumed: %d\n", len(a.Consumed))
		for _, id := range a.Consumed {
			fmt.Fprintf(stdout, "  %s\n", id)
		}
	}
	fmt.Fprintf(stdout, "frame at seq %d:\n", a.Seq)
	printFrame(stdout, f, erased, "  ")
	return cli.ExitOK
}

func done(stderr io.Writer, cmd string, err error) int {
	if err != nil {
		return ctl.Fail(stderr, cmd, err)
	}
	return cli.ExitOK
}

func printRuns(w io.Writer, in *engine.Inspector, dir string, runs []engine.RunSummary) {
	h := in.Holder()
	fmt.Fprintf(w, "store %s at %s: %s%s\n", in.StoreID(), dir, plural(len(runs), "run"), holderWords(h))
	if len(runs) == 0 {
		return
	}
	fmt.Fprintf(w, "%-24s %-9s %8s %8s  %-16s  %8s  %-11s  %-13s  %8s\n", "RUN", "STATUS", "ATOMS", "LAST SEQ", "HEAD", "SNAPSHOT", "CHECKPOINT", "UNFINISHED", "IN DOUBT")
	for _, r := range runs {
		fmt.Fprintf(w, "%-24s %-9s %8d %8d  %-16s  %8d  %-11s  %-13s  %8d\n", clip(r.ID, 24), r.Status, r.Atoms, r.LastSeq, headWords(r),
			r.SnapshotSeq, checkpointWords(r), unfinishedWords(r), len(r.InDoubt))
	}
	for _, r := range runs {
		if e := offline.NewExportedEnd(r); e != nil {
			fmt.Fprintf(w, "ended: run %q %s\n", r.ID, endWords(r))
		}
	}
	if tree := lineageTree(runs); len(tree) > 0 {
		fmt.Fprintf(w, "lineage (runs with forks):\n")
		for _, l := range tree {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	for _, r := range runs {
		for _, a := range r.InDoubt {
			fmt.Fprintf(w, "in doubt: run %q seq %d: %s key %q (intent at wal %s, no certificate)\n", r.ID, a.Seq, a.Tool, a.Key, a.IntentPos)
		}
		for _, a := range r.AtomActions {
			if a.Running {
				fmt.Fprintf(w, "running: run %q seq %d: %s key %q (intent at wal %s, no certificate yet)\n", r.ID, a.Seq, a.Tool, a.Key, a.IntentPos)
			}
		}
	}
}

// holderWords says who holds the store open, for the header line.
func holderWords(h engine.Holder) string {
	switch {
	case !h.Live:
		return ""
	case h.PID != 0:
		return fmt.Sprintf(", open by live process %d", h.PID)
	}
	return ", open by a live process"
}

// headWords is a run's head abbreviated for the table, or "-" for a run
// with no atom of its own (a fork's chain starts at its fork point: its
// parent's head there is the parent's).
func headWords(r engine.RunSummary) string {
	if r.Atoms == 0 {
		return "-"
	}
	return short(r.Head)
}

// checkpointWords names a run's latest checkpoint: "6 signed", "6
// unsigned", or "-" for none.
func checkpointWords(r engine.RunSummary) string {
	if r.CheckpointSeq == 0 {
		return "-"
	}
	if r.CheckpointSigned {
		return fmt.Sprintf("%d signed", r.CheckpointSeq)
	}
	return fmt.Sprintf("%d unsigned", r.CheckpointSeq)
}

// unfinishedWords names a run's unfinished atom: "5 running", "5
// interrupted", or "-".
func unfinishedWords(r engine.RunSummary) string {
	switch {
	case r.Running != 0:
		return fmt.Sprintf("%d running", r.Running)
	case r.Interrupted != 0:
		return fmt.Sprintf("%d interrupted", r.Interrupted)
	}
	return "-"
}

// endWords says how a run ended, for one line: "completed at T, result
// R" with R cut, or "failed at T, no result".
func endWords(r engine.RunSummary) string {
	result := "no result"
	if len(r.Result) > 0 {
		result = "result " + clip(string(r.Result), 80)
	}
	return fmt.Sprintf("%s at %s, %s", r.Status, timeString(r.Ended), result)
}

func printRun(w io.Writer, h engine.Holder, r engine.RunSummary, all []engine.RunSummary) {
	fmt.Fprintf(w, "run %q\n", r.ID)
	if r.Status == "active" {
		fmt.Fprintf(w, "  status active\n")
	} else {
		fmt.Fprintf(w, "  status %s\n", endWords(r))
		fmt.Fprintf(w, "  end at chain seq %d, head %s\n", lastSeq(r)+1, r.EndHead)
	}
	if r.Parent != "" {
		fmt.Fprintf(w, "  forked from run %q at seq %d\n", r.Parent, r.ForkedAt)
	}
	var forks []string
	for _, f := range all {
		if f.Parent == r.ID {
			forks = append(forks, fmt.Sprintf("%q at seq %d", f.ID, f.ForkedAt))
		}
	}
	if len(forks) > 0 {
		fmt.Fprintf(w, "  forks: %s\n", strings.Join(forks, ", "))
	}
	fmt.Fprintf(w, "  atoms %d, last seq %d, failed attempts %d\n", r.Atoms, r.LastSeq, r.Fails)
	if r.Atoms == 0 {
		fmt.Fprintf(w, "  head: none, no atom of its own yet\n")
	} else {
		fmt.Fprintf(w, "  head %s\n", r.Head)
	}
	fmt.Fprintf(w, "  last snapshot at seq %d, frame file at seq %d\n", r.SnapshotSeq, r.FrameSeq)
	switch {
	case r.CheckpointSeq == 0:
		fmt.Fprintf(w, "  no chain checkpoint yet\n")
	case r.CheckpointSigned:
		fmt.Fprintf(w, "  latest chain checkpoint at seq %d, signed (verify --pubkey checks the signature)\n", r.CheckpointSeq)
	default:
		fmt.Fprintf(w, "  latest chain checkpoint at seq %d, unsigned\n", r.CheckpointSeq)
	}
	switch {
	case r.Running != 0:
		by := "a live process"
		if h.PID != 0 {
			by = fmt.Sprintf("live process %d", h.PID)
		}
		fmt.Fprintf(w, "  running atom: seq %d (%s holds the store), %s started\n", r.Running, by, plural(len(r.AtomActions), "action"))
	case r.Interrupted != 0:
		fmt.Fprintf(w, "  interrupted atom: seq %d (no live process holds the store: a crash stopped it), %s started\n",
			r.Interrupted, plural(len(r.AtomActions), "action"))
	default:
		fmt.Fprintf(w, "  no unfinished atom\n")
	}
	for _, a := range r.AtomActions {
		printAction(w, a, "    ")
	}
	fmt.Fprintf(w, "  in-doubt actions: %d\n", len(r.InDoubt))
	for _, a := range r.InDoubt {
		printAction(w, a, "    ")
	}
	for _, rb := range r.Rollbacks {
		state := "completed by"
		if !rb.Completed {
			state = "pending, to be completed by"
		}
		fmt.Fprintf(w, "  rollback to seq %d, %s atom %d, begun %s\n", rb.To, state, rb.Seq, timeString(rb.Started))
		for _, u := range rb.Undo {
			if c := u.Compensation; c != nil {
				fmt.Fprintf(w, "    undid %q of seq %d with %q (key %q)\n", u.Tool, u.Seq, c.Tool, c.Key)
			} else {
				fmt.Fprintf(w, "    not undone: %q of seq %d has no compensation\n", u.Tool, u.Seq)
			}
		}
	}
	for _, wt := range r.Waits {
		what := fmt.Sprintf("event %q", wt.Name)
		if wt.Name == "" {
			what = "the clock (a sleep)"
		}
		deadline := "no deadline"
		if !wt.Deadline.IsZero() {
			deadline = "deadline " + timeString(wt.Deadline)
		}
		fmt.Fprintf(w, "  wait after seq %d for %s, %s, declared %s: %s", wt.Seq, what, deadline, timeString(wt.Declared), wt.Outcome)
		if !wt.Ended.IsZero() {
			fmt.Fprintf(w, " at %s", timeString(wt.Ended))
		}
		if e := wt.Event; e != nil {
			fmt.Fprintf(w, " by sender %q", e.Sender)
		}
		if wt.Taken {
			fmt.Fprintf(w, ", taken by atom %d", wt.Seq+1)
		}
		fmt.Fprintln(w)
	}
	for _, e := range r.PendingEvents {
		fmt.Fprintf(w, "  event %q of sender %q, sent %s after seq %d: no wait took it yet\n", e.Name, e.Sender, timeString(e.Sent), e.Seq)
	}
}
