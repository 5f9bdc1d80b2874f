package tamper

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// Class is the verdict on one scenario.
type Class string

const (
	Detected Class = "DETECTED"
	Harmless Class = "HARMLESS"
	Missed   Class = "MISSED"
	Panic    Class = "PANIC"
	Hang     Class = "HANG"
)

// Failed reports whether c fails the suite.
func (c Class) Failed() bool { return c == Missed || c == Panic || c == Hang }

// Diff is one answer that differs from the pristine store's.
type Diff struct {
	Where string `json:"where"`
	Want  string `json:"want"`
	Got   string `json:"got"`
	// Silent: the engine or a tool served a different answer, not an
	// error (or a refused Open wrote into the store).
	Silent bool `json:"silent"`
}

func (d Diff) String() string {
	return fmt.Sprintf("%s: want %s, got %s", d.Where, clip(d.Want), clip(d.Got))
}

func clip(s string) string {
	if len(s) > 240 {
		return s[:240] + "..."
	}
	return s
}

// none stands for a missing entry of a list of answers.
const none = "(none)"

// compare lists how got differs from the pristine answers (want), engine
// and tools; verify verdicts are not answers.
func compare(want, got *Answers) []Diff {
	var out []Diff
	diff := func(where, w, g string) {
		if w != g {
			// A missing list entry is not an answer: the difference that
			// shortened the list (LastSeq, Begin) is reported.
			silent := !strings.HasPrefix(g, errPrefix) && g != none
			out = append(out, Diff{Where: where, Want: w, Got: g, Silent: silent})
		}
	}
	list := func(where string, w, g []string) {
		for i := range max(len(w), len(g)) {
			ws, gs := none, none
			if i < len(w) {
				ws = w[i]
			}
			if i < len(g) {
				gs = g[i]
			}
			diff(fmt.Sprintf("%s[%d]", where, i), ws, gs)
		}
	}
	for i := range want.Rounds {
		w, g := &want.Rounds[i], &got.Rounds[i]
		p := fmt.Sprintf("open %d: ", i+1)
		diff(p+"Open", w.Open, g.Open)
		for _, wr := range g.Wrote {
			out = append(out, Diff{Where: p + "refused Open wrote", Want: "nothing", Got: wr, Silent: true})
		}
		if g.Open != "ok" {
			continue
		}
		diff(p+"Runs", w.Runs, g.Runs)
		diff(p+"Stats", w.Stats, g.Stats)
		diff(p+"continue the agent", w.Continue, g.Continue)
		for _, id := range sortedKeys(w.Run) {
			wr, gr := w.Run[id], g.Run[id]
			if gr == nil {
				continue // reported by Runs
			}
			q := fmt.Sprintf("%srun %s ", p, id)
			diff(q+"LastSeq", wr.LastSeq, gr.LastSeq)
			diff(q+"Head", wr.Head, gr.Head)
			diff(q+"Info", wr.Info, gr.Info)
			diff(q+"Interrupted", wr.Interrupted, gr.Interrupted)
			diff(q+"State", wr.State, gr.State)
			diff(q+"StateE", wr.StateE, gr.StateE)
			list(q+"StateAt", wr.StateAt, gr.StateAt)
			list(q+"Atom", wr.Atoms, gr.Atoms)
			diff(q+"Begin", wr.Begin, gr.Begin)
			if !strings.HasPrefix(gr.Begin, errPrefix) {
				list(q+"Do", wr.Do, gr.Do)
			}
		}
	}
	out = append(out, compareCLI(want, got)...)
	w, g := &want.Tools, &got.Tools
	diff("tools: Scan", w.Scan, g.Scan)
	diff("tools: Inspect", w.Inspect, g.Inspect)
	if g.Inspect == "ok" {
		diff("tools: Stats", w.Stats, g.Stats)
		for _, id := range sortedKeys(w.Runs) {
			wr, gr := w.Runs[id], g.Runs[id]
			if gr == nil {
				diff("tools: run "+id, "present", "absent")
				continue
			}
			diff("tools: run "+id+" summary", wr.Summary, gr.Summary)
			list("tools: run "+id+" Atom", wr.Atoms, gr.Atoms)
			list("tools: run "+id+" StateAt", wr.StateAt, gr.StateAt)
		}
		for _, id := range sortedKeys(g.Runs) {
			if w.Runs[id] == nil {
				diff("tools: run "+id, "absent", "present")
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Outcome is a scenario's verdict and why.
type Outcome struct {
	Scenario Scenario `json:"scenario"`
	Class    Class    `json:"class"`
	// Tag is the short reason of a failed verdict (the group it is
	// reported in); Why is the long one.
	Tag   string `json:"tag,omitempty"`
	Why   string `json:"why,omitempty"`
	Diffs []Diff `json:"diffs,omitempty"`
	// Plain and Deep say whether each verify detected the damage; Said
	// whether the engine said something was wrong (a warning or error in
	// its log, or a background error in Stats), whatever it answered.
	Plain   bool    `json:"verify_plain"`
	Deep    bool    `json:"verify_deep"`
	Said    bool    `json:"engine_said_so"`
	Seconds float64 `json:"seconds"`
}

// classify decides a scenario from the child's run and answers (with
// missing set if it wrote none).
func classify(sc *Scenario, want *Answers, cr childRun, got *Answers) Outcome {
	o := Outcome{Scenario: *sc, Seconds: cr.Elapsed.Seconds()}
	switch {
	case cr.TimedOut:
		o.Class, o.Tag, o.Why = Hang, "oracle hung", fmt.Sprintf("the oracle missed its deadline after %v", cr.Elapsed.Round(1e6))
		return o
	case cr.Panicked:
		o.Class, o.Tag, o.Why = Panic, "oracle panicked", firstLines(cr.Stderr, 12)
		return o
	}
	if c, why := cliFailure(got); c != "" {
		o.Class, o.Tag, o.Why = c, "continuumctl "+strings.ToLower(string(c)), why
		return o
	}
	if got.missing {
		o.Class, o.Tag, o.Why = Missed, "oracle died", fmt.Sprintf("the oracle exited with status %d and no answer: %s", cr.ExitCode, firstLines(cr.Stderr, 6))
		return o
	}
	o.Diffs = compare(want, got)
	o.Plain, o.Deep = got.VerifyPlain.Detected(), got.VerifyDeep.Detected()
	o.Said = len(got.Log) > 0
	for _, r := range got.Rounds {
		o.Said = o.Said || r.Background != ""
	}
	silent := 0
	for _, d := range o.Diffs {
		if d.Silent {
			silent++
		}
	}
	var named bool
	var unnamed, unnamedTag string
	for _, v := range []VerifyAnswer{got.VerifyDeep, got.VerifyPlain} {
		if !v.Detected() {
			continue
		}
		ok, tag, why := names(sc, v)
		if ok {
			named = true
			break
		}
		unnamed, unnamedTag = why, tag
	}
	detected := o.Plain || o.Deep
	switch {
	case detected && named && silent == 0:
		o.Class = Detected
	case len(o.Diffs) == 0:
		o.Class = Harmless
	case !detected:
		o.Class, o.Tag, o.Why = Missed, "verify passed, engine read differently", "verify passed (plain and --deep), but "+summarize(silentFirst(o.Diffs))
		if toolsOnly(o.Diffs) {
			o.Tag = "verify passed, the tools read differently"
		}
	case silent > 0:
		o.Class, o.Tag, o.Why = Missed, "wrong answer served without an error", "verify detected it, but the engine or a tool answered wrong without an error: "+summarize(silentFirst(o.Diffs))
	default:
		o.Class, o.Tag, o.Why = Missed, unnamedTag, unnamed+"; and "+summarize(o.Diffs)
	}
	return o
}

// names reports whether a verdict names the scenario's file and, when the
// damage reaches log records, one reached run and its first reached seq.
func names(sc *Scenario, v VerifyAnswer) (ok bool, tag, why string) {
	text := v.Text()
	base := path.Base(sc.File)
	if !strings.Contains(text, sc.File) && !strings.Contains(text, base) {
		return false, "verify did not name the file", fmt.Sprintf("verify detected it but did not name %s (it said: %s)", sc.File, firstLines(text, 3))
	}
	if len(sc.Reach) == 0 {
		return true, "", ""
	}
	for _, f := range v.Failures {
		for _, rs := range sc.Reach {
			if f.RunID == rs.Run && (f.Seq == rs.Seq || (rs.Seq == 0 && f.Seq == 1)) {
				return true, "", ""
			}
			// A chain checkpoint record signs the run's head at its seq:
			// losing it leaves the atoms it covered unsigned, which verify
			// reports from the first of them.
			if rs.Kind == "checkpoint" && f.RunID == rs.Run && f.Seq >= 1 && f.Seq <= rs.Seq {
				return true, "", ""
			}
		}
	}
	var want []string
	for _, rs := range sc.Reach {
		want = append(want, fmt.Sprintf("run %s seq %d (%s record)", rs.Run, rs.Seq, rs.Kind))
	}
	return false, "verify did not name the run and seq", fmt.Sprintf("verify named %s but not the first damaged record (%s) (it said: %s)",
		base, strings.Join(want, " or "), firstLines(text, 3))
}

// toolsOnly reports whether only the read-only tools' answers differ.
func toolsOnly(ds []Diff) bool {
	for _, d := range ds {
		if !strings.HasPrefix(d.Where, "tools: ") {
			return false
		}
	}
	return true
}

// silentFirst orders the silent differences first, keeping the order
// within each group.
func silentFirst(ds []Diff) []Diff {
	out := make([]Diff, 0, len(ds))
	for _, d := range ds {
		if d.Silent {
			out = append(out, d)
		}
	}
	for _, d := range ds {
		if !d.Silent {
			out = append(out, d)
		}
	}
	return out
}

// summarize describes the first differences.
func summarize(ds []Diff) string {
	const show = 3
	var parts []string
	for i, d := range ds {
		if i == show {
			parts = append(parts, fmt.Sprintf("and %d more", len(ds)-show))
			break
		}
		parts = append(parts, d.String())
	}
	return fmt.Sprintf("%d answers differ: %s", len(ds), strings.Join(parts, "; "))
}

func firstLines(s string, n int) string {
	s = strings.TrimSpace(s)
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, " | ")
}
