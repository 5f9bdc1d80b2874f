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
//     Python client processes (clients/python: 2 requests per atom), and
//     with -node 16 TypeScript client processes (clients/typescript as
//     its prepare script builds it, dist/src: 2 requests per atom).
//     -levels 1,16,64 runs every throughput kind at each of these numbers
//     of runs at once instead of -concurrency, within the same rounds, and
//     times each atom of each client: at 1 client the p50 of an atom less
//     in-process's, divided by the client's requests per atom, is the
//     overhead per request of that client's language.
//
// -transport http,frames (the default) runs every server kind of the
// current binary over both transports side by side in each round: HTTP/1.1
// and continuum-frames/1 (internal/wireframe's Transport; a Go client
// process keeps -frames-conns connections and pipelines its goroutines'
// requests on them). The Python and TypeScript clients are told the
// transport by the environment variable CONTINUUM_BENCH_TRANSPORT (http
// or frames). "bare frames" is the floor of frames as "bare HTTP" is
// HTTP's: a process answering each frame with a small JSON object as its
// reader reads it.
//
// With -server-before BIN the kinds of a baseline server binary run
// beside the current one's; with -python-before DIR the Python clients of
// a baseline checkout (DIR = its clients/python/src) run beside the
// current ones, and with -node-before DIR the TypeScript clients of a
// baseline (DIR = its clients/typescript, built). -profile DIR has every continuumd write its CPU profile
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
	"slices"
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
	levelsFlag   = flag.String("levels", "", "comma-separated numbers of runs at once (e.g. 1,16,64): every throughput kind at each, with p50 per atom (\"\": -concurrency only)")
	node         = flag.String("node", "", "the Node binary for the TypeScript clients (clients/typescript built by npm install or its prepare script; \"\": skip them)")
	nodeBefore   = flag.String("node-before", "", "the directory of a baseline clients/typescript, built (its clients are measured beside the current ones with -node; \"\": skip)")
	perRun       = flag.Int("per-run", 150, "atoms per run in the throughput measurement")
	nosync       = flag.Bool("nosync", false, "also measure latency with fsync off everywhere")
	python       = flag.String("python", "python3", "the Python interpreter for the Python clients (\"\": skip them)")
	pythonBefore = flag.String("python-before", "", "the src directory of a baseline clients/python (its 16 clients are measured beside the current ones; \"\": skip)")
	repoFlag     = flag.String("repo", ".", "the repository's root (for clients/python and go build)")
	helloFlag    = flag.String("serve-hello", "", "internal: serve a minimal HTTP handler on this Unix socket (the floor of any HTTP protocol)")
	helloFrames  = flag.String("serve-hello-frames", "", "internal: serve a minimal continuum-frames/1 answerer on this Unix socket (the floor of frames)")
	serverBefore = flag.String("server-before", "", "a baseline continuumd binary: its kinds run beside the current one's (\"\": skip)")
	tcpFlag      = flag.Bool("tcp", false, "also measure loopback TCP")
	h2cFlag      = flag.Bool("h2c", true, "also measure HTTP/2 without TLS on the Unix socket (continuumd --h2c)")
	profileDir   = flag.String("profile", "", "directory: every continuumd started writes its CPU profile there (--cpu-profile)")
	transports   = flag.String("transport", "http,frames", "the transports of the server kinds, comma-separated, side by side in every round: http (HTTP/1.1), frames (continuum-frames/1; the Python and TypeScript clients get CONTINUUM_BENCH_TRANSPORT)")
	framesConns  = flag.Int("frames-conns", 1, "connections a Go client process keeps over frames (its goroutines pipeline on them)")
	contention   = flag.Bool("contention", false, "with -profile: every continuumd writes its block and mutex profiles there too (--block-profile, --mutex-profile; they slow it)")
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
	if *helloFrames != "" {
		serveHelloFrames(*helloFrames)
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
	levels := []int{*conc}
	if *levelsFlag != "" {
		levels = levels[:0]
		for _, f := range strings.Split(*levelsFlag, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				log.Fatalf("-levels %q: %q is not a number of runs >= 1", *levelsFlag, f)
			}
			levels = append(levels, n)
		}
	}
	if *levelsFlag == "" {
		fmt.Printf("# continuumd bench: %d rounds, %d atoms per latency run, %d runs x %d atoms for throughput, %s\n",
			*rounds, *atoms, *conc, *perRun, time.Now().UTC().Format(time.RFC3339))
	} else {
		fmt.Printf("# continuumd bench: %d rounds, %d atoms per latency run, %s runs x %d atoms for throughput, %s\n",
			*rounds, *atoms, *levelsFlag, *perRun, time.Now().UTC().Format(time.RFC3339))
	}

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
		{"bare HTTP", 0, func(dir string, sync bool) (measure, error) { return latencyHello(dir, false) }},
	}
	var frameses []bool // the transports: false HTTP, true frames
	for _, t := range strings.Split(*transports, ",") {
		switch strings.TrimSpace(t) {
		case "http":
			frameses = append(frameses, false)
		case "frames":
			frameses = append(frameses, true)
		default:
			log.Fatalf("-transport %q: %q is neither http nor frames", *transports, t)
		}
	}
	// suffix names a kind's transport when frames is measured.
	suffix := func(frames bool) string {
		if frames {
			return ", frames"
		}
		return ""
	}
	if slices.Contains(frameses, true) {
		kinds = append(kinds, kind{"bare frames", 0, func(dir string, sync bool) (measure, error) { return latencyHello(dir, true) }})
	}
	if *serverBefore != "" {
		kinds = append(kinds, server(how{bin: *serverBefore, name: "unix socket, 4 requests, server before"}, 4))
	}
	for _, fr := range frameses {
		kinds = append(kinds, server(how{bin: bin, frames: fr, name: "unix socket, 4 requests" + suffix(fr)}, 4))
	}
	if *serverBefore != "" {
		kinds = append(kinds, server(how{bin: *serverBefore, ride: true, name: "unix socket, 2 requests, server before"}, 2))
	}
	for _, fr := range frameses {
		kinds = append(kinds, server(how{bin: bin, ride: true, frames: fr, name: "unix socket, 2 requests" + suffix(fr)}, 2))
	}
	if *h2cFlag {
		kinds = append(kinds, server(how{bin: bin, ride: true, h2c: true, name: "unix socket, 2 requests, h2c"}, 2))
	}
	if *tcpFlag {
		for _, fr := range frameses {
			kinds = append(kinds, server(how{bin: bin, tcp: true, frames: fr, name: "loopback TCP, 4 requests" + suffix(fr)}, 4))
		}
	}
	type tkind struct {
		name string
		reqs int // requests per atom (0: in-process)
		run  func(dir string, n int) (tmeasure, error)
	}
	tserver := func(h how, clients string, reqs int) tkind {
		return tkind{h.name, reqs, func(dir string, n int) (tmeasure, error) { return throughputServer(h, dir, clients, n) }}
	}
	tkinds := []tkind{{"in-process", 0, throughputInProcess}}
	if *serverBefore != "" {
		tkinds = append(tkinds, tserver(how{bin: *serverBefore, ride: true, name: "go clients, 2 requests, server before"}, "go", 2))
	}
	for _, fr := range frameses {
		tkinds = append(tkinds, tserver(how{bin: bin, frames: fr, name: "go clients, 4 requests" + suffix(fr)}, "go", 4))
	}
	for _, fr := range frameses {
		tkinds = append(tkinds, tserver(how{bin: bin, ride: true, frames: fr, name: "go clients, 2 requests" + suffix(fr)}, "go", 2))
	}
	if *h2cFlag {
		tkinds = append(tkinds, tserver(how{bin: bin, ride: true, h2c: true, name: "go clients, 2 requests, h2c"}, "go", 2))
	}
	if *python != "" {
		// 50e2e26's client begins with a request of its own: 3 per atom.
		switch {
		case *pythonBefore != "" && *serverBefore != "":
			tkinds = append(tkinds, tserver(how{bin: *serverBefore, name: "python clients, client and server before"}, "python-before", 3))
		case *pythonBefore != "":
			tkinds = append(tkinds, tserver(how{bin: bin, name: "python clients, client before"}, "python-before", 3))
		}
		for _, fr := range frameses {
			tkinds = append(tkinds, tserver(how{bin: bin, frames: fr, name: "python clients" + suffix(fr)}, "python", 2))
		}
	}
	if *node != "" {
		if *nodeBefore != "" {
			tkinds = append(tkinds, tserver(how{bin: bin, name: "typescript clients, client before"}, "typescript-before", 2))
		}
		for _, fr := range frameses {
			tkinds = append(tkinds, tserver(how{bin: bin, frames: fr, name: "typescript clients" + suffix(fr)}, "typescript", 2))
		}
	}
	modes := []bool{true}
	if *nosync {
		modes = append(modes, false)
	}
	p50s := map[string][]float64{}
	p99s := map[string][]float64{}
	cpus := map[string][]float64{}
	tput := map[string][]float64{}
	tp50 := map[string][]float64{}
	tcpu := map[string][]float64{}
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
		for _, n := range levels {
			for _, t := range tkinds {
				dir := filepath.Join(root, fmt.Sprintf("tput-%d-%d-%s", r, n, strings.NewReplacer(" ", "-", ",", "").Replace(t.name)))
				m, err := t.run(dir, n)
				if err != nil {
					log.Fatalf("%s, %d runs: %v", t.name, n, err)
				}
				os.RemoveAll(dir)
				if *levelsFlag == "" {
					tput[t.name] = append(tput[t.name], m.rate)
					fmt.Printf("round %d throughput %-40s %8.0f atoms/s\n", r, t.name, m.rate)
					continue
				}
				key := fmt.Sprintf("%s|%d", t.name, n)
				tput[key] = append(tput[key], m.rate)
				tp50[key] = append(tp50[key], us(m.p50))
				tcpu[key] = append(tcpu[key], us(m.cpu))
				fmt.Printf("round %d throughput %3d x %-40s %8.0f atoms/s  p50 %8.1f us/atom  cpu %7.1f us/atom (%.2f cores)\n", r, n, t.name, m.rate, us(m.p50), us(m.cpu), us(m.cpu)*m.rate/1e6)
			}
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
			if strings.HasPrefix(k.name, "bare ") {
				perReq = fmt.Sprintf("%.0f µs (floor: 4 round trips)", p50/4)
			} else if k.reqs > 0 {
				added = fmt.Sprintf("%.0f µs", p50-base)
				perReq = fmt.Sprintf("%.0f µs (%d per atom)", (p50-base)/float64(k.reqs), k.reqs)
			}
			fmt.Printf("| %t | %s | %.0f µs | %.0f µs | %s | %s | %.0f µs | %s |\n", sync, k.name, p50, median(p99s[key]), added, perReq, median(cpus[key]), rounded(p50s[key]))
		}
	}
	if *levelsFlag == "" {
		fmt.Printf("\n## throughput, %d runs at once, strict durability, median of %d rounds\n\n", *conc, *rounds)
		fmt.Println("| clients | atoms/s | vs in-process | per round |")
		fmt.Println("| --- | ---: | ---: | --- |")
		base := median(tput["in-process"])
		for _, t := range tkinds {
			v := median(tput[t.name])
			fmt.Printf("| %s | %.0f | %.2fx | %s |\n", t.name, v, v/base, rounded(tput[t.name]))
		}
		return
	}
	for _, n := range levels {
		fmt.Printf("\n## throughput, %d runs at once, strict durability, median of %d rounds\n\n", n, *rounds)
		fmt.Println("| clients | atoms/s | vs in-process | p50 per atom | added p50 per request | CPU per atom (all processes) | atoms/s per round |")
		fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
		base := median(tput[fmt.Sprintf("in-process|%d", n)])
		base50 := median(tp50[fmt.Sprintf("in-process|%d", n)])
		for _, t := range tkinds {
			key := fmt.Sprintf("%s|%d", t.name, n)
			v, p50 := median(tput[key]), median(tp50[key])
			perReq := "-"
			if t.reqs > 0 {
				perReq = fmt.Sprintf("%.0f µs (%d per atom)", (p50-base50)/float64(t.reqs), t.reqs)
			}
			fmt.Printf("| %s | %.0f | %.2fx | %.0f µs | %s | %.0f µs | %s |\n", t.name, v, v/base, p50, perReq, median(tcpu[key]), rounded(tput[key]))
		}
	}
}

// tmeasure is a throughput run: atoms/s of all its runs together, the
// p50 of one atom's wall time over every atom of every run, and the CPU
// time (user and system) of every process involved (this one, the server,
// the client processes) from the start of the atoms to the end, per atom.
type tmeasure struct {
	rate float64
	p50  time.Duration
	cpu  time.Duration
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

func throughputInProcess(dir string, n int) (tmeasure, error) {
	ctx := context.Background()
	db, err := openDB(dir, true)
	if err != nil {
		return tmeasure{}, err
	}
	defer db.Close()
	runs := make([]*engine.Run, n)
	for i := range runs {
		if runs[i], err = db.Run(ctx, fmt.Sprint("t", i)); err != nil {
			return tmeasure{}, err
		}
	}
	lats := make([][]time.Duration, n)
	exec := func(context.Context, string) ([]byte, error) { return result, nil }
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	cpu0 := selfCPU()
	t0 := time.Now()
	for j, run := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < *perRun; i++ {
				t1 := time.Now()
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
				lats[j] = append(lats[j], time.Since(t1))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	cpu := selfCPU() - cpu0
	if e := failed.Load(); e != nil {
		return tmeasure{}, *e
	}
	return tmeasure{float64(n**perRun) / elapsed.Seconds(), pct(slices.Concat(lats...), 50), cpu / time.Duration(n**perRun)}, nil
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
