package main

import (
	"strings"
	"testing"

	"github.com/continuumdb/continuum/engine"
)

// TestLineageTree draws the lineages of synthetic run summaries (no store
// can hold a fork until the engine writes fork records): forks under their
// parents by fork point, forks of forks deeper, runs without forks left
// out, a fork whose parent is gone as a root that says so, and forks that
// name each other as parents on a line of their own.
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
