package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/continuumdb/continuum/engine"
)

const inspectUsage = "inspect DIR [RUN] [--seq N] [--json]"

const inspectAbout = `Inspect shows what is inside the store in DIR, read-only:
  inspect DIR                 the runs: atoms, last seq, head, last snapshot,
                              atom in flight, in-doubt actions
  inspect DIR RUN             one run: its summary, in-flight and in-doubt
                              actions, and its frame at the last seq
  inspect DIR RUN --seq N     atom N: its delta, its actions with their
                              certificates, and the frame at N (StateAt)
Exit 0 on success, 1 if a record cannot be decoded, 2 on a usage or I/O error.`

type runView struct {
	ID              string       `json:"id"`
	Created         string       `json:"created,omitempty"`
	Atoms           uint64       `json:"atoms"`
	LastSeq         uint64       `json:"last_seq"`
	Head            string       `json:"head"`
	Fails           int          `json:"fails"`
	SnapshotSeq     uint64       `json:"snapshot_seq"`
	FrameSeq        uint64       `json:"frame_seq"`
	CheckpointSeq   uint64       `json:"checkpoint_seq"`
	InFlight        uint64       `json:"in_flight"`
	InFlightActions []actionView `json:"in_flight_actions"`
	InDoubt         []actionView `json:"in_doubt"`
}

func viewRun(r engine.RunSummary) runView {
	return runView{ID: r.ID, Created: timeString(r.Created), Atoms: r.Atoms, LastSeq: r.LastSeq, Head: r.Head.String(),
		Fails: r.Fails, SnapshotSeq: r.SnapshotSeq, FrameSeq: r.FrameSeq, CheckpointSeq: r.CheckpointSeq,
		InFlight: r.InFlight, InFlightActions: viewActions(r.InFlightActions), InDoubt: viewActions(r.InDoubt)}
}

func runInspect(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("inspect", inspectUsage, inspectAbout, stderr)
	seq := fs.Uint64("seq", 0, "show atom `N` of RUN and the frame at N")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usageErr(fs, stderr, "want DIR and optionally RUN, got %d arguments", len(pos))
	}
	seqSet := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "seq" {
			seqSet = true
		}
	})
	if seqSet && len(pos) != 2 {
		return usageErr(fs, stderr, "--seq needs a RUN")
	}
	dir := pos[0]
	in, code := openInspector("inspect", dir, stderr)
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
				Runs    []runView `json:"runs"`
			}{in.StoreID(), dir, timeString(in.Created()), views}))
		}
		printRuns(stdout, in, dir, runs)
		return exitOK
	}

	id := pos[1]
	r, ok := in.Run(id)
	if !ok {
		fmt.Fprintf(stderr, "continuumctl inspect: store %s has no run %q\n", dir, id)
		return exitUsage
	}
	if !seqSet {
		f, err := in.StateAt(ctx, id, r.LastSeq)
		if err != nil {
			return fail(stderr, "inspect", err)
		}
		if *asJSON {
			return done(stderr, "inspect", writeJSON(stdout, struct {
				Run   runView   `json:"run"`
				Frame frameView `json:"frame"`
			}{viewRun(r), viewFrame(f)}))
		}
		printRun(stdout, r)
		fmt.Fprintf(stdout, "frame at seq %d:\n", r.LastSeq)
		printFrame(stdout, f, "  ")
		return exitOK
	}

	if *seq == 0 || *seq > r.LastSeq {
		fmt.Fprintf(stderr, "continuumctl inspect: run %q has atoms 1..%d, not %d\n", id, r.LastSeq, *seq)
		return exitUsage
	}
	a, err := in.Atom(ctx, id, *seq)
	if err != nil {
		return fail(stderr, "inspect", err)
	}
	f, err := in.StateAt(ctx, id, *seq)
	if err != nil {
		return fail(stderr, "inspect", err)
	}
	if *asJSON {
		return done(stderr, "inspect", writeJSON(stdout, struct {
			Atom  atomView  `json:"atom"`
			Frame frameView `json:"frame"`
		}{viewAtom(a), viewFrame(f)}))
	}
	fmt.Fprintf(stdout, "run %q atom %d\n", id, a.Seq)
	fmt.Fprintf(stdout, "  head %s\n", a.Head)
	fmt.Fprintf(stdout, "  at wal %s, %d bytes (%d decompressed)\n", a.Pos, a.Size, a.RawSize)
	ops := a.Delta.Ops()
	fmt.Fprintf(stdout, "delta: %d ops\n", len(ops))
	for _, op := range ops {
		fmt.Fprintf(stdout, "  %s\n", describeOp(op))
	}
	fmt.Fprintf(stdout, "actions: %d\n", len(a.Actions))
	for _, act := range a.Actions {
		printAction(stdout, act, "  ")
	}
	fmt.Fprintf(stdout, "frame at seq %d:\n", a.Seq)
	printFrame(stdout, f, "  ")
	return exitOK
}

func done(stderr io.Writer, cmd string, err error) int {
	if err != nil {
		return fail(stderr, cmd, err)
	}
	return exitOK
}

func printRuns(w io.Writer, in *engine.Inspector, dir string, runs []engine.RunSummary) {
	fmt.Fprintf(w, "store %s at %s: %s\n", in.StoreID(), dir, plural(len(runs), "run"))
	if len(runs) == 0 {
		return
	}
	fmt.Fprintf(w, "%-24s %8s %8s  %-16s  %8s  %8s  %9s  %8s\n", "RUN", "ATOMS", "LAST SEQ", "HEAD", "SNAPSHOT", "CHECKPT", "IN FLIGHT", "IN DOUBT")
	for _, r := range runs {
		flight := "-"
		if r.InFlight != 0 {
			flight = fmt.Sprint(r.InFlight)
		}
		fmt.Fprintf(w, "%-24s %8d %8d  %-16s  %8d  %8d  %9s  %8d\n", clip(r.ID, 24), r.Atoms, r.LastSeq, short(r.Head),
			r.SnapshotSeq, r.CheckpointSeq, flight, len(r.InDoubt))
	}
	for _, r := range runs {
		for _, a := range r.InDoubt {
			fmt.Fprintf(w, "in doubt: run %q seq %d: %s key %q (intent at wal %s, no certificate)\n", r.ID, a.Seq, a.Tool, a.Key, a.IntentPos)
		}
	}
}

func printRun(w io.Writer, r engine.RunSummary) {
	fmt.Fprintf(w, "run %q\n", r.ID)
	fmt.Fprintf(w, "  atoms %d, last seq %d, failed attempts %d\n", r.Atoms, r.LastSeq, r.Fails)
	fmt.Fprintf(w, "  head %s\n", r.Head)
	fmt.Fprintf(w, "  last snapshot at seq %d, frame file at seq %d, last chain checkpoint at seq %d\n", r.SnapshotSeq, r.FrameSeq, r.CheckpointSeq)
	if r.InFlight == 0 {
		fmt.Fprintf(w, "  no atom in flight\n")
	} else {
		fmt.Fprintf(w, "  atom in flight: seq %d, %s started\n", r.InFlight, plural(len(r.InFlightActions), "action"))
		for _, a := range r.InFlightActions {
			printAction(w, a, "    ")
		}
	}
	fmt.Fprintf(w, "  in-doubt actions: %d\n", len(r.InDoubt))
	for _, a := range r.InDoubt {
		printAction(w, a, "    ")
	}
}
