package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// report gathers every sample of one invocation and renders it.
type report struct {
	When           time.Time
	Command        string
	Machine        string
	Dir            string
	Atoms, Reps    int
	HRuns          int
	PayloadPerAtom float64 // bytes of intent+certificate+delta per atom
	Stores         []string
	Samples        []sample
	History        []histSample
	Skipped        []skipped
}

type histSample struct {
	Store   string
	Atoms   int
	Restore restoreResult
}

type skipped struct {
	Store   string
	History int
	Bytes   float64
}

// row is the median of the samples of one store at one R.
type row struct {
	store                     string
	runs                      int
	atomsPerSec, p50, p99     float64 // p50 and p99 in ms
	bytesPerAtom              float64
	emptyKiB                  float64
	open, restoreOne, restAll float64 // ms
	n                         int
}

// rows returns the median rows in store order, then R order.
func (r *report) rows() []row {
	var out []row
	for _, s := range r.Stores {
		for _, R := range r.runsMeasured() {
			var tput, p50, p99, bpa, empty, open, one, all []float64
			for _, m := range r.Samples {
				if m.Store != s || m.Runs != R {
					continue
				}
				tput = append(tput, m.AtomsPerSec)
				p50 = append(p50, ms(m.P50))
				p99 = append(p99, ms(m.P99))
				bpa = append(bpa, m.BytesPerAtom)
				empty = append(empty, float64(m.EmptyBytes)/1024)
				open = append(open, ms(m.Restore.Open))
				one = append(one, ms(m.Restore.RestoreOne))
				all = append(all, ms(m.Restore.RestoreAll))
			}
			if len(tput) == 0 {
				continue
			}
			out = append(out, row{s, R, median(tput), median(p50), median(p99), median(bpa), median(empty),
				median(open), median(one), median(all), len(tput)})
		}
	}
	return out
}

// runsMeasured returns the distinct Rs of the samples, ascending.
func (r *report) runsMeasured() []int {
	seen := map[int]bool{}
	var out []int
	for _, m := range r.Samples {
		if !seen[m.Runs] {
			seen[m.Runs] = true
			out = append(out, m.Runs)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// historyMeasured returns the distinct history sizes, ascending.
func (r *report) historyMeasured() []int {
	seen := map[int]bool{}
	var out []int
	for _, h := range r.History {
		if !seen[h.Atoms] {
			seen[h.Atoms] = true
			out = append(out, h.Atoms)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// histMedian returns the median open, restore and restart (ms) of one
// store at one history size, and how many samples there were.
func (r *report) histMedian(store string, atoms int) (open, restore, restart float64, n int) {
	var o, re, rs []float64
	for _, h := range r.History {
		if h.Store == store && h.Atoms == atoms {
			o = append(o, ms(h.Restore.Open))
			re = append(re, ms(h.Restore.RestoreOne))
			rs = append(rs, ms(h.Restore.Restart()))
		}
	}
	return median(o), median(re), median(rs), len(o)
}

// baseline is the store the ratio column compares with: Pebble used
// directly, the engine CONTINUUM is built on.
const baseline = "pebbledirect"

func (r *report) markdown(b *strings.Builder) {
	pf := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	pf("## Peer comparison, %s\n\n", r.When.Format("2006-01-02 15:04 UTC"))
	pf("- machine: %s\n", r.Machine)
	pf("- disk: stores created under `%s`\n", r.Dir)
	pf("- command (in `bench/peers`): `%s`\n", r.Command)
	pf("- every figure is the median of %s\n\n", reps(r.Reps))
	rows := r.rows()
	if len(rows) > 0 {
		pf("### Throughput, latency, size and restore: R runs x %d atoms\n\n", r.Atoms)
		pf("Each atom: intent, certificate and delta durable (payload %.0f B per atom), a whole-state snapshot every %d atoms. ", r.PayloadPerAtom, SnapshotEvery)
		pf("`vs %s` is the throughput ratio to Pebble used directly at the same R. ", baseline)
		pf("bytes/atom is the growth of the store's files over an empty store (whose size, fixed files and preallocated space, is `empty KiB`). ")
		pf("Restore times follow a fresh open.\n\n")
		pf("| store | R | atoms/s | vs %s | p50 ms | p99 ms | bytes/atom | empty KiB | open ms | restore 1 run ms | restore all runs ms |\n", baseline)
		pf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		base := map[int]float64{}
		for _, w := range rows {
			if w.store == baseline {
				base[w.runs] = w.atomsPerSec
			}
		}
		for _, w := range rows {
			ratio := "-"
			if b := base[w.runs]; b > 0 {
				ratio = fmt.Sprintf("%.2fx", w.atomsPerSec/b)
			}
			pf("| %s | %d | %.0f | %s | %.2f | %.2f | %.0f | %.0f | %.1f | %.2f | %.1f |\n",
				w.store, w.runs, w.atomsPerSec, ratio, w.p50, w.p99, w.bytesPerAtom, w.emptyKiB, w.open, w.restoreOne, w.restAll)
		}
		pf("\n")
	}
	if hs := r.historyMeasured(); len(hs) > 0 || len(r.Skipped) > 0 {
		pf("### Restart time against history size (%d run(s) of each size; histories built with syncs off)\n\n", r.HRuns)
		pf("restart = open + restore of one run, in ms.\n\n")
		pf("| store | atoms per run | open ms | restore ms | restart ms |\n")
		pf("| --- | ---: | ---: | ---: | ---: |\n")
		for _, s := range r.Stores {
			for _, h := range hs {
				open, restore, restart, n := r.histMedian(s, h)
				if n == 0 {
					continue
				}
				pf("| %s | %d | %.2f | %.2f | %.2f |\n", s, h, open, restore, restart)
			}
		}
		for _, sk := range r.Skipped {
			pf("| %s | %d | skipped: would write %.1f GiB | | |\n", sk.Store, sk.History, sk.Bytes/(1<<30))
		}
		pf("\n")
	}
}

// reps says how many repetitions a median is of.
func reps(n int) string {
	if n == 1 {
		return "1 repetition"
	}
	return fmt.Sprintf("%d repetitions", n)
}

// plots writes the SVG charts into dir and returns their paths.
func (r *report) plots(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	paths := plotPaths(dir)
	var rs []float64
	for _, R := range r.runsMeasured() {
		rs = append(rs, float64(R))
	}
	rows := r.rows()
	byStore := func(val func(row) float64) []series {
		var out []series
		for _, s := range r.Stores {
			se := series{Name: s}
			for _, w := range rows {
				if w.store == s {
					se.Points = append(se.Points, point{float64(w.runs), val(w)})
				}
			}
			if len(se.Points) > 0 {
				out = append(out, se)
			}
		}
		return out
	}
	sub := fmt.Sprintf(" (%d atoms per run, median of %s)", r.Atoms, reps(r.Reps))
	charts := []struct {
		path string
		c    chart
	}{
		{paths["throughput"], chart{Title: "Throughput against concurrency" + sub, XLabel: "concurrent runs R",
			YLabel: "atoms/s (log)", XLog: true, YLog: true, XTicks: rs,
			Series: byStore(func(w row) float64 { return w.atomsPerSec })}},
		{paths["p50"], chart{Title: "Atom latency p50" + sub, XLabel: "concurrent runs R",
			YLabel: "p50 ms (log)", XLog: true, YLog: true, XTicks: rs,
			Series: byStore(func(w row) float64 { return w.p50 })}},
		{paths["p99"], chart{Title: "Atom latency p99" + sub, XLabel: "concurrent runs R",
			YLabel: "p99 ms (log)", XLog: true, YLog: true, XTicks: rs,
			Series: byStore(func(w row) float64 { return w.p99 })}},
	}
	if hs := r.historyMeasured(); len(hs) > 0 {
		var xt []float64
		for _, h := range hs {
			xt = append(xt, float64(h))
		}
		var ss []series
		for _, s := range r.Stores {
			se := series{Name: s}
			for _, h := range hs {
				if _, _, restart, n := r.histMedian(s, h); n > 0 {
					se.Points = append(se.Points, point{float64(h), restart})
				}
			}
			if len(se.Points) > 0 {
				ss = append(ss, se)
			}
		}
		charts = append(charts, struct {
			path string
			c    chart
		}{paths["restart"], chart{Title: fmt.Sprintf("Restart (open + restore one run) against history, median of %s", reps(r.Reps)),
			XLabel: "atoms in the run (log)", YLabel: "restart ms (log)", XLog: true, YLog: true, XTicks: xt, Series: ss}})
	}
	var written []string
	for _, ch := range charts {
		if len(r.Samples) == 0 && ch.path != paths["restart"] {
			continue
		}
		f, err := os.Create(ch.path)
		if err != nil {
			return written, err
		}
		err = ch.c.Write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return written, fmt.Errorf("write %s: %w", ch.path, err)
		}
		written = append(written, ch.path)
	}
	return written, nil
}
