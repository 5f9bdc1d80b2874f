// Command blobs measures large values kept outside the log (package blob,
// engine.Options.BlobThreshold, Atom.PutBlob): issue 41's figures.
//
//	go run ./bench/blobs -dir /work/tmp-blobs -rounds 3
//
// Each measurement runs in a child process of this program (it re-executes
// itself with -child), so that its peak RSS (getrusage's maxrss) is its
// own; a baseline child runs beside it in alternating rounds, and the
// report gives medians:
//
//   - step: one atom whose tool output is -step bytes (default 180 MB),
//     streamed with Atom.PutBlob and committed (fsync on). Baseline: the
//     same bytes written to a plain file and fsynced (the disk's cost),
//     and for RSS an empty store's child (open, one small atom, close).
//   - restart: Open and Run.State of that store, and the first read of
//     the value (streamed to io.Discard); baseline: an empty store's.
//   - verify: offline.Verify (every referenced blob read whole); baseline:
//     the empty store's.
//   - agent: -turns turns (default 1,000) of one Do whose result is -out
//     bytes (default 1 MB, text-like, different per turn) and a commit of
//     it as a tool output, with BlobThreshold 64 KiB: bytes on disk (log,
//     blobs, the rest), the encoded frame, and the restart (Open, State).
//     Baseline: the same agent with BlobThreshold 0 (values inline), which
//     stops when its frame passes engine.MaxSize.
//   - forks: -forks forks (default 100) of a run, each writing the same
//     -forkblob bytes (default 8 MB) with PutBlob: blob files and bytes on
//     disk against one copy per fork.
//
// The content is text-like (words, markup, hex), which s2 compresses about
// as it does web pages and logs.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/offline"
)

var (
	dirFlag  = flag.String("dir", "", "directory for the stores (default: a temporary one, removed after)")
	rounds   = flag.Int("rounds", 3, "alternating rounds of each measurement and its baseline")
	stepSize = flag.Int64("step", 180_000_000, "bytes of the large step's output")
	turns    = flag.Int("turns", 1000, "turns of the agent")
	outSize  = flag.Int("out", 1_000_000, "bytes of each agent turn's tool output")
	forks    = flag.Int("forks", 100, "forks writing the same blob")
	forkBlob = flag.Int("forkblob", 8_000_000, "bytes of the blob every fork writes")
	daemon   = flag.String("continuumd", "", "a continuumd binary: also measure its peak RSS for an upload and a download of the step (go build -o FILE ./cmd/continuumd)")
	child    = flag.String("child", "", "internal: run one measurement in this process")
	store    = flag.String("store", "", "internal: the child's store")
)

func main() {
	flag.Parse()
	if *child != "" {
		runChild(*child, *store)
		return
	}
	dir := *dirFlag
	if dir == "" {
		d, err := os.MkdirTemp("", "blobs-bench-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("# bench/blobs %s, GOMAXPROCS %s, step %d B, %d turns of %d B, %d forks of %d B, %d rounds\n\n",
		time.Now().UTC().Format(time.RFC3339), os.Getenv("GOMAXPROCS"), *stepSize, *turns, *outSize, *forks, *forkBlob, *rounds)

	// The large step, its restart and its verify, beside an empty store's.
	var put, raw, empty, restart, emptyRestart, verify, emptyVerify []result
	for i := range *rounds {
		st := filepath.Join(dir, fmt.Sprint("step-", i))
		es := filepath.Join(dir, fmt.Sprint("empty-", i))
		rf := filepath.Join(dir, fmt.Sprint("raw-", i))
		empty = append(empty, spawn("empty", es))
		put = append(put, spawn("put", st))
		raw = append(raw, spawn("raw", rf))
		emptyRestart = append(emptyRestart, spawn("restart", es))
		restart = append(restart, spawn("restart", st))
		emptyVerify = append(emptyVerify, spawn("verify", es))
		verify = append(verify, spawn("verify", st))
		for _, p := range []string{st, es, rf} {
			os.RemoveAll(p)
		}
	}
	fmt.Println("## A step of", *stepSize, "bytes (PutBlob, commit with fsync)")
	fmt.Println()
	fmt.Println("| measurement | median ms | median peak RSS MiB | RSS above the empty store's, MiB |")
	fmt.Println("| --- | --- | --- | --- |")
	row := func(name string, rs, base []result) {
		d := ""
		if base != nil {
			d = fmt.Sprintf("%.1f", med(rs, rss)-med(base, rss))
		}
		fmt.Printf("| %s | %.1f | %.1f | %s |\n", name, med(rs, ms), med(rs, rss), d)
	}
	row("empty store: open, one small atom, close", empty, nil)
	row("step: open, PutBlob + commit, close", put, empty)
	row("baseline: write + fsync a plain file of the same bytes", raw, nil)
	row("restart of the empty store (Open, State)", emptyRestart, nil)
	row("restart of the step's store (Open, State)", restart, emptyRestart)
	row("verify of the empty store", emptyVerify, nil)
	row("verify of the step's store (reads the blob whole)", verify, emptyVerify)
	fmt.Printf("\nstep: commit of the PutBlob+Commit alone, median %.1f ms (%.0f MB/s); the first read of the value after restart, median %.1f ms\n\n",
		med(put, func(r result) float64 { return r.Commit }), float64(*stepSize)/1e3/med(put, func(r result) float64 { return r.Commit }),
		med(restart, func(r result) float64 { return r.Read }))

	if *daemon != "" {
		var up, idle []daemonResult
		for i := range *rounds {
			idle = append(idle, measureDaemon(filepath.Join(dir, fmt.Sprint("d-idle-", i)), 0))
			up = append(up, measureDaemon(filepath.Join(dir, fmt.Sprint("d-step-", i)), *stepSize))
		}
		dm := func(rs []daemonResult, f func(daemonResult) float64) float64 {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = f(r)
			}
			sort.Float64s(v)
			return v[len(v)/2]
		}
		hwm := func(r daemonResult) float64 { return float64(r.hwmKB) / 1024 }
		fmt.Printf("## continuumd: the step uploaded (chunked) and downloaded over its socket\n\n")
		fmt.Println("| measurement | median upload ms | median download ms | median peak RSS (VmHWM) MiB | above the idle server's, MiB |")
		fmt.Println("| --- | --- | --- | --- | --- |")
		fmt.Printf("| idle server: one small upload and commit | %.1f | %.1f | %.1f | |\n", dm(idle, func(r daemonResult) float64 { return r.upMs }), dm(idle, func(r daemonResult) float64 { return r.downMs }), dm(idle, hwm))
		fmt.Printf("| the step | %.1f | %.1f | %.1f | %.1f |\n\n", dm(up, func(r daemonResult) float64 { return r.upMs }), dm(up, func(r daemonResult) float64 { return r.downMs }), dm(up, hwm), dm(up, hwm)-dm(idle, hwm))
	}

	// The agent, with blobs and inline.
	var agent, agentRestart, inline []result
	for i := range *rounds {
		as := filepath.Join(dir, fmt.Sprint("agent-", i))
		is := filepath.Join(dir, fmt.Sprint("inline-", i))
		agent = append(agent, spawn("agent", as))
		agentRestart = append(agentRestart, spawn("agentrestart", as))
		inline = append(inline, spawn("inline", is))
		os.RemoveAll(as)
		os.RemoveAll(is)
	}
	fmt.Printf("## An agent of %d turns, a %d-byte tool output each\n\n", *turns, *outSize)
	fmt.Println("| store | turns done | median ms | bytes on disk: log | blobs | other | frame (encoded) | restart median ms | restart peak RSS MiB |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	fmt.Printf("| BlobThreshold 64 KiB | %d | %.0f | %d | %d | %d | %d | %.1f | %.1f |\n",
		agent[0].Turns, med(agent, ms), agent[0].Log, agent[0].Blobs, agent[0].Other, agentRestart[0].Frame,
		med(agentRestart, ms), med(agentRestart, rss))
	fmt.Printf("| inline (BlobThreshold 0) | %d, then: %s | %.0f | %d | %d | %d | %d | | |\n\n",
		inline[0].Turns, inline[0].Err, med(inline, ms), inline[0].Log, inline[0].Blobs, inline[0].Other, inline[0].Frame)

	// Dedup across forks.
	var fk []result
	for i := range *rounds {
		fs := filepath.Join(dir, fmt.Sprint("forks-", i))
		fk = append(fk, spawn("forks", fs))
		os.RemoveAll(fs)
	}
	fmt.Printf("## %d forks, each writing the same %d-byte blob\n\n", *forks, *forkBlob)
	fmt.Printf("blob files %d, blob bytes on disk %d (one copy per fork would be %d: %.1fx), median %.0f ms for all forks\n",
		fk[0].Files, fk[0].Blobs, int64(*forks+1)*fk[0].Blobs/max(int64(fk[0].Files), 1), float64(*forks+1)/float64(max(fk[0].Files, 1)), med(fk, ms))
}

// result is what a child prints.
type result struct {
	Ms     float64 `json:"ms"`     // the measured span
	Commit float64 `json:"commit"` // step: PutBlob + Commit
	Read   float64 `json:"read"`   // restart: the first read of the value
	RSSKB  int64   `json:"rss_kb"` // peak RSS
	Turns  int     `json:"turns"`
	Err    string  `json:"err,omitempty"`
	Log    int64   `json:"log"`
	Blobs  int64   `json:"blobs"`
	Other  int64   `json:"other"`
	Files  int     `json:"files"`
	Frame  int     `json:"frame"`
}

func ms(r result) float64  { return r.Ms }
func rss(r result) float64 { return float64(r.RSSKB) / 1024 }

func med(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// spawn runs one measurement in a child process.
func spawn(mode, store string) result {
	cmd := exec.Command(os.Args[0], "-child", mode, "-store", store,
		fmt.Sprint("-step=", *stepSize), fmt.Sprint("-turns=", *turns), fmt.Sprint("-out=", *outSize),
		fmt.Sprint("-forks=", *forks), fmt.Sprint("-forkblob=", *forkBlob))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		log.Fatalf("child %s: %v", mode, err)
	}
	var r result
	if err := json.Unmarshal(out, &r); err != nil {
		log.Fatalf("child %s: %v: %q", mode, err, out)
	}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.RSSKB = ru.Maxrss
		}
	}
	return r
}

// text is a stream of n text-like bytes of seed, generated as read.
type text struct {
	rng  *rand.Rand
	left int64
	buf  bytes.Buffer
}

var words = []string{"alpha ", "beta ", "gamma ", "delta ", "<div class=\"row\">", "</div>\n", "{\"key\":", "42}, ", "lorem ", "ipsum "}

func newText(seed uint64, n int64) *text { return &text{rng: rand.New(rand.NewPCG(seed, 41)), left: n} }

func (t *text) Read(p []byte) (int, error) {
	if t.left == 0 {
		return 0, io.EOF
	}
	for int64(t.buf.Len()) < min(int64(len(p)), t.left) {
		t.buf.WriteString(words[t.rng.IntN(len(words))])
		if t.rng.IntN(8) == 0 {
			fmt.Fprintf(&t.buf, "%x ", t.rng.Uint64())
		}
	}
	n := int(min(int64(len(p)), t.left))
	copy(p, t.buf.Next(n))
	t.left -= int64(n)
	return n, nil
}

func textBytes(seed uint64, n int) []byte {
	b, _ := io.ReadAll(newText(seed, int64(n)))
	return b
}

func opts(threshold int) *engine.Options {
	return &engine.Options{BlobThreshold: threshold, Logger: slog.New(slog.DiscardHandler)}
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// du returns the bytes of the log, of the blobs and of the rest of store.
func du(store string) (logB, blobs, other int64, files int) {
	_ = filepath.Walk(store, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(store, p)
		switch {
		case strings.HasPrefix(rel, "wal"+string(filepath.Separator)):
			logB += info.Size()
		case strings.HasPrefix(rel, blob.Dir+string(filepath.Separator)):
			blobs += info.Size()
			files++
		default:
			other += info.Size()
		}
		return nil
	})
	return
}

func runChild(mode, store string) {
	ctx := context.Background()
	var r result
	start := time.Now()
	switch mode {
	case "empty", "put":
		db, err := engine.Open(store, opts(64<<10))
		must(err)
		run, err := db.Run(ctx, "step")
		must(err)
		a, err := run.Begin(ctx)
		must(err)
		d := new(frame.Delta).SetObjective("one large step")
		t0 := time.Now()
		if mode == "put" {
			ref, err := a.PutBlob(ctx, "text/html", newText(1, *stepSize))
			must(err)
			d.Set("out", []byte(blob.Value(ref)))
		}
		must(a.Commit(ctx, d))
		r.Commit = msSince(t0)
		must(db.Close())
	case "raw":
		f, err := os.Create(store)
		must(err)
		_, err = io.Copy(f, newText(1, *stepSize))
		must(err)
		must(f.Sync())
		must(f.Close())
	case "restart":
		db, err := engine.Open(store, opts(64<<10))
		must(err)
		run, err := db.Run(ctx, "step")
		must(err)
		st := run.State()
		r.Ms = msSince(start)
		t0 := time.Now()
		rc, err := run.OpenValue(ctx, st.Memory["out"])
		must(err)
		_, err = io.Copy(io.Discard, rc)
		must(err)
		rc.Close()
		r.Read = msSince(t0)
		must(db.Close())
		out(r)
		return
	case "verify":
		rep, err := offline.Verify(ctx, store, nil)
		must(err)
		if !rep.OK {
			log.Fatalf("verify: %+v", rep.Failures)
		}
	case "agent", "inline":
		th := 64 << 10
		if mode == "inline" {
			th = 0
		}
		db, err := engine.Open(store, opts(th))
		must(err)
		run, err := db.Run(ctx, "agent")
		must(err)
		for i := range *turns {
			a, err := run.Begin(ctx)
			must(err)
			act := ledger.Action{Tool: "fetch", Args: fmt.Appendf(nil, `{"url":"https://example.com/%d"}`, i)}
			res, err := a.Do(ctx, act, func(context.Context, string) ([]byte, error) { return textBytes(uint64(100+i), *outSize), nil })
			if err == nil {
				id := fmt.Sprint("call-", i)
				err = a.Commit(ctx, new(frame.Delta).AddPending(frame.Pending{CallID: id, Tool: "fetch"}).ToolOutput(id, "fetch", res))
			}
			if err != nil {
				r.Err = firstLine(err.Error())
				break
			}
			r.Turns++
		}
		r.Frame = frame.EncodedFrameSize(run.State())
		must(db.Close())
		r.Ms = msSince(start)
		r.Log, r.Blobs, r.Other, r.Files = du(store)
		out(r)
		return
	case "agentrestart":
		db, err := engine.Open(store, opts(64<<10))
		must(err)
		run, err := db.Run(ctx, "agent")
		must(err)
		st := run.State()
		r.Ms = msSince(start)
		r.Frame = frame.EncodedFrameSize(st)
		must(db.Close())
		out(r)
		return
	case "forks":
		db, err := engine.Open(store, opts(64<<10))
		must(err)
		parent, err := db.Run(ctx, "parent")
		must(err)
		put := func(run *engine.Run) {
			a, err := run.Begin(ctx)
			must(err)
			ref, err := a.PutBlob(ctx, "application/pdf", newText(7, int64(*forkBlob)))
			must(err)
			must(a.Commit(ctx, new(frame.Delta).Set("doc", []byte(blob.Value(ref)))))
		}
		put(parent)
		for i := range *forks {
			f, err := db.Fork(ctx, "parent", 1, fmt.Sprint("fork-", i))
			must(err)
			put(f)
		}
		must(db.Close())
		r.Ms = msSince(start)
		r.Log, r.Blobs, r.Other, r.Files = du(store)
		out(r)
		return
	default:
		log.Fatalf("unknown child mode %q", mode)
	}
	r.Ms = msSince(start)
	out(r)
}

func firstLine(s string) string {
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1e3 }

func out(r result) { must(json.NewEncoder(os.Stdout).Encode(r)) }

// daemonResult is one continuumd measurement.
type daemonResult struct {
	upMs, downMs float64
	hwmKB        int64
}

// measureDaemon starts continuumd on store, uploads size bytes (at least
// one) as a blob of an atom with chunked transfer encoding, commits a
// reference to it, downloads it, and reads the server's peak RSS from
// /proc before stopping it.
func measureDaemon(store string, size int64) daemonResult {
	size = max(size, 1)
	sock := store + ".sock"
	cmd := exec.Command(*daemon, "--store", store, "--socket", sock, "--log-level", "warn")
	cmd.Stderr = os.Stderr
	must(cmd.Start())
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		os.RemoveAll(store)
	}()
	cl := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	for i := 0; ; i++ {
		if resp, err := cl.Get("http://d/v1/health"); err == nil {
			resp.Body.Close()
			break
		}
		if i > 500 {
			log.Fatal("continuumd did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	call := func(method, path string, body io.Reader, into any) {
		req, err := http.NewRequest(method, "http://d"+path, body)
		must(err)
		resp, err := cl.Do(req)
		must(err)
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			b, _ := io.ReadAll(resp.Body)
			log.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		if into != nil {
			must(json.NewDecoder(resp.Body).Decode(into))
		} else {
			_, _ = io.Copy(io.Discard, resp.Body)
		}
	}
	call("PUT", "/v1/runs/step", nil, nil)
	var begin struct{ Attempt string }
	call("POST", "/v1/runs/step/attempts", strings.NewReader("{}"), &begin)
	att := "/v1/runs/step/attempts/" + begin.Attempt
	var r daemonResult
	t0 := time.Now()
	var ref struct {
		Value, Hash string
		Size        int64
	}
	call("POST", att+"/blobs", io.NopCloser(newText(1, size)), &ref) // io.NopCloser hides the length: chunked
	r.upMs = msSince(t0)
	b, err := json.Marshal(map[string]any{"delta": []map[string]any{{"op": "set", "key": "out", "value": ref.Value}}})
	must(err)
	call("POST", att+"/commit", bytes.NewReader(b), nil)
	t0 = time.Now()
	call("GET", fmt.Sprintf("/v1/runs/step/blobs/%s/%d", ref.Hash, ref.Size), nil, nil)
	r.downMs = msSince(t0)
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	must(err)
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &r.hwmKB)
		}
	}
	return r
}
