// Command continuumd measures what continuumd costs an agent against the
// in-process library, side by side:
//
//   - latency: one atom (begin, one action executed by the client, commit
//     of a ~200 B delta) in-process (engine: Begin, Do, Commit), and
//     through continuumd over its Unix socket (a Go client with
//     keep-alive connections): in 4 requests (begin, call, outcome,
//     commit), in 2 (the begin carrying call 0, the outcome the commit),
//     and in 2 over HTTP/2 without TLS (continuumd --h2c); with -tcp over
//     loopback TCP too. The per-request overhead is the difference of the
//     p50s divided by the requests per atom.
//   - throughput: atoms/s of 16 runs at once: 16 goroutines in-process,
//     16 goroutines over the socket (4 requests, 2, 2 over h2c), 16
//     Python client processes (clients/python: 2 requests per atom).
//
// With -server-before BIN the kinds of a baseline server binary run
// beside the current one's; with -python-before DIR the Python clients of
// a baseline checkout (DIR = its clients/python/src) run beside the
// current ones. -profile DIR has every continuumd write its CPU profile
// there (go tool pprof BIN FILE).
//
// Each kind runs on a store of its own in -dir, one after the other within
// each round (so every round measures all of them under the same machine
// load, and the before and after of each pair alternate), -rounds rounds;
// the figures are medians over the rounds, printed with each round's
// value. -nosync runs a second latency pass with fsync off on every side
// (engine.Options.NoSync, continuumd --unsafe-no-sync): the protocol's
// cost without the disk's noise.
//
//	go build -o /tmp/continuumd ./cmd/continuumd
//	go run ./bench/continuumd -rounds 5 -atoms 1000 -per-run 150 -server /tmp/continuumd -dir /tmp/bench-continuumd
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

var (
	serverFlag   = flag.String("server", "", "the continuumd binary (default: go build ./cmd/continuumd into a temporary directory)")
	dirFlag      = flag.String("dir", "", "directory for the stores (default: a temporary one)")
	rounds       = flag.Int("rounds", 5, "rounds; every kind runs once per round")
	atoms        = flag.Int("atoms", 2000, "atoms per latency measurement")
	conc         = flag.Int("concurrency", 16, "runs at once in the throughput measurement")
	perRun       = flag.Int("per-run", 150, "atoms per run in the throughput measurement")
	nosync       = flag.Bool("nosync", false, "also measure latency with fsync off everywhere")
	python       = flag.String("python", "python3", "the Python interpreter for the Python clients (\"\": skip them)")
	pythonBefore = flag.String("python-before", "", "the src directory of a baseline clients/python (its 16 clients are measured beside the current ones; \"\": skip)")
	repoFlag     = flag.String("repo", ".", "the repository's root (for clients/python and go build)")
	helloFlag    = flag.String("serve-hello", "", "internal: serve a minimal HTTP handler on this Unix socket (the floor of any HTTP protocol)")
	serverBefore = flag.String("server-before", "", "a baseline continuumd binary: its kinds run beside the current one's (\"\": skip)")
	tcpFlag      = flag.Bool("tcp", false, "also measure loopback TCP")
	h2cFlag      = flag.Bool("h2c", true, "also measure HTTP/2 without TLS on the Unix socket (continuumd --h2c)")
	profileDir   = flag.String("profile", "", "directory: every continuumd started writes its CPU profile there (--cpu-profile)")
)

// the atom's content, the same on every side
var (
	args   = []byte(`{"region":"eu-west-1","service":"checkout","replicas":3}`)
	result = []byte(`{"status":"ok","deployment":"d-1234","replicas":3}`)
)

func delta(seq uint64) *frame.Delta {
	return new(frame.Delta).Set("step", []byte(strconv.FormatUint(seq, 10))).
		AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: "deployed checkout to eu-west-1, 3 replicas; next: verify health checks"})
}

func deltaOps(seq string) []any {
	return []any{
		map[string]any{"op": "set", "key": "step", "value": seq},
		map[string]any{"op": "append_message", "role": "assistant", "content": "deployed checkout to eu-west-1, 3 replicas; next: verify health checks"},
	}
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	if *helloFlag != "" {
		serveHello(*helloFlag)
		return
	}
	root := *dirFlag
	if root == "" {
		d, err := os.MkdirTemp("", "bench-continuumd-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		root = d
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		log.Fatal(err)
	}
	bin := *serverFlag
	if bin == "" {
		bin = filepath.Join(root, "continuumd-bin")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/continuumd")
		cmd.Dir, cmd.Stderr = *repoFlag, os.Stderr
		if err := cmd.Run(); err != nil {
			log.Fatalf("go build: %v", err)
		}
	}
	fmt.Printf("# continuumd bench: %d rounds, %d atoms per latency run, %d runs x %d atoms for throughput, %s\n",
		*rounds, *atoms, *conc, *perRun, time.Now().UTC().Format(time.RFC3339))

	if *profileDir != "" {
		if err := os.MkdirAll(*profileDir, 0o700); err != nil {
			log.Fatal(err)
		}
	}
	type kind struct {
		name string
		reqs int // requests per atom (0: not a server kind)
		run  func(dir string, sync bool) (measure, error)
	}
	server := func(h how, reqs int) kind {
		return kind{h.name, reqs, func(dir string, sync bool) (measure, error) { return latencyServer(h, dir, sync) }}
	}
	kinds := []kind{
		{"in-process", 0, latencyInProcess},
		{"bare HTTP", 0, func(dir string, sync bool) (measure, error) { return latencyHello(dir) }},
	}
	if *serverBefore != "" {
		kinds = append(kinds, server(how{bin: *serverBefore, name: "unix socket, 4 requests, server before"}, 4))
	}
	kinds = append(kinds, server(how{bin: bin, name: "unix socket, 4 requests"}, 4))
	if *serverBefore != "" {
		kinds = append(kinds, server(how{bin: *serverBefore, ride: true, name: "unix socket, 2 requests, server before"}, 2))
	}
	kinds = append(kinds, server(how{bin: bin, ride: true, name: "unix socket, 2 requests"}, 2))
	if *h2cFlag {
		kinds = append(kinds, server(how{bin: bin, ride: true, h2c: true, name: "unix socket, 2 requests, h2c"}, 2))
	}
	if *tcpFlag {
		kinds = append(kinds, server(how{bin: bin, tcp: true, name: "loopback TCP, 4 requests"}, 4))
	}
	type tkind struct {
		name string
		run  func(dir string) (float64, error)
	}
	tserver := func(h how, clients string) tkind {
		return tkind{h.name, func(dir string) (float64, error) { return throughputServer(h, dir, clients) }}
	}
	tkinds := []tkind{{"in-process", throughputInProcess}}
	if *serverBefore != "" {
		tkinds = append(tkinds, tserver(how{bin: *serverBefore, ride: true, name: "go clients, 2 requests, server before"}, "go"))
	}
	tkinds = append(tkinds, tserver(how{bin: bin, name: "go clients, 4 requests"}, "go"),
		tserver(how{bin: bin, ride: true, name: "go clients, 2 requests"}, "go"))
	if *h2cFlag {
		tkinds = append(tkinds, tserver(how{bin: bin, ride: true, h2c: true, name: "go clients, 2 requests, h2c"}, "go"))
	}
	if *python != "" {
		switch {
		case *pythonBefore != "" && *serverBefore != "":
			tkinds = append(tkinds, tserver(how{bin: *serverBefore, name: "python clients, client and server before"}, "python-before"))
		case *pythonBefore != "":
			tkinds = append(tkinds, tserver(how{bin: bin, name: "python clients, client before"}, "python-before"))
		}
		tkinds = append(tkinds, tserver(how{bin: bin, name: "python clients"}, "python"))
	}
	modes := []bool{true}
	if *nosync {
		modes = append(modes, false)
	}
	p50s := map[string][]float64{}
	p99s := map[string][]float64{}
	cpus := map[string][]float64{}
	tput := map[string][]float64{}
	for r := 0; r < *rounds; r++ {
		for _, sync := range modes {
			for _, k := range kinds {
				dir := filepath.Join(root, fmt.Sprintf("lat-%d-%t-%s", r, sync, strings.NewReplacer(" ", "-", ",", "").Replace(k.name)))
				m, err := k.run(dir, sync)
				if err != nil {
					log.Fatalf("%s: %v", k.name, err)
				}
				os.RemoveAll(dir)
				lat := m.lat
				key := fmt.Sprintf("%s|%t", k.name, sync)
				cpu := us(m.cpu) / float64(len(lat))
				p50s[key] = append(p50s[key], us(pct(lat, 50)))
				p99s[key] = append(p99s[key], us(pct(lat, 99)))
				cpus[key] = append(cpus[key], cpu)
				fmt.Printf("round %d %-40s fsync=%-5t p50 %7.1f us  p99 %7.1f us  cpu %6.1f us/atom\n", r, k.name, sync, us(pct(lat, 50)), us(pct(lat, 99)), cpu)
			}
		}
		for _, t := range tkinds {
			dir := filepath.Join(root, fmt.Sprintf("tput-%d-%s", r, strings.NewReplacer(" ", "-", ",", "").Replace(t.name)))
			v, err := t.run(dir)
			if err != nil {
				log.Fatalf("%s: %v", t.name, err)
			}
			os.RemoveAll(dir)
			tput[t.name] = append(tput[t.name], v)
			fmt.Printf("round %d throughput %-40s %8.0f atoms/s\n", r, t.name, v)
		}
	}
	fmt.Printf("\n## latency of one atom (begin, one action, commit), median of %d rounds\n\n", *rounds)
	fmt.Println("| fsync | path | p50 | p99 | added p50 per atom | added p50 per request | CPU per atom (all processes) | p50 per round |")
	fmt.Println("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, sync := range modes {
		base := median(p50s[fmt.Sprintf("in-process|%t", sync)])
		for _, k := range kinds {
			key := fmt.Sprintf("%s|%t", k.name, sync)
			p50 := median(p50s[key])
			added := "-"
			perReq := "-"
			if k.name == "bare HTTP" {
				perReq = fmt.Sprintf("%.0f µs (floor: 4 round trips)", p50/4)
			} else if k.reqs > 0 {
				added = fmt.Sprintf("%.0f µs", p50-base)
				perReq = fmt.Sprintf("%.0f µs (%d per atom)", (p50-base)/float64(k.reqs), k.reqs)
			}
			fmt.Printf("| %t | %s | %.0f µs | %.0f µs | %s | %s | %.0f µs | %s |\n", sync, k.name, p50, median(p99s[key]), added, perReq, median(cpus[key]), rounded(p50s[key]))
		}
	}
	fmt.Printf("\n## throughput, %d runs at once, strict durability, median of %d rounds\n\n", *conc, *rounds)
	fmt.Println("| clients | atoms/s | vs in-process | per round |")
	fmt.Println("| --- | ---: | ---: | --- |")
	base := median(tput["in-process"])
	for _, t := range tkinds {
		v := median(tput[t.name])
		fmt.Printf("| %s | %.0f | %.2fx | %s |\n", t.name, v, v/base, rounded(tput[t.name]))
	}
}

// rounded is the per-round values, as measured (round order).
func rounded(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(parts, " ")
}

func openDB(dir string, sync bool) (*engine.DB, error) {
	return engine.Open(dir, &engine.Options{Logger: slog.New(slog.DiscardHandler), NoSync: !sync})
}

// measure is a latency run: each timed atom's wall time, and the CPU time
// (user and system) of every process involved over the timed atoms.
type measure struct {
	lat []time.Duration
	cpu time.Duration
}

// selfCPU is this process's CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the CPU time of process pid so far (/proc, clock ticks of 10 ms).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// latencyInProcess times atoms through the library.
func latencyInProcess(dir string, sync bool) (measure, error) {
	ctx := context.Background()
	db, err := openDB(dir, sync)
	if err != nil {
		return measure{}, err
	}
	defer db.Close()
	run, err := db.Run(ctx, "lat")
	if err != nil {
		return measure{}, err
	}
	exec := func(context.Context, string) ([]byte, error) { return result, nil }
	out := make([]time.Duration, 0, *atoms)
	var cpu0 time.Duration
	for i := 0; i < *atoms+*atoms/10; i++ {
		if i == *atoms/10 { // the first tenth warms up
			cpu0 = selfCPU()
		}
		t0 := time.Now()
		a, err := run.Begin(ctx)
		if err != nil {
			return measure{}, err
		}
		if _, err := a.Do(ctx, ledger.Action{Tool: "deploy", Args: args}, exec); err != nil {
			return measure{}, err
		}
		if err := a.Commit(ctx, delta(a.Seq())); err != nil {
			return measure{}, err
		}
		if i >= *atoms/10 {
			out = append(out, time.Since(t0))
		}
	}
	return measure{out, selfCPU() - cpu0}, nil
}

func throughputInProcess(dir string) (float64, error) {
	ctx := context.Background()
	db, err := openDB(dir, true)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	runs := make([]*engine.Run, *conc)
	for i := range runs {
		if runs[i], err = db.Run(ctx, fmt.Sprint("t", i)); err != nil {
			return 0, err
		}
	}
	exec := func(context.Context, string) ([]byte, error) { return result, nil }
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	t0 := time.Now()
	for _, run := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < *perRun; i++ {
				a, err := run.Begin(ctx)
				if err == nil {
					_, err = a.Do(ctx, ledger.Action{Tool: "deploy", Args: args}, exec)
				}
				if err == nil {
					err = a.Commit(ctx, delta(a.Seq()))
				}
				if err != nil {
					failed.Store(&err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if e := failed.Load(); e != nil {
		return 0, *e
	}
	return float64(*conc**perRun) / time.Since(t0).Seconds(), nil
}

func pct(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
