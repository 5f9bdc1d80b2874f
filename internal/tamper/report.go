package tamper

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// tally counts outcomes by class.
type tally struct {
	scenarios                              int
	detected, harmless, missed, panic, hng int
	plainToo                               int // detected ones that plain verify (no --deep) detected too
	saidSo                                 int // harmless ones the engine reported (log or Stats)
}

func (t *tally) add(o Outcome) {
	t.scenarios++
	switch o.Class {
	case Detected:
		t.detected++
		if o.Plain {
			t.plainToo++
		}
	case Harmless:
		t.harmless++
		if o.Said {
			t.saidSo++
		}
	case Missed:
		t.missed++
	case Panic:
		t.panic++
	case Hang:
		t.hng++
	}
}

// WriteReport writes the result as Markdown: the seed and command, a table
// per file kind and one per damage, then every failed scenario with why.
// "plain verify too" counts the detected scenarios that verify without
// --deep detected as well; "engine said so" the harmless ones where the
// engine logged a warning or error or set a background error in Stats
// (requirement: a rebuilt derived file is reported, never silent).
func (r *Result) WriteReport(w io.Writer) error {
	var b strings.Builder
	var total tally
	byKind, byDamage := map[string]*tally{}, map[Damage]*tally{}
	for _, o := range r.Outcomes {
		total.add(o)
		if byKind[o.Scenario.Kind] == nil {
			byKind[o.Scenario.Kind] = &tally{}
		}
		byKind[o.Scenario.Kind].add(o)
		if byDamage[o.Scenario.Damage] == nil {
			byDamage[o.Scenario.Damage] = &tally{}
		}
		byDamage[o.Scenario.Damage].add(o)
	}
	verdict := "PASS"
	if total.missed+total.panic+total.hng > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "tamper suite: %s: seed %d, %d scenarios (of %d planned) on %d files, %v\n",
		verdict, r.Seed, total.scenarios, r.Planned, r.files(), r.Elapsed.Round(1e7))
	if r.Command != "" {
		fmt.Fprintf(&b, "command: `%s`\n", r.Command)
	}
	if len(r.Outcomes) > 0 {
		secs := make([]float64, 0, len(r.Outcomes))
		for _, o := range r.Outcomes {
			secs = append(secs, o.Seconds)
		}
		slices.Sort(secs)
		fmt.Fprintf(&b, "oracle time per scenario: median %.2fs, p99 %.2fs, max %.2fs (deadline %v)\n",
			secs[len(secs)/2], secs[len(secs)*99/100], secs[len(secs)-1], r.Deadline)
	}
	fmt.Fprintf(&b, "\n")
	table := func(head string, rows []string, get func(string) *tally) {
		fmt.Fprintf(&b, "| %s | scenarios | detected | (plain verify too) | harmless | (engine said so) | missed | panic | hang |\n", head)
		fmt.Fprintf(&b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, k := range append(rows, "total") {
			t := &total
			if k != "total" {
				t = get(k)
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d |\n", k, t.scenarios, t.detected, t.plainToo,
				t.harmless, t.saidSo, t.missed, t.panic, t.hng)
		}
		fmt.Fprintf(&b, "\n")
	}
	kinds := sortedKeys(byKind)
	table("file kind", kinds, func(k string) *tally { return byKind[k] })
	var damages []string
	for d := range byDamage {
		damages = append(damages, string(d))
	}
	slices.Sort(damages)
	table("damage", damages, func(k string) *tally { return byDamage[Damage(k)] })

	failed := r.Failed()
	if len(failed) > 0 {
		// Groups first: file kind, damage and short reason, with a count
		// and the first example.
		type group struct {
			key   string
			n     int
			first Outcome
		}
		var groups []*group
		byKey := map[string]*group{}
		for _, o := range failed {
			k := fmt.Sprintf("%s | %s | %s | %s", o.Class, o.Scenario.Kind, o.Scenario.Damage, o.Tag)
			g := byKey[k]
			if g == nil {
				g = &group{key: k, first: o}
				byKey[k] = g
				groups = append(groups, g)
			}
			g.n++
		}
		slices.SortFunc(groups, func(a, b *group) int { return strings.Compare(a.key, b.key) })
		fmt.Fprintf(&b, "Failures by file kind, damage and reason:\n\n")
		fmt.Fprintf(&b, "| class | file kind | damage | reason | count | example |\n| --- | --- | --- | --- | ---: | --- |\n")
		for _, g := range groups {
			fmt.Fprintf(&b, "| %s | %d | %s |\n", g.key, g.n, g.first.Scenario.Name)
		}
		fmt.Fprintf(&b, "\n")
		fmt.Fprintf(&b, "Failed scenarios (%d):\n\n", len(failed))
		tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
		for _, o := range failed {
			fmt.Fprintf(tw, "- %s\t%s\t%s\n", o.Class, o.Scenario.Name, o.Why)
		}
		tw.Flush()
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// files counts the distinct files the outcomes damaged.
func (r *Result) files() int {
	seen := map[string]bool{}
	for _, o := range r.Outcomes {
		seen[o.Scenario.File] = true
	}
	return len(seen)
}
