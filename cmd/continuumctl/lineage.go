package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/continuumdb/continuum/engine"
)

// lineageTree draws the lineages of runs that have forks, one line per
// run, for inspect: each run that was forked from no other and has forks,
// with its forks under it, forks of forks under those, in the order of
// their fork points. Runs that neither fork nor were forked are left out
// (the runs table lists them). A fork whose parent is not among runs is
// drawn as a root that says so, and forks whose records name each other
// as parents (no root above them) are listed on a line of their own: the
// store is damaged there, and verify says how.
func lineageTree(runs []engine.RunSummary) []string {
	byID := make(map[string]engine.RunSummary, len(runs))
	children := map[string][]engine.RunSummary{}
	for _, r := range runs {
		byID[r.ID] = r
		if r.Parent != "" {
			children[r.Parent] = append(children[r.Parent], r)
		}
	}
	if len(children) == 0 {
		return nil
	}
	for _, cs := range children {
		sort.Slice(cs, func(i, j int) bool {
			if cs[i].ForkedAt != cs[j].ForkedAt {
				return cs[i].ForkedAt < cs[j].ForkedAt
			}
			return cs[i].ID < cs[j].ID
		})
	}
	var lines []string
	drawn := map[string]bool{}
	var draw func(r engine.RunSummary, prefix string)
	draw = func(r engine.RunSummary, prefix string) {
		drawn[r.ID] = true
		cs := children[r.ID]
		for i, c := range cs {
			branch, next := "├── ", "│   "
			if i == len(cs)-1 {
				branch, next = "└── ", "    "
			}
			lines = append(lines, prefix+branch+fmt.Sprintf("%s: forked at seq %d, %s", c.ID, c.ForkedAt, nodeWords(c)))
			draw(c, prefix+next) // once: a run has one parent, and no cycle reaches a root
		}
	}
	for _, r := range runs { // sorted by id
		_, parentHere := byID[r.Parent]
		switch {
		case r.Parent == "" && len(children[r.ID]) > 0:
			lines = append(lines, fmt.Sprintf("%s: %s", r.ID, nodeWords(r)))
		case r.Parent != "" && !parentHere:
			lines = append(lines, fmt.Sprintf("%s: forked at seq %d from run %q, which the store does not have, %s",
				r.ID, r.ForkedAt, r.Parent, nodeWords(r)))
		default:
			continue
		}
		draw(r, "")
	}
	var cycle []string
	for _, r := range runs {
		if r.Parent != "" && !drawn[r.ID] {
			cycle = append(cycle, fmt.Sprintf("%s (forked from %s at seq %d)", r.ID, r.Parent, r.ForkedAt))
		}
	}
	if len(cycle) > 0 {
		lines = append(lines, "forks with no root (their fork records name each other): "+strings.Join(cycle, ", "))
	}
	return lines
}

// nodeWords describes a run in the lineage tree: its last seq and status.
func nodeWords(r engine.RunSummary) string {
	return fmt.Sprintf("last seq %d, %s", lastSeq(r), r.Status)
}
