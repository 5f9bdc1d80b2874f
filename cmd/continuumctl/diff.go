package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/offline"
)

const diffUsage = "diff DIR RUN_A A [RUN_B] B [--json] [--keyring FILE]"

const diffAbout = `Diff shows, read-only, how two states of the runs of the store in DIR
differ: the delta ops of the atoms that lead from the latest state both
share (the base) to each of them.
  diff DIR RUN A B            run RUN at seq A and at seq B: the base is the
                              earlier seq, and the other side holds the atoms
                              after it (A < B: b holds atoms A+1..B, a none)
  diff DIR RUN_A A RUN_B B    two runs of one lineage (a fork and its parent,
                              two forks of one run): the base is where their
                              histories part, each side holds its atoms since
                              (RUN_B left out is RUN_A)
A seq is a number (0: before the first atom, the empty frame) or "last",
the run's last seq. A fork's seqs continue its parent's: a fork of P at seq
5 holds P's atoms 1..5 and its own from 6, so a base in inherited history
is named by the run that wrote it.

The text shows the base (run, seq, head), each side's point and the atoms
it has since the base, then those atoms in order: each one's delta ops, one
per line, and its actions, values cut to one line as inspect cuts them; a
value of an erasable memory key opened with the keyring, or "erased" (erase
--memory-key), as inspect and export show it.
--json prints one object, values whole:
  store, dir
  base     {run, seq, head}: the common state (head absent at seq 0)
  a, b     {run, seq, spans: [{run, from, to}], ops, atoms}: the point as
           given, the seqs of each run from the base to it, their delta ops
           counted, and the atoms as export writes them
Exit 0 on success, 1 if a record cannot be decoded or the fork records
contradict each other, 2 on a usage or I/O error (a run the store does not
have, a seq past a run's last, runs of two lineages).`

const diffExamples = `  continuumctl diff ./agent-store deploy-42 3 7
  continuumctl diff ./agent-store deploy-42 0 last --json
  continuumctl diff ./agent-store deploy-42 last deploy-42-retry last`

// diffView is what diff --json prints: the store, then the diff as
// continuumd answers it.
type diffView struct {
	Store string `json:"store"`
	Dir   string `json:"dir"`
	offline.ExportedDiff
}

func runDiff(args []string, stdout, stderr io.Writer) int {
	fs := ctl.Flags("diff", diffUsage, diffAbout, diffExamples, stderr)
	keyring := keyringFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	pos, code, ok := cli.ParseFlags(fs, args)
	if !ok {
		return code
	}
	var runA, seqA, runB, seqB string
	switch len(pos) {
	case 4:
		runA, seqA, runB, seqB = pos[1], pos[2], pos[1], pos[3]
	case 5:
		runA, seqA, runB, seqB = pos[1], pos[2], pos[3], pos[4]
	default:
		return cli.UsageErr(fs, stderr, "want DIR RUN A B or DIR RUN_A A RUN_B B, got %d arguments", len(pos))
	}
	for _, s := range []string{seqA, seqB} {
		if _, err := strconv.ParseUint(s, 10, 64); err != nil && s != "last" {
			return cli.UsageErr(fs, stderr, "seq %q is not a number or \"last\"", s)
		}
	}
	dir := pos[0]
	in, code := openInspector("diff", dir, *keyring, stderr)
	if in == nil {
		return code
	}
	defer in.Close()

	var seqs [2]uint64
	for i, p := range [][2]string{{runA, seqA}, {runB, seqB}} {
		r, ok := in.Run(p[0])
		if !ok {
			fmt.Fprintf(stderr, "continuumctl diff: store %s has no run %q\n", dir, p[0])
			return cli.ExitUsage
		}
		if p[1] == "last" {
			seqs[i] = lastSeq(r)
		} else {
			seqs[i], _ = strconv.ParseUint(p[1], 10, 64) // checked above
		}
	}
	d, err := in.Diff(context.Background(), runA, seqs[0], runB, seqs[1])
	if err != nil {
		return ctl.Fail(stderr, "diff", err)
	}
	if *asJSON {
		v := diffView{Store: in.StoreID(), Dir: dir, ExportedDiff: offline.NewExportedDiff(d)}
		return done(stderr, "diff", writeJSON(stdout, v))
	}
	printDiff(stdout, in.StoreID(), dir, d)
	return cli.ExitOK
}

// lastSeq is the last seq of the run r summarizes, as Diff takes it: its
// last atom's, or for a fork with no atom of its own yet, its fork point.
func lastSeq(r engine.RunSummary) uint64 {
	if r.Parent != "" {
		return max(r.LastSeq, r.ForkedAt)
	}
	return r.LastSeq
}

func printDiff(w io.Writer, store, dir string, d *offline.Diff) {
	fmt.Fprintf(w, "store %s at %s\n", store, dir)
	fmt.Fprintf(w, "base: run %q seq %d", d.Base.Run, d.Base.Seq)
	if d.Base.Seq > 0 {
		fmt.Fprintf(w, ", head %s", short(d.BaseHead))
	} else {
		fmt.Fprintf(w, ", before the first atom")
	}
	fmt.Fprintf(w, "\n")
	sides := []struct {
		name string
		s    *offline.DiffSide
	}{{"a", &d.A}, {"b", &d.B}}
	for _, side := range sides {
		s := side.s
		fmt.Fprintf(w, "%s: run %q seq %d: ", side.name, s.Point.Run, s.Point.Seq)
		if len(s.Atoms) == 0 {
			fmt.Fprintf(w, "the base, no atom since\n")
			continue
		}
		spans := make([]string, 0, len(s.Spans))
		for _, sp := range s.Spans {
			spans = append(spans, fmt.Sprintf("run %q %s", sp.Run, seqRange(sp.From, sp.To)))
		}
		fmt.Fprintf(w, "%s since the base (%s), %s\n", plural(len(s.Atoms), "atom"), strings.Join(spans, ", "), plural(s.Ops(), "op"))
	}
	for _, side := range sides {
		for _, a := range side.s.Atoms {
			ops := offline.NewExportedOps(a)
			fmt.Fprintf(w, "%s: run %q seq %d, head %s: %s, %s\n", side.name, a.Run, a.Seq, short(a.Head),
				plural(len(ops), "op"), plural(len(a.Actions), "action"))
			for _, op := range ops {
				fmt.Fprintf(w, "    %s\n", describeOp(op))
			}
			for _, act := range a.Actions {
				fmt.Fprintf(w, "    %s\n", describeAction(act))
			}
		}
	}
}

// seqRange names seqs from..to: "seq 4" or "seqs 4..7".
func seqRange(from, to uint64) string {
	if from == to {
		return fmt.Sprintf("seq %d", from)
	}
	return fmt.Sprintf("seqs %d..%d", from, to)
}

// describeAction writes one action on one line for people, its values
// cut as describeOp cuts them.
func describeAction(a engine.ActionInfo) string {
	var b strings.Builder
	idem := ""
	if a.Idempotent {
		idem = ", idempotent"
	}
	fmt.Fprintf(&b, "action #%d %s [%s%s] key %q", a.Index, a.Tool, a.StatusName(), idem, a.Key)
	if len(a.Result) > 0 {
		fmt.Fprintf(&b, " result=%q", clip(string(a.Result), 70))
	}
	if a.Err != "" {
		fmt.Fprintf(&b, " error=%q", clip(a.Err, 70))
	}
	return b.String()
}
