package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/continuumdb/continuum/internal/workload"
)

// SnapshotEvery is how often (in atoms) a run writes its whole state, for
// the stores that need application snapshots.
const SnapshotEvery = 50

// script holds the pregenerated steps of runs x atoms, so that the clock
// measures stores, not text generation. steps[r][i] is atom i+1 of run r.
type script struct {
	seed  int64
	atoms int
	steps [][]preStep
}

// preStep is a step without its state (the state belongs to one pass).
type preStep struct {
	atom                workload.Atom
	intent, cert, delta []byte
}

// intentRecord and certRecord are the JSON records written before and
// after the tool call.
type intentRecord struct {
	Run        string          `json:"run"`
	Seq        uint64          `json:"seq"`
	Tool       string          `json:"tool"`
	Key        string          `json:"key"`
	Idempotent bool            `json:"idempotent"`
	Args       json.RawMessage `json:"args"`
}

type certRecord struct {
	Run    string          `json:"run"`
	Seq    uint64          `json:"seq"`
	Key    string          `json:"key"`
	Result json.RawMessage `json:"result"`
}

// newScript generates runs x atoms steps of the workload under seed.
func newScript(runs, atoms int, seed int64) (*script, error) {
	if runs < 1 || atoms < 1 {
		return nil, fmt.Errorf("peers: script of %d runs x %d atoms: both must be >= 1", runs, atoms)
	}
	sc := &script{seed: seed, atoms: atoms, steps: make([][]preStep, runs)}
	for r := range sc.steps {
		run := workload.RunID(r)
		sc.steps[r] = make([]preStep, atoms)
		for i := range sc.steps[r] {
			a := workload.Script(run, uint64(i+1), seed)
			in, err := json.Marshal(intentRecord{a.Run, a.Seq, a.Tool, a.Key, a.Idempotent, a.Args})
			if err != nil {
				return nil, fmt.Errorf("peers: intent of %s seq %d: %w", run, a.Seq, err)
			}
			ce, err := json.Marshal(certRecord{a.Run, a.Seq, a.Key, a.Result})
			if err != nil {
				return nil, fmt.Errorf("peers: certificate of %s seq %d: %w", run, a.Seq, err)
			}
			d, err := workload.EncodeDelta(a)
			if err != nil {
				return nil, err
			}
			sc.steps[r][i] = preStep{atom: a, intent: in, cert: ce, delta: d}
		}
	}
	return sc, nil
}

// recordBytes is the size of the three records of every step of the first
// runs runs: the payload a store must make durable, before its overhead.
func (sc *script) recordBytes(runs int) int64 {
	var n int64
	for _, steps := range sc.steps[:runs] {
		for _, s := range steps {
			n += int64(len(s.intent) + len(s.cert) + len(s.delta))
		}
	}
	return n
}

// writeResult is what one pass of the workload against one store measured.
type writeResult struct {
	Atoms     int
	Elapsed   time.Duration
	Latencies []time.Duration // one per atom, sorted
	States    []*workload.State
}

// AtomsPerSec is the throughput of the pass.
func (w writeResult) AtomsPerSec() float64 {
	if w.Elapsed <= 0 {
		return 0
	}
	return float64(w.Atoms) / w.Elapsed.Seconds()
}

// percentile returns the q-quantile (0 < q <= 1) of sorted by the
// nearest-rank method; 0 for no samples.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

// runWorkload drives the first runs runs of sc against s, one goroutine
// per run, all started together, and returns what it measured and the
// final state of each run.
func runWorkload(ctx context.Context, s Store, sc *script, runs int) (writeResult, error) {
	if runs > len(sc.steps) {
		return writeResult{}, fmt.Errorf("peers: %d runs asked of a script of %d", runs, len(sc.steps))
	}
	lat := make([][]time.Duration, runs)
	states := make([]*workload.State, runs)
	errs := make([]error, runs)
	var start, wg sync.WaitGroup
	start.Add(1)
	for r := 0; r < runs; r++ {
		wg.Add(1)
		lat[r] = make([]time.Duration, 0, sc.atoms)
		states[r] = workload.NewState(workload.RunID(r))
		go func(r int) {
			defer wg.Done()
			start.Wait()
			errs[r] = driveRun(ctx, s, sc.steps[r], states[r], &lat[r])
		}(r)
	}
	t0 := time.Now()
	start.Done()
	wg.Wait()
	elapsed := time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return writeResult{}, err
	}
	res := writeResult{Atoms: runs * sc.atoms, Elapsed: elapsed, States: states}
	for _, l := range lat {
		res.Latencies = append(res.Latencies, l...)
	}
	sort.Slice(res.Latencies, func(i, j int) bool { return res.Latencies[i] < res.Latencies[j] })
	return res, nil
}

// driveRun does one run's atoms in order, as an agent would.
func driveRun(ctx context.Context, s Store, steps []preStep, st *workload.State, lat *[]time.Duration) error {
	for i := range steps {
		p := &steps[i]
		if err := st.Apply(p.atom); err != nil {
			return err
		}
		step := Step{Atom: p.atom, Intent: p.intent, Cert: p.cert, Delta: p.delta, State: st}
		t := time.Now()
		if err := s.Atom(ctx, &step); err != nil {
			return err
		}
		if p.atom.Seq%SnapshotEvery == 0 {
			if err := s.Snapshot(ctx, p.atom.Run, p.atom.Seq, st); err != nil {
				return err
			}
		}
		*lat = append(*lat, time.Since(t))
	}
	return nil
}

// restoreResult is what a restart measured.
type restoreResult struct {
	Open       time.Duration // opening the store
	RestoreOne time.Duration // restoring run 0 right after the open
	RestoreAll time.Duration // then restoring every run, one after another
}

// Restart is open + restore of one run: what an agent waits for after a
// crash before it can take its next step.
func (r restoreResult) Restart() time.Duration { return r.Open + r.RestoreOne }

// measureRestore reopens the store in dir and restores run 0, then all
// runs, checking each restored state against want (the states the
// workload pass ended with). all=false skips the all-runs restore.
func measureRestore(ctx context.Context, p peer, dir string, want []*workload.State, all bool) (restoreResult, error) {
	var res restoreResult
	t := time.Now()
	s, err := p.open(dir, Options{})
	if err != nil {
		return res, err
	}
	res.Open = time.Since(t)
	res, err = restoreFrom(ctx, p.name, s, res, want, all)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return res, err
}

// restoreFrom does the restores of measureRestore on an open store.
func restoreFrom(ctx context.Context, name string, s Store, res restoreResult, want []*workload.State, all bool) (restoreResult, error) {
	t := time.Now()
	got, err := s.Restore(ctx, want[0].Run)
	if err != nil {
		return res, err
	}
	res.RestoreOne = time.Since(t)
	if err := sameState(name, want[0], got); err != nil {
		return res, err
	}
	if !all {
		return res, nil
	}
	t = time.Now()
	restored := make([]*workload.State, len(want))
	for i, w := range want {
		if restored[i], err = s.Restore(ctx, w.Run); err != nil {
			return res, err
		}
	}
	res.RestoreAll = time.Since(t)
	for i, w := range want {
		if err := sameState(name, w, restored[i]); err != nil {
			return res, err
		}
	}
	return res, nil
}

// sameState checks that a restored state is the one the workload wrote. It
// compares the encoded forms, which are deterministic.
func sameState(store string, want, got *workload.State) error {
	if got.Seq != want.Seq || got.Run != want.Run {
		return fmt.Errorf("peers: %s restored run %q at seq %d, want run %q at seq %d", store, got.Run, got.Seq, want.Run, want.Seq)
	}
	wb, err := want.Encode()
	if err != nil {
		return err
	}
	gb, err := got.Encode()
	if err != nil {
		return err
	}
	if string(wb) != string(gb) {
		return fmt.Errorf("peers: %s restored run %q at seq %d with a different state (%d bytes, want %d)", store, got.Run, got.Seq, len(gb), len(wb))
	}
	return nil
}

// dirBytes is the total size of the files under dir.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

// sample is one measured configuration (one store, one R, one rep).
type sample struct {
	Store        string
	Runs, Atoms  int
	AtomsPerSec  float64
	P50, P99     time.Duration
	BytesPerAtom float64 // growth over an empty store, per atom
	EmptyBytes   int64   // an empty store's files (fixed costs, preallocation)
	Restore      restoreResult
	Reopened     map[string]int64 // bytes per entry of the store's directory after the restore
}

// emptyBytes returns the size of a store that was opened and closed with
// nothing written: fixed files and preallocated space, which bytes per
// atom must not be charged with.
func emptyBytes(p peer, base string) (int64, error) {
	dir, err := os.MkdirTemp(base, p.name+"-empty-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	s, err := p.open(dir, Options{})
	if err != nil {
		return 0, err
	}
	if err := s.Close(); err != nil {
		return 0, err
	}
	return dirBytes(dir)
}

// measureConfig runs one configuration in a fresh directory under base,
// and removes the directory afterwards.
func measureConfig(ctx context.Context, p peer, base string, sc *script, runs int) (sample, error) {
	smp := sample{Store: p.name, Runs: runs, Atoms: sc.atoms}
	var err error
	if smp.EmptyBytes, err = emptyBytes(p, base); err != nil {
		return smp, err
	}
	dir, err := os.MkdirTemp(base, p.name+"-")
	if err != nil {
		return smp, err
	}
	defer os.RemoveAll(dir)
	s, err := p.open(dir, Options{})
	if err != nil {
		return smp, err
	}
	w, err := runWorkload(ctx, s, sc, runs)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return smp, err
	}
	smp.AtomsPerSec = w.AtomsPerSec()
	smp.P50 = percentile(w.Latencies, 0.50)
	smp.P99 = percentile(w.Latencies, 0.99)
	size, err := dirBytes(dir)
	if err != nil {
		return smp, err
	}
	smp.BytesPerAtom = float64(size-smp.EmptyBytes) / float64(w.Atoms)
	if smp.Restore, err = measureRestore(ctx, p, dir, w.States, true); err != nil {
		return smp, err
	}
	smp.Reopened, err = entryBytes(dir)
	return smp, err
}

// entryBytes is the size of each entry of dir (a file, or a directory's
// files), after the store was reopened and closed: where its bytes lie.
func entryBytes(dir string) (map[string]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	m := make(map[string]int64, len(ents))
	for _, e := range ents {
		n, err := dirBytes(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		m[e.Name()] = n
	}
	return m, nil
}

// historyWrite estimates the bytes a store writes to build a history of
// runs x atoms: linear stores write about the records; quadratic ones
// write the whole state at every atom.
func historyWrite(p peer, runs, atoms int, bytesPerStateAtom float64) float64 {
	if !p.quadratic {
		return float64(runs) * float64(atoms) * bytesPerStateAtom * 2
	}
	return float64(runs) * bytesPerStateAtom * float64(atoms) * float64(atoms+1) / 2
}

// measureHistory builds a history of runs x atoms with syncs off, then
// measures a restart with syncs on.
func measureHistory(ctx context.Context, p peer, base string, sc *script, runs int) (restoreResult, error) {
	dir, err := os.MkdirTemp(base, p.name+"-hist-")
	if err != nil {
		return restoreResult{}, err
	}
	defer os.RemoveAll(dir)
	s, err := p.open(dir, Options{NoSync: true})
	if err != nil {
		return restoreResult{}, err
	}
	w, err := runWorkload(ctx, s, sc, runs)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return restoreResult{}, err
	}
	return measureRestore(ctx, p, dir, w.States, false)
}
