// Command waits measures CONTINUUM's waits and timers (engine/waits.go),
// each figure beside its baseline, in alternating rounds.
//
// Wake latency, in process: from DB.SendEvent's call to the host, blocked
// on DB.ReadyChanged, holding the run from DB.Ready; beside it, a
// message's latency from the sending atom's Commit to the receiver's
// Atom.Receive returning (the same single durable append). Both with
// fsync, on the -dir disk; p50 and p99 of -events samples per round.
//
// A store of -runs waiting runs (each asleep until a time of its own, in
// an order unlike their ids): heap in use and Open time, then the first
// DB.Ready (which loads the index of waits: WAITS and the log's tail, or
// the whole log), with nothing due, its wall time and the process's CPU
// time meanwhile (on a shared machine the steadier of the two; with
// -settle, after Open's background work is over), and the heap it kept
// per run (HeapAlloc after it less before it, two GCs each: the index's
// cost per waiting run); beside it the same runs without their waits. With -stores the two stores are kept and reused, so that
// two builds of the engine run in turn measure the same workload.
//
// Finding the due ones after a restart: with -due of the -runs sleeps
// past the clock (0 allowed), the first DB.Ready after Open (with
// -settle, once Open's background work is over) loads the index of
// waits, records the due ones' timeouts (wake records, in batches) and
// lists them, earliest first: its wall time, the process's CPU time
// meanwhile, and the CPU time of the thread that called it (its own
// work, without the background's nor the log writer's: the figure that
// should grow with the due runs, not the waiting ones); then the next
// Ready, with none due. -heap=false skips
// the restarts beside the idle runs (for runs at several -due).
//
// With -encrypt the big stores are encrypted at rest (a Keyring): WAITS
// is sealed per 4 KiB block, read with pread and each block opened on its
// first read (until 2026-12 it was sealed whole, and the index opened it
// whole into the heap), where a plaintext store's is mapped from its
// file. The big stores' runs are created by -workers goroutines at once:
// in an encrypted store each new run adds a data key and rewrites KEYS,
// and the runs created at once share a write (one at a time, 100,000
// runs cost 100,000 rewrites of a growing KEYS: hours).
//
// Usage:
//
//	go run ./bench/waits -dir /work/tmp-bench -runs 100000 -due 1000 -events 400 -rounds 3
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/seal"
)

var (
	dir      = flag.String("dir", os.TempDir(), "where the stores go")
	runs     = flag.Int("runs", 100000, "waiting runs in the big store")
	due      = flag.Int("due", 1000, "of them, due at the restart")
	events   = flag.Int("events", 400, "latency samples per round")
	rounds   = flag.Int("rounds", 3, "alternating rounds of each comparison")
	skip     = flag.Bool("nolatency", false, "skip the latency comparison")
	prof     = flag.String("cpuprofile", "", "write a CPU profile of the restarts of the big store to `file`")
	settle   = flag.Duration("settle", 0, "after each Open of the big stores, wait this long before the first Ready (Open's background work, the check of the run table, is then over)")
	heapRows = flag.Bool("heap", true, "measure the restarts beside the idle runs (heap per run, Open)")
	encrypt  = flag.Bool("encrypt", false, "the big stores encrypted at rest (a Keyring): WAITS sealed, opened whole into the heap")
	workers  = flag.Int("workers", 64, "goroutines that create the big stores' runs (in an encrypted store, the data keys of runs created at once share one write of KEYS)")
	stores   = flag.String("stores", "", "keep the big stores in `dir` and reuse them (built there if absent), so that two builds of the engine, run in turn, measure the same workload")
)

var ctx = context.Background()

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(devNull{}, nil)) }

type devNull struct{}

func (devNull) Write(p []byte) (int, error) { return len(p), nil }

func main() {
	flag.Parse()
	root, err := os.MkdirTemp(*dir, "waits-bench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	fmt.Printf("waits bench, %s, GOMAXPROCS %d, %s\n\n", time.Now().UTC().Format(time.RFC3339), runtime.GOMAXPROCS(0), runtime.Version())

	// 1. Wake latency, beside a message's.
	var ev, msg [][]time.Duration
	for i := range *rounds * b2i(!*skip) {
		ev = append(ev, eventLatency(filepath.Join(root, fmt.Sprint("ev", i))))
		msg = append(msg, messageLatency(filepath.Join(root, fmt.Sprint("msg", i))))
	}
	if !*skip {
		fmt.Println("| in process, fsync on | p50 | p99 | (per round: p50/p99) |")
		fmt.Println("| --- | ---: | ---: | --- |")
		row("SendEvent -> Ready lists the run (host blocked on ReadyChanged)", ev)
		row("baseline: Send+Commit -> Receive returns", msg)
		fmt.Println()
	}

	// 2. The big store: with waits, and the same runs without.
	clock := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	sdir := root
	if *stores != "" {
		sdir = *stores
	}
	big := filepath.Join(sdir, "big")
	plain := filepath.Join(sdir, "plain")
	if _, err := os.Stat(big); *stores == "" || err != nil {
		build(big, clock, true)
		build(plain, clock, false)
	}
	if st, err := os.Stat(filepath.Join(big, "WAITS")); err == nil {
		fmt.Printf("WAITS of the waiting runs' store: %d bytes, %.1f B per waiting run\n\n", st.Size(), float64(st.Size())/float64(*runs))
	}
	var withW, without []open
	if *prof != "" && *heapRows {
		f, err := os.Create(*prof)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
	}
	for range *rounds * b2i(*heapRows) {
		for _, waits := range []bool{true, false} {
			d := plain
			if waits {
				d = big
			}
			var o open
			now := clock.Add(-time.Hour) // before every deadline
			runtime.GC()
			t := time.Now()
			db, err := engine.Open(d, keyed(&engine.Options{Logger: quiet(), Clock: func() time.Time { return now }}))
			if err != nil {
				log.Fatal(err)
			}
			o.open = time.Since(t)
			time.Sleep(*settle)
			var ms runtime.MemStats
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&ms)
			before := ms.HeapAlloc
			t = time.Now()
			c := cpuTime()
			if ws, err := db.Ready(ctx, 0); err != nil || len(ws) != 0 {
				log.Fatalf("ready at the start: %d, %v", len(ws), err)
			}
			o.ready = time.Since(t)
			o.readyCPU = cpuTime() - c
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&ms)
			o.heap = ms.HeapInuse
			o.perRun = (float64(ms.HeapAlloc) - float64(before)) / float64(*runs)
			t = time.Now()
			if _, err := db.Ready(ctx, 0); err != nil {
				log.Fatal(err)
			}
			o.readyNone = time.Since(t)
			if waits {
				withW = append(withW, o)
			} else {
				without = append(without, o)
			}
			db.Close()
		}
	}
	if *prof != "" && *heapRows {
		pprof.StopCPUProfile()
	}
	if *heapRows {
		report(withW, without)
	}

	// 3. Finding the due ones: a restart at a time when -due are past.
	if *prof != "" && !*heapRows { // the profile is of the restarts below
		f, err := os.Create(*prof)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	var dueT, dueCPU, dueThread, noneT []time.Duration
	at := clock.Add(time.Duration(*due) * time.Second) // deadlines are clock + 1s .. + runs s
	for range *rounds {
		// Each round on a copy: its timeouts are written.
		cp := filepath.Join(root, "due")
		os.RemoveAll(cp)
		if err := os.CopyFS(cp, os.DirFS(big)); err != nil {
			log.Fatal(err)
		}
		db, err := engine.Open(cp, keyed(&engine.Options{Logger: quiet(), Clock: func() time.Time { return at }}))
		if err != nil {
			log.Fatal(err)
		}
		time.Sleep(*settle)
		runtime.LockOSThread() // the calling thread's CPU time: the Ready's own work
		t := time.Now()
		c, th := cpuTime(), threadTime()
		ws, err := db.Ready(ctx, 0) // loads the index, records the timeouts, lists them
		dueThread = append(dueThread, threadTime()-th)
		dueCPU = append(dueCPU, cpuTime()-c)
		dueT = append(dueT, time.Since(t))
		runtime.UnlockOSThread()
		if err != nil || len(ws) != *due {
			log.Fatalf("ready: %d, %v; want %d", len(ws), err, *due)
		}
		for i := 1; i < len(ws); i++ {
			if ws[i].Deadline.Before(ws[i-1].Deadline) {
				log.Fatalf("woke out of order: %v after %v", ws[i].Deadline, ws[i-1].Deadline)
			}
		}
		t = time.Now()
		if _, err := db.Ready(ctx, 0); err != nil {
			log.Fatal(err)
		}
		noneT = append(noneT, time.Since(t))
		db.Close()
		os.RemoveAll(cp)
	}
	fmt.Printf("| restart of %d sleeping runs, %d due (medians of %d; per round) | median | per due run | rounds |\n", *runs, *due, *rounds)
	fmt.Println("| --- | ---: | ---: | --- |")
	perDue := func(d time.Duration) string {
		if *due == 0 {
			return ""
		}
		return fmt.Sprintf("%.1f µs", float64(d)/1e3/float64(*due))
	}
	for _, r := range []struct {
		name string
		v    []time.Duration
	}{
		{fmt.Sprintf("first Ready: loads the index, records %d timeouts (batches of up to 1024, one fsync each), lists them in order: wall", *due), dueT},
		{"the same: the process's CPU time (with Open's background work, e.g. the periodic sweep of the runs, and the log writer's)", dueCPU},
		{"the same: the CPU time of the thread that called Ready (its own work: the load, Due, the records, Apply; not the log writer's fsync)", dueThread},
		{fmt.Sprintf("the next Ready (the %d listed again, none due): wall", *due), noneT},
	} {
		per := ""
		for _, d := range r.v {
			per += fmt.Sprintf("%.2f ", ms(d))
		}
		v := slices.Clone(r.v)
		slices.Sort(v)
		fmt.Printf("| %s | %.2f ms | %s | %s|\n", r.name, ms(v[len(v)/2]), perDue(v[len(v)/2]), per)
	}
}

// open is what one restart of a big store measured.
type open struct {
	heap          uint64
	perRun        float64 // HeapAlloc after the first Ready less before it (two GCs each), per run
	open, ready   time.Duration
	readyCPU      time.Duration
	readyNone     time.Duration
	readyDue      time.Duration
	listed, dueOK int
}

// report prints the restarts' table: the waiting runs beside the idle.
func report(withW, without []open) {
	med := func(os []open, f func(open) float64) float64 {
		v := make([]float64, len(os))
		for i, o := range os {
			v[i] = f(o)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	fmt.Printf("| %d runs, restart (medians of %d alternating rounds) | waiting (a sleep each) | idle (baseline) | ratio |\n", *runs, *rounds)
	fmt.Println("| --- | ---: | ---: | ---: |")
	for _, m := range []struct {
		name string
		f    func(open) float64
		unit string
	}{
		{"Open", func(o open) float64 { return ms(o.open) }, "ms"},
		{"first Ready (loads the index), none due", func(o open) float64 { return ms(o.ready) }, "ms"},
		{"its CPU time (the process's, user and system: Open's background work too)", func(o open) float64 { return ms(o.readyCPU) }, "ms"},
		{"heap in use after it", func(o open) float64 { return float64(o.heap) / (1 << 20) }, "MiB"},
		{"heap it kept, per run (HeapAlloc after less before, two GCs each; with -settle, Open's background work is over)", func(o open) float64 { return o.perRun }, "B"},
		{"a second Ready, none due", func(o open) float64 { return ms(o.readyNone) }, "ms"},
	} {
		a, b := med(withW, m.f), med(without, m.f)
		fmt.Printf("| %s | %.1f %s | %.1f %s | %.2fx |\n", m.name, a, m.unit, b, m.unit, a/b)
	}
	fmt.Println()
}

// keyed sets o's Keyring when -encrypt (a fixed key: the bench measures
// the cost, not the secrecy).
func keyed(o *engine.Options) *engine.Options {
	if *encrypt {
		k, err := seal.NewKeyring(map[string][]byte{"bench": make([]byte, 32)}, "bench")
		if err != nil {
			log.Fatal(err)
		}
		o.Keyring = k
	}
	return o
}

// threadTime is the calling thread's CPU time so far (linux; elsewhere
// the process's).
func threadTime() time.Duration {
	who := syscall.RUSAGE_SELF
	if runtime.GOOS == "linux" {
		who = 1 // RUSAGE_THREAD
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func row(name string, rs [][]time.Duration) {
	per := ""
	for _, r := range rs {
		slices.Sort(r)
		per += fmt.Sprintf("%.2f/%.2f ", ms(pct(r, 50)), ms(pct(r, 99)))
	}
	// The medians of the rounds' percentiles.
	var p50, p99 []time.Duration
	for _, r := range rs {
		p50 = append(p50, pct(r, 50))
		p99 = append(p99, pct(r, 99))
	}
	slices.Sort(p50)
	slices.Sort(p99)
	fmt.Printf("| %s | %.2f ms | %.2f ms | %s|\n", name, ms(p50[len(p50)/2]), ms(p99[len(p99)/2]), per)
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func pct(s []time.Duration, p int) time.Duration { return s[(len(s)-1)*p/100] }

// eventLatency: one run waits; SendEvent; the host (blocked on
// ReadyChanged) sees it in Ready; the run's next atom takes it; again.
func eventLatency(d string) []time.Duration {
	db, err := engine.Open(d, &engine.Options{Logger: quiet()})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	r, err := db.Run(ctx, "r")
	if err != nil {
		log.Fatal(err)
	}
	var out []time.Duration
	for i := range *events {
		if _, err := r.Wait(ctx, "go", time.Time{}); err != nil {
			log.Fatal(err)
		}
		seen := make(chan time.Time)
		go func() { // the host
			for {
				ch := db.ReadyChanged()
				ws, err := db.Ready(ctx, 0)
				if err != nil {
					log.Fatal(err)
				}
				if len(ws) > 0 {
					seen <- time.Now()
					return
				}
				<-ch
			}
		}()
		time.Sleep(200 * time.Microsecond) // the host blocks first
		t := time.Now()
		if _, err := db.SendEvent(ctx, "r", "go", fmt.Sprint("s", i), []byte("yes")); err != nil {
			log.Fatal(err)
		}
		out = append(out, (<-seen).Sub(t))
		a, err := r.Begin(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := a.WaitOutcome(ctx); err != nil {
			log.Fatal(err)
		}
		if err := a.Commit(ctx, new(frame.Delta).Set("k", []byte("v"))); err != nil {
			log.Fatal(err)
		}
	}
	return out
}

// messageLatency: b's atom blocks in Receive; a's atom sends and commits.
func messageLatency(d string) []time.Duration {
	db, err := engine.Open(d, &engine.Options{Logger: quiet()})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	a, err := db.Run(ctx, "a")
	if err != nil {
		log.Fatal(err)
	}
	b, err := db.Run(ctx, "b")
	if err != nil {
		log.Fatal(err)
	}
	var out []time.Duration
	for range *events {
		got := make(chan time.Time)
		go func() {
			at, err := b.Begin(ctx)
			if err != nil {
				log.Fatal(err)
			}
			if _, err := at.Receive(ctx); err != nil {
				log.Fatal(err)
			}
			got <- time.Now()
			if err := at.Commit(ctx, new(frame.Delta).Set("k", []byte("v"))); err != nil {
				log.Fatal(err)
			}
			got <- time.Time{}
		}()
		at, err := a.Begin(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if err := at.Send(ctx, "b", []byte("yes")); err != nil {
			log.Fatal(err)
		}
		time.Sleep(200 * time.Microsecond) // the receiver blocks first
		t := time.Now()
		if err := at.Commit(ctx, new(frame.Delta).Set("k", []byte("v"))); err != nil {
			log.Fatal(err)
		}
		out = append(out, (<-got).Sub(t))
		<-got
	}
	return out
}

// build writes a store of -runs runs, each asleep (waits) until clock +
// a time of its own (1s .. runs s, in an order unlike the ids), or idle.
// Built without fsync (durability is not what is measured), closed
// cleanly.
func build(d string, clock time.Time, waits bool) {
	db, err := engine.Open(d, keyed(&engine.Options{Logger: quiet(), NoSync: true, Clock: func() time.Time { return clock.Add(-time.Hour) }}))
	if err != nil {
		log.Fatal(err)
	}
	n := *runs
	var wg sync.WaitGroup
	for w := range max(*workers, 1) {
		wg.Go(func() {
			for i := w; i < n; i += max(*workers, 1) {
				r, err := db.Run(ctx, fmt.Sprintf("run-%06d", i))
				if err != nil {
					log.Fatal(err)
				}
				if waits {
					k := (i*7919)%n + 1 // a permutation of 1..n (7919 is prime, n not its multiple)
					if _, err := r.Sleep(ctx, clock.Add(time.Duration(k)*time.Second)); err != nil {
						log.Fatal(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
}
