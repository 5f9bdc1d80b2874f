package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/internal/workload"
	"github.com/google/go-cmp/cmp"
)

// testOptions syncs only in long mode: what is tested here is what the
// stores give back, which does not depend on fsync; -short keeps the
// suite fast on a busy disk.
func testOptions() Options { return Options{NoSync: testing.Short()} }

// TestStoresRestore writes a few runs through every registered store,
// reopens it, and checks that each run restores to exactly the state the
// workload built, across snapshots (at 50 and 100) and the deltas after.
func TestStoresRestore(t *testing.T) {
	runs, atoms := 3, 120
	if testing.Short() {
		runs, atoms = 2, 55 // still one snapshot (at 50) and deltas after it
	}
	sc, err := newScript(runs, atoms, 5)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, p := range registry {
		t.Run(p.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := p.open(dir, testOptions())
			if err != nil {
				t.Fatal(err)
			}
			w, err := runWorkload(ctx, s, sc, runs)
			if err != nil {
				t.Fatal(err)
			}
			if w.Atoms != runs*atoms || len(w.Latencies) != runs*atoms {
				t.Errorf("pass counted %d atoms and %d latencies, want %d", w.Atoms, len(w.Latencies), runs*atoms)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = p.open(dir, testOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for _, want := range w.States {
				got, err := s.Restore(ctx, want.Run)
				if err != nil {
					t.Fatal(err)
				}
				if err := sameState(p.name, want, got); err != nil {
					t.Fatalf("%v (-want +got):\n%s", err, cmp.Diff(want, got))
				}
			}
			if _, err := s.Restore(ctx, workload.RunID(runs)); !errors.Is(err, errNoRun) {
				t.Errorf("restore of a run never written: error = %v, want errNoRun", err)
			}
		})
	}
}

// TestMeasureConfig runs the whole measurement of one configuration for
// every store and checks that what it reports is plausible: positive
// throughput, ordered percentiles, bytes on disk at least the payload.
func TestMeasureConfig(t *testing.T) {
	const runs, atoms = 2, 60
	sc, err := newScript(runs, atoms, 9)
	if err != nil {
		t.Fatal(err)
	}
	payload := float64(sc.recordBytes(runs)) / (runs * atoms)
	for _, p := range registry {
		t.Run(p.name, func(t *testing.T) {
			if testing.Short() && p.name != "groupcommit" {
				t.Skip("synced writes of every store: long mode only")
			}
			base := t.TempDir()
			smp, err := measureConfig(context.Background(), p, base, sc, runs)
			if err != nil {
				t.Fatal(err)
			}
			if smp.AtomsPerSec <= 0 || smp.P50 <= 0 || smp.P99 < smp.P50 {
				t.Errorf("implausible sample: %+v", smp)
			}
			if smp.BytesPerAtom < payload*0.2 {
				t.Errorf("%.0f bytes on disk per atom for a %.0f-byte payload", smp.BytesPerAtom, payload)
			}
			if smp.Restore.RestoreOne <= 0 || smp.Restore.RestoreAll <= 0 {
				t.Errorf("restore times not measured: %+v", smp.Restore)
			}
			if left, _ := os.ReadDir(base); len(left) != 0 {
				t.Errorf("measureConfig left %d entries in %s", len(left), base)
			}
		})
	}
}

// TestHistoryWrite checks the projection that decides which restart sizes
// a whole-state-per-atom store skips.
func TestHistoryWrite(t *testing.T) {
	lin := peer{name: "lin"}
	quad := peer{name: "quad", quadratic: true}
	for _, tc := range []struct {
		p             peer
		runs, atoms   int
		perAtom, want float64
	}{
		{lin, 1, 100, 1000, 2e5},
		{quad, 1, 100, 1000, 1000 * 100 * 101 / 2},
		{quad, 2, 5000, 1000, 2 * 1000 * 5000 * 5001 / 2},
	} {
		if got := historyWrite(tc.p, tc.runs, tc.atoms, tc.perAtom); got != tc.want {
			t.Errorf("historyWrite(%s, %d, %d, %.0f) = %.0f, want %.0f", tc.p.name, tc.runs, tc.atoms, tc.perAtom, got, tc.want)
		}
	}
}

// gcFixture writes atoms of one run through a group-commit log and
// returns the log's path and the final state.
func gcFixture(t *testing.T, atoms int) (string, string, *workload.State) {
	t.Helper()
	dir := t.TempDir()
	sc, err := newScript(1, atoms, 3)
	if err != nil {
		t.Fatal(err)
	}
	s, err := openGroupCommit(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	w, err := runWorkload(context.Background(), s, sc, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, filepath.Join(dir, "log"), w.States[0]
}

// TestGroupCommitTornTail cuts the log at every length inside its last
// records: the restore must give the state of the last whole delta, never
// an error (a torn tail is expected after a crash).
func TestGroupCommitTornTail(t *testing.T) {
	dir, path, want := gcFixture(t, 55)
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The last atom (seq 55) is three records; cutting anywhere inside its
	// delta leaves seq 54.
	var lastDelta int64
	if err := scanGC(path, full, func(r gcRecord) error {
		if r.kind == gcDelta {
			lastDelta = r.off
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for cut := lastDelta; cut < int64(len(full)); cut += 97 {
		if err := os.WriteFile(path, full[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := openGroupCommit(dir, Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Restore(context.Background(), want.Run)
		s.Close()
		if err != nil {
			t.Fatalf("cut at %d of %d: %v", cut, len(full), err)
		}
		if got.Seq != want.Seq-1 {
			t.Fatalf("cut at %d of %d: restored seq %d, want %d", cut, len(full), got.Seq, want.Seq-1)
		}
	}
}

// TestGroupCommitCorruption flips one byte in the middle of the log: the
// open must fail with errCorrupt naming the offset, not skip the record.
func TestGroupCommitCorruption(t *testing.T) {
	dir, path, want := gcFixture(t, 20)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var target int64 = -1
	if err := scanGC(path, data, func(r gcRecord) error {
		if r.kind == gcDelta && r.seq == 10 {
			target = r.off
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if target < 0 {
		t.Fatal("no delta of seq 10 in the log")
	}
	data[target+gcHeader+20] ^= 0x40
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// Open indexes the whole log, so it is Open that finds the damage.
	s, err := openGroupCommit(dir, Options{NoSync: true})
	if err == nil {
		_, err = s.Restore(context.Background(), want.Run)
		s.Close()
	}
	if !errors.Is(err, errCorrupt) || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("open of a corrupt log: error = %v, want errCorrupt with an offset", err)
	}
}

func TestGroupCommitClosed(t *testing.T) {
	s, err := openGroupCommit(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	a := workload.Script("r", 1, 1)
	if err := s.Atom(context.Background(), &Step{Atom: a}); !errors.Is(err, errGCClosed) {
		t.Errorf("Atom after Close: error = %v, want errGCClosed", err)
	}
	if err := s.Close(); !errors.Is(err, errGCClosed) {
		t.Errorf("second Close: error = %v, want errGCClosed", err)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var out []time.Duration
		for _, v := range n {
			out = append(out, time.Duration(v)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 0.50, 50 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p100", ms(1, 2, 3), 1, 3 * time.Millisecond},
		{"tiny q", ms(1, 2, 3), 0.0001, 1 * time.Millisecond},
		{"p50 of 4", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
	} {
		if got := percentile(tc.sorted, tc.q); got != tc.want {
			t.Errorf("%s: percentile = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := append([]float64(nil), tc.in...)
		if got := median(in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !cmp.Equal(in, tc.in) && len(in) > 0 {
			t.Errorf("median reordered its input: %v", in)
		}
	}
}

// svgSummary parses an SVG document and counts what the tests look at.
type svgSummary struct {
	series  []string
	circles int
	lines   int
	texts   []string
}

func parseSVG(t *testing.T, b []byte) svgSummary {
	t.Helper()
	var s svgSummary
	d := xml.NewDecoder(bytes.NewReader(b))
	inText := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, b)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			switch tok.Name.Local {
			case "g":
				for _, a := range tok.Attr {
					if a.Name.Local == "data-name" {
						s.series = append(s.series, a.Value)
					}
				}
			case "circle":
				s.circles++
			case "polyline":
				s.lines++
			case "text":
				inText = true
			}
		case xml.EndElement:
			if tok.Name.Local == "text" {
				inText = false
			}
		case xml.CharData:
			if inText {
				s.texts = append(s.texts, string(tok))
			}
		}
	}
	return s
}

func TestChartWrite(t *testing.T) {
	for _, tc := range []struct {
		name        string
		c           chart
		wantSeries  []string
		wantLines   int
		wantCircles int // data markers + one legend marker per series
		wantText    []string
	}{
		{
			name: "log-log with skipped points",
			c: chart{Title: "T <&>", XLabel: "R", YLabel: "atoms/s", XLog: true, YLog: true, XTicks: []float64{1, 16, 64},
				Series: []series{
					{Name: "a&b", Points: []point{{1, 100}, {16, 1000}, {64, 5000}}},
					{Name: "zero", Points: []point{{1, 0}, {16, math.NaN()}, {64, 30}}},
				}},
			wantSeries: []string{"a&b", "zero"}, wantLines: 1, wantCircles: 3 + 1 + 2,
			wantText: []string{"T <&>", "16", "64", "1k", "a&b"},
		},
		{
			name: "linear",
			c: chart{Title: "lin", XLabel: "x", YLabel: "y",
				Series: []series{{Name: "s", Points: []point{{0, 0}, {10, 2.5}, {20, 7}}}}},
			wantSeries: []string{"s"}, wantLines: 1, wantCircles: 3 + 1,
			wantText: []string{"lin", "0", "10", "20"},
		},
		{
			name:       "no data",
			c:          chart{Title: "empty", XLog: true, YLog: true},
			wantSeries: nil, wantText: []string{"no data"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.c.Write(&b); err != nil {
				t.Fatal(err)
			}
			s := parseSVG(t, b.Bytes())
			if !cmp.Equal(s.series, tc.wantSeries) {
				t.Errorf("series %q, want %q", s.series, tc.wantSeries)
			}
			if s.lines != tc.wantLines || s.circles != tc.wantCircles {
				t.Errorf("%d polylines and %d circles, want %d and %d", s.lines, s.circles, tc.wantLines, tc.wantCircles)
			}
			all := strings.Join(s.texts, "\n")
			for _, w := range tc.wantText {
				if !strings.Contains(all, w) {
					t.Errorf("no text %q in the chart; texts: %q", w, s.texts)
				}
			}
			if strings.Contains(b.String(), "NaN") || strings.Contains(b.String(), "Inf") {
				t.Errorf("chart holds a NaN or Inf coordinate:\n%s", b.String())
			}
		})
	}
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		log    bool
		want   []float64
	}{
		{1, 1000, true, []float64{1, 10, 100, 1000}},
		{10, 100, true, []float64{10, 20, 50, 100}},
		{0, 10, false, []float64{0, 2, 4, 6, 8, 10}},
		{0, 1, false, []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}},
	} {
		if got := ticks(tc.lo, tc.hi, tc.log); !cmp.Equal(got, tc.want) {
			t.Errorf("ticks(%v, %v, %v) = %v, want %v", tc.lo, tc.hi, tc.log, got, tc.want)
		}
	}
}

func TestParseFlagsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-runs", "1,x"}, `"x" is not a positive integer`},
		{[]string{"-runs", "0"}, `"0" is not a positive integer`},
		{[]string{"-atoms", "0"}, "must be >= 1"},
		{[]string{"-stores", " , "}, "no store named"},
		{[]string{"-skip-write", "-history", ""}, "nothing to measure"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%q) error = %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	if _, err := lookup([]string{"groupcommit", "nosuchstore"}); err == nil || !strings.Contains(err.Error(), "nosuchstore") {
		t.Errorf("lookup of an unknown store: error = %v", err)
	}
}

// TestRunEndToEnd runs the command at toy size and checks its report and
// plots.
func TestRunEndToEnd(t *testing.T) {
	dir := t.TempDir()
	plots := filepath.Join(dir, "plots")
	md := filepath.Join(dir, "peers.md")
	var out, errOut bytes.Buffer
	args := []string{"-runs", "1,2", "-atoms", "6", "-reps", "1", "-history", "5,10", "-stores", "groupcommit,sqlitecheckpoint",
		"-dir", dir, "-plots", plots, "-md", md, "-maxwrite-mib", "1"}
	if err := run(args, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	for _, want := range []string{"| groupcommit | 1 |", "| groupcommit | 2 |", "| sqlitecheckpoint | 2 |", "| groupcommit | 10 |", "restart ms"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if b, err := os.ReadFile(md); err != nil || !bytes.Equal(b, out.Bytes()) {
		t.Errorf("-md file differs from stdout (err %v)", err)
	}
	for _, p := range plotPaths(plots) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if s := parseSVG(t, b); len(s.series) != 2 {
			t.Errorf("%s has series %q, want groupcommit and sqlitecheckpoint", p, s.series)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "continuum-peers-*")); len(left) != 0 {
		t.Errorf("run left its work directories: %q", left)
	}
}

// FuzzScanGC checks that no log image makes the group-commit scanner
// panic or report a record that overruns the image.
func FuzzScanGC(f *testing.F) {
	var seed []byte
	for seq := uint64(1); seq <= 3; seq++ {
		a := workload.Script("run-00000", seq, 1)
		d, err := workload.EncodeDelta(a)
		if err != nil {
			f.Fatal(err)
		}
		rec, err := encodeGC(gcDelta, a.Run, a.Seq, d)
		if err != nil {
			f.Fatal(err)
		}
		seed = append(seed, rec...)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-5])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = scanGC("fuzz", data, func(r gcRecord) error {
			if r.off < 0 || r.off+gcHeader+int64(len(r.body)) > int64(len(data)) {
				t.Fatalf("record at %d with a %d-byte body overruns %d bytes", r.off, len(r.body), len(data))
			}
			return nil
		})
	})
}

// TestTicksBadRange checks that ranges no axis can have give no ticks
// rather than an endless loop.
func TestTicksBadRange(t *testing.T) {
	for _, tc := range []struct{ lo, hi float64 }{
		{0, 1}, {-1, 10}, {5, 1}, {math.NaN(), 1}, {1, math.Inf(1)},
	} {
		if got := ticks(tc.lo, tc.hi, true); len(got) != 0 && tc.lo <= 0 {
			t.Errorf("log ticks(%v, %v) = %v, want none", tc.lo, tc.hi, got)
		}
		if got := ticks(tc.lo, tc.hi, false); len(got) > 4*maxTicks {
			t.Errorf("linear ticks(%v, %v) gave %d ticks", tc.lo, tc.hi, len(got))
		}
	}
}

// TestGroupCommitAppendAfterTornTail reopens a log with a torn tail, writes
// more atoms, and checks that a third open sees them all: the torn bytes
// must not be mistaken for records nor hide the new ones.
func TestGroupCommitAppendAfterTornTail(t *testing.T) {
	dir, path, want := gcFixture(t, 30)
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, full[:len(full)-7], 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := openGroupCommit(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Restore(context.Background(), want.Run)
	if err != nil {
		t.Fatal(err)
	}
	// The delta of seq 30 was torn: seq 30 is done again, then 31.
	for seq := got.Seq + 1; seq <= 31; seq++ {
		a := workload.Script(want.Run, seq, 3)
		if err := got.Apply(a); err != nil {
			t.Fatal(err)
		}
		d, err := workload.EncodeDelta(a)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Atom(context.Background(), &Step{Atom: a, Intent: []byte("{}"), Cert: []byte("{}"), Delta: d, State: got}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = openGroupCommit(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	again, err := s.Restore(context.Background(), want.Run)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameState("groupcommit", got, again); err != nil {
		t.Fatal(err)
	}
}
