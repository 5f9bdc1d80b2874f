//go:build linux

// Command longrun measures one long run (issue 16, goals 6 and 7): a run
// of many atoms, each appending one message to the conversation (the
// agent never compacts its context, so the frame grows with every atom).
// It reports memory (RSS, heap) against the live frame, the bytes on disk
// by kind and the bytes written to the device against the store's final
// size, State() with the frame in memory, and, in a fresh process after a
// reopen, the first State(), StateAt of the last seq and StateAt of seqs
// spread over the history.
//
//	go run ./bench/longrun -atoms 200000 -msg 200 -text random -dir /work/tmp-bench/longrun
//
// -text random draws messages of random letters (incompressible but for
// the alphabet), -text agent sentences of agent-like text
// (internal/agenttext, compressible). The store is built with NoSync
// (durability is not what is measured) and default options otherwise.
// The reopen phase runs in a child process (the same binary, -phase
// reopen), so its RSS and timings are those of a restart.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/agenttext"
)

var (
	atomsFlag = flag.Int("atoms", 200000, "atoms of the run")
	msgFlag   = flag.Int("msg", 200, "bytes of each atom's message")
	textFlag  = flag.String("text", "random", "random (random letters) or agent (agent-like sentences)")
	dirFlag   = flag.String("dir", "", "directory of the store (default: a temporary one, removed after)")
	phaseFlag = flag.String("phase", "build", "build (then a child reopens), or reopen (the child)")
	samples   = flag.Int("samples", 20, "StateAt calls at seqs spread over the history, after the reopen")
	profile   = flag.String("cpuprofile", "", "write a CPU profile of the reopen phase to this file")
	heapProf  = flag.String("memprofile", "", "write a heap profile (in use after a GC) at the end of the build, before Close, to this file")
)

const runID = "long"

func main() {
	flag.Parse()
	log.SetFlags(0)
	dir := *dirFlag
	if *phaseFlag == "reopen" {
		reopen(dir)
		return
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "longrun-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	store := filepath.Join(dir, "store")
	if err := os.RemoveAll(store); err != nil {
		log.Fatal(err)
	}
	build(store)
	cmd := exec.Command(os.Args[0], "-phase", "reopen", "-dir", store, "-samples", strconv.Itoa(*samples), "-cpuprofile", *profile)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatal(err)
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func build(store string) {
	ctx := context.Background()
	written0 := deviceWrites()
	start := time.Now()
	db, err := engine.Open(store, &engine.Options{NoSync: true, Logger: quiet()})
	if err != nil {
		log.Fatal(err)
	}
	run, err := db.Run(ctx, runID)
	if err != nil {
		log.Fatal(err)
	}
	next := messages(*textFlag, *msgFlag)
	for i := 0; i < *atomsFlag; i++ {
		a, err := run.Begin(ctx)
		if err != nil {
			log.Fatal(err)
		}
		role := frame.RoleUser
		if i%2 == 1 {
			role = frame.RoleAssistant
		}
		if err := a.Commit(ctx, new(frame.Delta).AppendMessage(frame.Message{Role: role, Content: next()})); err != nil {
			log.Fatal(err)
		}
	}
	buildTime := time.Since(start)
	var times []time.Duration
	var f *frame.Frame
	for range 5 {
		t0 := time.Now()
		f = run.State()
		times = append(times, time.Since(t0))
	}
	if f == nil {
		log.Fatal("State returned nil")
	}
	live := frame.EncodedFrameSize(f)
	compressed := len(frame.NewCompressor(nil).CompressWith(nil, frame.AppendFrame(nil, f), frame.CodecS2, 0))
	f = nil
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, peak := rssNow(), rssPeak()
	if *heapProf != "" {
		writeHeapProfile(*heapProf)
	}
	t0 := time.Now()
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
	closeTime := time.Since(t0)
	written := deviceWrites() - written0
	sizes := diskBytes(store)

	fmt.Printf("longrun: one run of %d atoms, one %d-byte %s message each; %s\n\n", *atomsFlag, *msgFlag, *textFlag, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Printf("| measure | value |\n| --- | ---: |\n")
	row := func(k, v string) { fmt.Printf("| %s | %s |\n", k, v) }
	row("build (NoSync)", buildTime.Round(time.Millisecond).String())
	row("live frame, encoded", mb(int64(live)))
	row("live frame, s2-compressed", mb(int64(compressed)))
	row("RSS after the build (peak)", fmt.Sprintf("%s (%s)", mb(rss), mb(peak)))
	row("RSS / live frame", fmt.Sprintf("%.2fx", float64(rss)/float64(live)))
	row("heap after a GC", mb(int64(ms.HeapAlloc)))
	row("State(), frame in memory (median of 5)", dur(median(times)))
	row("Close", dur(closeTime))
	total := int64(0)
	for _, k := range slices.Sorted(maps.Keys(sizes)) {
		total += sizes[k]
	}
	row("store on disk (allocated)", mb(total))
	for _, k := range slices.Sorted(maps.Keys(sizes)) {
		row("  "+k, mb(sizes[k]))
	}
	row("snapshots / compressed frame", fmt.Sprintf("%.2fx", float64(sizes["snapshots"])/float64(compressed)))
	row("disk bytes per atom", fmt.Sprintf("%.0f", float64(total)/float64(*atomsFlag)))
	if written >= 0 {
		row("bytes written to the device (build and Close)", mb(written))
		row("written / final store size", fmt.Sprintf("%.2fx", float64(written)/float64(total)))
	}
}

func reopen(store string) {
	ctx := context.Background()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	t0 := time.Now()
	db, err := engine.Open(store, &engine.Options{Logger: quiet()})
	if err != nil {
		log.Fatal(err)
	}
	run, err := db.Run(ctx, runID)
	if err != nil {
		log.Fatal(err)
	}
	openTime := time.Since(t0)
	t0 = time.Now()
	f, err := run.StateE()
	if err != nil {
		log.Fatal(err)
	}
	firstState := time.Since(t0)
	live := frame.EncodedFrameSize(f)
	f = nil
	last := run.LastSeq()
	t0 = time.Now()
	if _, err := run.StateAt(ctx, last-1); err != nil {
		log.Fatal(err)
	}
	lastAt := time.Since(t0)
	rng := rand.New(rand.NewPCG(1, 2))
	var at []time.Duration
	for range *samples {
		seq := 1 + uint64(rng.Int64N(int64(last)))
		t0 := time.Now()
		if _, err := run.StateAt(ctx, seq); err != nil {
			log.Fatal(err)
		}
		at = append(at, time.Since(t0))
	}
	runtime.GC()
	rss := rssNow()
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
	row := func(k, v string) { fmt.Printf("| %s | %s |\n", k, v) }
	row("reopen: Open + Run", dur(openTime))
	row("reopen: first State()", fmt.Sprintf("%s (%.0f MB/s of encoded frame)", dur(firstState), float64(live)/firstState.Seconds()/1e6))
	row(fmt.Sprintf("reopen: StateAt(%d)", last-1), dur(lastAt))
	slices.Sort(at)
	row(fmt.Sprintf("reopen: StateAt of %d random seqs, median / max", len(at)), dur(median(at))+" / "+dur(at[len(at)-1]))
	row("reopen: RSS after them", mb(rss))
}

// messages returns a generator of messages of about n bytes.
func messages(kind string, n int) func() string {
	switch kind {
	case "random":
		rng := rand.New(rand.NewPCG(7, 8))
		const letters = "abcdefghijklmnopqrstuvwxyz      "
		b := make([]byte, n)
		return func() string {
			for i := range b {
				b[i] = letters[rng.IntN(len(letters))]
			}
			return string(b)
		}
	case "agent":
		g := agenttext.New(7)
		return func() string { return g.Message(n) }
	}
	log.Fatalf("-text %q: want random or agent", kind)
	return nil
}

// diskBytes returns the allocated bytes of the store's files, by kind.
func diskBytes(store string) map[string]int64 {
	out := map[string]int64{}
	err := filepath.WalkDir(store, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			return err
		}
		rel, _ := filepath.Rel(store, path)
		kind, _, _ := strings.Cut(rel, string(filepath.Separator))
		if strings.HasPrefix(kind, "ledger-") {
			kind = "ledger table"
		}
		out[kind] += st.Blocks * 512
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	return out
}

// deviceWrites is the bytes this process caused to be written to the
// storage device so far (/proc/self/io write_bytes), or -1.
func deviceWrites() int64 {
	return procField("/proc/self/io", "write_bytes:", 1)
}

func rssNow() int64 { return procField("/proc/self/status", "VmRSS:", 1024) }

func rssPeak() int64 { return procField("/proc/self/status", "VmHWM:", 1024) }

func procField(path, key string, unit int64) int64 {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			v, err := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			if err != nil {
				return -1
			}
			return v * unit
		}
	}
	return -1
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

func dur(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%.0f µs", float64(d)/1e3)
	}
	return fmt.Sprintf("%.1f ms", float64(d)/1e6)
}

// writeHeapProfile writes the heap profile of what is in use now.
func writeHeapProfile(name string) {
	f, err := os.Create(name)
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}
