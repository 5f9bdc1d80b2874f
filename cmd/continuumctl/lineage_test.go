package main

import (
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/offline"
)

// TestLineageTree draws the lineages of synthetic run summaries, so that
// what only a damaged store holds is drawn too (inspect_forked.golden has
// a real store's): forks under their parents by fork point, forks of forks
// deeper, runs without forks left out, a fork whose parent is gone as a
// root that says so, and forks that name each other as parents on a line
// of their own.
func TestLineageTree(t *testing.T) {
	run := func(id, parent string, at, last uint64, status string) engine.RunSummary {
		return engine.RunSummary{ID: id, Parent: parent, ForkedAt: at, LastSeq: last, Status: status}
	}
	if got := lineageTree([]engine.RunSummary{run("a", "", 0, 3, "active"), run("b", "", 0, 4, "completed")}); got != nil {
		t.Errorf("no forks: %q, want nothing", got)
	}
	runs := []engine.RunSummary{ // sorted by id, as Inspector.Runs returns them
		run("alpha", "", 0, 10, "completed"),
		run("alpha-retry", "alpha", 7, 9, "active"),
		run("alpha-retry-2", "alpha-retry", 8, 12, "failed"),
		run("alpha-zero", "alpha", 0, 0, "active"),
		run("c1", "c2", 1, 3, "active"),
		run("c2", "c1", 1, 3, "active"),
		run("lone", "", 0, 2, "active"),
		run("orphan", "gone", 2, 5, "cancelled"),
		run("orphan-child", "orphan", 3, 4, "active"),
		run("zeta", "", 0, 6, "active"),
		run("zeta-a", "zeta", 6, 6, "active"),
	}
	want := `alpha: last seq 10, completed
├── alpha-zero: forked at seq 0, last seq 0, active
└── alpha-retry: forked at seq 7, last seq 9, active
    └── alpha-retry-2: forked at seq 8, last seq 12, failed
orphan: forked at seq 2 from run "gone", which the store does not have, last seq 5, cancelled
└── orphan-child: forked at seq 3, last seq 4, active
zeta: last seq 6, active
└── zeta-a: forked at seq 6, last seq 6, active
forks with no root (their fork records name each other): c1 (forked from c2 at seq 1), c2 (forked from c1 at seq 1)`
	if got := strings.Join(lineageTree(runs), "\n"); got != want {
		t.Errorf("tree:\n%s\nwant:\n%s", got, want)
	}
}

// TestPrintDiffLineage pins the text of a diff across a fork of a fork,
// built by hand with values short enough to read (diff_fork.golden has a
// real store's): the base in the run that wrote it, each side's spans
// through the runs it passes, then each side's atoms with their ops and
// actions.
func TestPrintDiffLineage(t *testing.T) {
	atom := func(run string, seq uint64, d *frame.Delta, acts ...engine.ActionInfo) *engine.AtomInfo {
		return &engine.AtomInfo{Run: run, Seq: seq, Head: chain.Hash{byte(seq), 0xab}, Delta: d, Actions: acts}
	}
	d := &offline.Diff{
		Base:     offline.Point{Run: "r", Seq: 5},
		BaseHead: chain.Hash{0x12, 0x34},
		A: offline.DiffSide{Point: offline.Point{Run: "r", Seq: 6},
			Spans: []offline.Span{{Run: "r", From: 6, To: 6}},
			Atoms: []*engine.AtomInfo{atom("r", 6, new(frame.Delta).Set("plan", []byte("ship it")),
				engine.ActionInfo{Index: 0, Tool: "email.send", Key: "r/6/0", Status: ledger.StatusDone, Result: []byte(`{"sent":true}`)})}},
		B: offline.DiffSide{Point: offline.Point{Run: "f2", Seq: 8},
			Spans: []offline.Span{{Run: "f1", From: 6, To: 7}, {Run: "f2", From: 8, To: 8}},
			Atoms: []*engine.AtomInfo{
				atom("f1", 6, new(frame.Delta).Set("plan", []byte("wait for review"))),
				atom("f1", 7, new(frame.Delta).Delete("plan").AppendScratch([]byte("asked a human"))),
				atom("f2", 8, new(frame.Delta)),
			}},
	}
	var b strings.Builder
	printDiff(&b, "<store-id>", "$DIR", d)
	want := `store <store-id> at $DIR
base: run "r" seq 5, head 1234000000000000
a: run "r" seq 6: 1 atom since the base (run "r" seq 6), 1 op
b: run "f2" seq 8: 3 atoms since the base (run "f1" seqs 6..7, run "f2" seq 8), 3 ops
a: run "r" seq 6, head 06ab000000000000: 1 op, 1 action
    set key="plan" value="ship it"
    action #0 email.send [done] key "r/6/0" result="{\"sent\":true}"
b: run "f1" seq 6, head 06ab000000000000: 1 op, 0 actions
    set key="plan" value="wait for review"
b: run "f1" seq 7, head 07ab000000000000: 2 ops, 0 actions
    delete key="plan"
    append_scratch value="asked a human"
b: run "f2" seq 8, head 08ab000000000000: 0 ops, 0 actions
`
	if b.String() != want {
		t.Errorf("diff text:\n%s\nwant:\n%s", b.String(), want)
	}
}
