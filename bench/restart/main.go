// Command restart measures CONTINUUM's restart: engine.Open followed by
// Run.State() of one run with many atoms, in stores holding more and more
// atoms in total. Restart must cost what the log tail costs, never what the
// history costs, so the figures should stay flat across store sizes.
//
//	go run ./bench/restart -totals 10000,100000,1000000 -big 10000 -reopens 30 -dir /work/tmp-bench
//
// Each store holds one run of -big atoms ("big") and filler runs of 1,000
// atoms, -total atoms in all; every atom is one Do (about 200 B of JSON
// args, 300 B of result) and one delta of about 500 B of agent text. The
// agent compacts its context, as real agents do: its frame keeps the last
// 400 messages. Stores are built with NoSync (durability is not what is
// measured) and closed cleanly; then each is opened -reopens times with
// default options, timing Open -> Run("big") -> State(). CPU p50 is the
// process's user and system CPU time (every thread) over the same span:
// steadier than wall time on a shared machine.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/internal/workload"
)

var (
	totalsFlag = flag.String("totals", "10000,100000,1000000", "store sizes in atoms, comma-separated")
	bigFlag    = flag.Int("big", 10000, "atoms of the run whose state is restored")
	reopens    = flag.Int("reopens", 30, "timed reopens per store")
	dirFlag    = flag.String("dir", "", "directory for the stores (default: a temporary one, removed after)")
	keep       = flag.Bool("keep", false, "keep the stores (and reuse them if present)")
	cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the timed reopens (not of the builds) to this file")
	firstWrite = flag.Bool("firstwrite", false, "after each timed reopen, time the first two acknowledged commits (run \"probe\", fsync on): the store gains two atoms per reopen")
)

const (
	fillerAtoms = 1000
	keepMsgs    = 400 // context compaction: the frame keeps this many messages
	seed        = 1
)

func main() {
	flag.Parse()
	ctx := context.Background()
	root := *dirFlag
	if root == "" {
		d, err := os.MkdirTemp("", "continuum-restart")
		if err != nil {
			log.Fatal(err)
		}
		root = d
	}
	if !*keep {
		defer os.RemoveAll(root)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	fmt.Printf("restart: Open -> State() of a %d-atom run; %d reopens per store; %s\n\n", *bigFlag, *reopens, time.Now().UTC().Format("2006-01-02"))
	fmt.Println("| atoms in store | runs | store bytes/atom | build | Open+State p50 | p99 | max | Open alone p50 | CPU p50 |")
	fmt.Println("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, s := range strings.Split(*totalsFlag, ",") {
		total, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || total < *bigFlag {
			log.Fatalf("bad -totals entry %q (each must be >= -big)", s)
		}
		dir := filepath.Join(root, fmt.Sprintf("store-%d", total))
		runs := 1 + (total-*bigFlag+fillerAtoms-1)/fillerAtoms
		var build time.Duration
		if _, err := os.Stat(dir); err != nil || !*keep {
			os.RemoveAll(dir)
			build = buildStore(ctx, dir, total, quiet)
		}
		size := dirSize(dir)
		var both, openOnly, cpu, first, next []time.Duration
		if *cpuProfile != "" {
			f, err := os.Create(*cpuProfile)
			if err != nil {
				log.Fatal(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				log.Fatal(err)
			}
		}
		for i := 0; i < *reopens; i++ {
			// Each reopen starts like a new process: no garbage of the last
			// one for the collector to work through during the timed part.
			runtime.GC()
			// The timed span carries the profile label span=restart (the
			// goroutines it starts inherit it): pprof -tagfocus=span=restart
			// leaves out the collection above and Close below.
			var (
				db         *engine.DB
				run        *engine.Run
				st         *frame.Frame
				t0, t1, t2 time.Time
			)
			c0 := cpuTime()
			pprof.Do(ctx, pprof.Labels("span", "restart"), func(ctx context.Context) {
				var err error
				t0 = time.Now()
				db, err = engine.Open(dir, &engine.Options{Logger: quiet})
				if err != nil {
					log.Fatal(err)
				}
				t1 = time.Now()
				run, err = db.Run(ctx, "big")
				if err != nil {
					log.Fatal(err)
				}
				st, err = run.StateE()
				if err != nil {
					log.Fatal(err)
				}
				t2 = time.Now()
			})
			cpu = append(cpu, cpuTime()-c0)
			if run.LastSeq() != uint64(*bigFlag) || len(st.Messages) == 0 {
				log.Fatalf("store %s: big run at seq %d with %d messages", dir, run.LastSeq(), len(st.Messages))
			}
			if n := db.Stats().Open.Replayed; n != 0 {
				log.Fatalf("store %s: replayed %d records after a clean close", dir, n)
			}
			both = append(both, t2.Sub(t0))
			openOnly = append(openOnly, t1.Sub(t0))
			if *firstWrite {
				pprof.Do(ctx, pprof.Labels("span", "first"), func(ctx context.Context) { first = append(first, probeCommit(ctx, db, i)) })
				pprof.Do(ctx, pprof.Labels("span", "next"), func(ctx context.Context) { next = append(next, probeCommit(ctx, db, i)) })
			}
			if err := db.Close(); err != nil {
				log.Fatal(err)
			}
		}
		pprof.StopCPUProfile() // each store's reopens overwrite the last store's profile
		fmt.Printf("| %d | %d | %.0f | %s | %s | %s | %s | %s | %s |\n", total, runs, float64(size)/float64(total),
			build.Round(time.Second), ms(pct(both, 50)), ms(pct(both, 99)), ms(pct(both, 100)), ms(pct(openOnly, 50)), ms(pct(cpu, 50)))
		if *firstWrite {
			fmt.Printf("|   first write after restart: p50 %s, p99 %s; the next one: p50 %s, p99 %s; first / next %.2fx |\n",
				ms(pct(first, 50)), ms(pct(first, 99)), ms(pct(next, 50)), ms(pct(next, 99)), float64(pct(first, 50))/float64(pct(next, 50)))
		}
	}
}

// probeCommit times Begin and Commit of one atom (a memory key set, no
// action) of the run "probe", acknowledged with the default durability:
// the first after Open shows what the restart leaves for the first
// acknowledged write to wait for, the second the steady state.
func probeCommit(ctx context.Context, db *engine.DB, i int) time.Duration {
	run, err := db.Run(ctx, "probe")
	if err != nil {
		log.Fatal(err)
	}
	t0 := time.Now()
	atom, err := run.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := atom.Commit(ctx, new(frame.Delta).Set("reopen", []byte(strconv.Itoa(i)))); err != nil {
		log.Fatal(err)
	}
	return time.Since(t0)
}

// buildStore writes total atoms: the big run and filler runs, two runs at a
// time (this machine has two cores).
func buildStore(ctx context.Context, dir string, total int, logger *slog.Logger) time.Duration {
	start := time.Now()
	db, err := engine.Open(dir, &engine.Options{NoSync: true, Logger: logger})
	if err != nil {
		log.Fatal(err)
	}
	type job struct {
		id    string
		atoms int
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	world := agent.NewWorld()
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				run, err := db.Run(ctx, j.id)
				if err != nil {
					log.Fatal(err)
				}
				for i := 0; i < j.atoms; i++ {
					if err := step(ctx, run, world); err != nil {
						log.Fatal(err)
					}
				}
			}
		}()
	}
	jobs <- job{"big", *bigFlag}
	for left, i := total-*bigFlag, 0; left > 0; i++ {
		n := min(left, fillerAtoms)
		jobs <- job{workload.RunID(i), n}
		left -= n
	}
	close(jobs)
	wg.Wait()
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
	return time.Since(start)
}

// step is agent.Step with context compaction: past keepMsgs messages, each
// atom drops as many old ones as it adds.
func step(ctx context.Context, run *engine.Run, ds agent.Downstream) error {
	atom, err := run.Begin(ctx)
	if err != nil {
		return err
	}
	a := workload.Script(run.ID(), atom.Seq(), seed)
	res, err := atom.Do(ctx, agent.Action(a), func(ctx context.Context, key string) ([]byte, error) {
		return ds.Exec(ctx, a.Tool, a.Args, key, a.Idempotent)
	})
	if err != nil {
		return err
	}
	a.Result = res
	d := agent.Delta(a)
	if 2*atom.Seq() > keepMsgs {
		d.DropMessages(2)
	}
	return atom.Commit(ctx, d)
}

func dirSize(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func pct(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

// cpuTime is the user and system CPU time of the process so far, every
// thread included: unlike wall time, it does not count waiting for a core
// on a loaded machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
