package main

// The server side of the benchmark: continuumd started as a child, its
// latency and throughput over the wire, and a bare HTTP server as the floor.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/continuumdb/continuum/internal/wireframe"
)

// server is a continuumd process on a store.
type server struct {
	cmd    *exec.Cmd
	sock   string
	tcp    string
	token  string
	client *http.Client
	base   string
	// ride: the atom in 2 requests (begin carrying call 0, the outcome
	// carrying the commit) instead of 4.
	ride bool
}

// how is how a kind reaches the server: the binary, and the client's
// protocol.
type how struct {
	bin  string
	tcp  bool // loopback TCP instead of the Unix socket
	ride bool // 2 requests per atom instead of 4
	h2c  bool // HTTP/2 without TLS (the server runs with --h2c)
	// frames: continuum-frames/1 (internal/wireframe) instead of HTTP;
	// the Python and TypeScript clients are told by
	// CONTINUUM_BENCH_TRANSPORT.
	frames bool
	name   string
}

// transport is the name of h's transport for the clients' scripts.
func (h how) transport() string {
	if h.frames {
		return "frames"
	}
	return "http"
}

func startServer(h how, dir string, sync bool) (*server, error) {
	bin, tcp := h.bin, h.tcp
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &server{sock: filepath.Join(dir, "s.sock"), token: "bench-token-0123456789abcdef"}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(s.token), 0o600); err != nil {
		return nil, err
	}
	argv := []string{"--store", filepath.Join(dir, "store"), "--socket", s.sock, "--log-level", "warn"}
	if !sync {
		argv = append(argv, "--unsafe-no-sync")
	}
	if h.h2c {
		argv = append(argv, "--h2c")
	}
	if *profileDir != "" {
		prefix := filepath.Join(*profileDir, strings.NewReplacer(" ", "-", ",", "").Replace(h.name)+"-"+filepath.Base(dir))
		argv = append(argv, "--cpu-profile", prefix+".pprof")
		if *contention {
			argv = append(argv, "--block-profile", prefix+".block.pprof", "--mutex-profile", prefix+".mutex.pprof")
		}
	}
	if tcp {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		s.tcp = l.Addr().String()
		l.Close()
		argv = append(argv, "--listen", s.tcp, "--token-file", tokenFile)
	}
	s.cmd = exec.Command(bin, argv...)
	s.cmd.Stderr = os.Stderr
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	if h.h2c {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	s.base = "http://continuumd"
	if tcp {
		s.base = "http://" + s.tcp
	} else {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", s.sock)
		}
	}
	s.client = &http.Client{Transport: tr, Timeout: time.Minute}
	if h.frames {
		s.client.Transport = &wireframe.Transport{Conns: *framesConns, Dial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			if tcp {
				return d.DialContext(ctx, "tcp", s.tcp)
			}
			return d.DialContext(ctx, "unix", s.sock)
		}}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := s.do("GET", "/v1/health", nil); err == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("continuumd did not answer")
		}
	}
}

func latencyServer(h how, dir string, sync bool) (measure, error) {
	s, err := startServer(h, dir, sync)
	if err != nil {
		return measure{}, err
	}
	s.ride = h.ride
	defer s.stop()
	if _, err := s.do("PUT", "/v1/runs/lat", nil); err != nil {
		return measure{}, err
	}
	out := make([]time.Duration, 0, *atoms)
	var cpu0 time.Duration
	for i := 0; i < *atoms+*atoms/10; i++ {
		if i == *atoms/10 {
			cpu0 = selfCPU() + procCPU(s.cmd.Process.Pid)
		}
		t0 := time.Now()
		if err := s.atom("lat"); err != nil {
			return measure{}, err
		}
		if i >= *atoms/10 {
			out = append(out, time.Since(t0))
		}
	}
	return measure{out, selfCPU() + procCPU(s.cmd.Process.Pid) - cpu0}, nil
}

// throughputServer runs the atoms of n runs through continuumd, from Go
// goroutines or from Python or TypeScript client processes that start
// together.
func throughputServer(h how, dir, clients string, n int) (tmeasure, error) {
	s, err := startServer(h, dir, true)
	if err != nil {
		return tmeasure{}, err
	}
	defer s.stop()
	for i := 0; i < n; i++ {
		if _, err := s.do("PUT", fmt.Sprint("/v1/runs/t", i), nil); err != nil {
			return tmeasure{}, err
		}
	}
	s.ride = h.ride
	if clients == "go" {
		var wg sync.WaitGroup
		var failed atomic.Pointer[error]
		lats := make([][]time.Duration, n)
		cpu0 := selfCPU() + procCPU(s.cmd.Process.Pid)
		t0 := time.Now()
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < *perRun; k++ {
					t1 := time.Now()
					if err := s.atom(fmt.Sprint("t", i)); err != nil {
						failed.Store(&err)
						return
					}
					lats[i] = append(lats[i], time.Since(t1))
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(t0)
		cpu := selfCPU() + procCPU(s.cmd.Process.Pid) - cpu0
		if e := failed.Load(); e != nil {
			return tmeasure{}, *e
		}
		return tmeasure{float64(n**perRun) / elapsed.Seconds(), pct(slices.Concat(lats...), 50), cpu / time.Duration(n**perRun)}, nil
	}
	// Python and TypeScript: each process connects, opens its run, says
	// READY, and waits for a line on stdin; the clock runs from that line
	// to the last DONE. DONE is followed by each atom's wall time in µs.
	procs := make([]*exec.Cmd, n)
	stdins := make([]io.WriteCloser, n)
	outs := make([]*bufio.Reader, n)
	for i := range procs {
		var cmd *exec.Cmd
		if clients == "typescript" || clients == "typescript-before" {
			script := filepath.Join(*repoFlag, "bench", "continuumd", "tsclient.mjs")
			pkg := filepath.Join(*repoFlag, "clients", "typescript")
			if clients == "typescript-before" {
				pkg = *nodeBefore
			}
			cmd = exec.Command(*node, script, pkg, s.sock, fmt.Sprint("t", i), strconv.Itoa(*perRun))
			cmd.Env = append(os.Environ(), "CONTINUUM_BENCH_TRANSPORT="+h.transport())
		} else {
			script := filepath.Join(*repoFlag, "bench", "continuumd", "pyclient.py")
			cmd = exec.Command(*python, script, s.sock, fmt.Sprint("t", i), strconv.Itoa(*perRun))
			src := filepath.Join(*repoFlag, "clients", "python", "src")
			if clients == "python-before" {
				src = *pythonBefore
			}
			cmd.Env = append(os.Environ(), "PYTHONPATH="+src, "PYTHONDONTWRITEBYTECODE=1", "CONTINUUM_BENCH_TRANSPORT="+h.transport())
		}
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return tmeasure{}, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return tmeasure{}, err
		}
		if err := cmd.Start(); err != nil {
			return tmeasure{}, err
		}
		procs[i], stdins[i], outs[i] = cmd, in, bufio.NewReader(out)
	}
	for i, r := range outs {
		line, err := r.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "READY" {
			return tmeasure{}, fmt.Errorf("%s client %d: %q %v", clients, i, line, err)
		}
	}
	// CPU: the server's and each client process's, from GO to its DONE
	// (a client is idle after DONE, waiting for its stdin to close).
	cpu := -procCPU(s.cmd.Process.Pid)
	for _, p := range procs {
		cpu -= procCPU(p.Process.Pid)
	}
	t0 := time.Now()
	for _, in := range stdins {
		io.WriteString(in, "GO\n")
	}
	var lats []time.Duration
	for i, r := range outs {
		line, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "DONE") {
			return tmeasure{}, fmt.Errorf("%s client %d: %q %v", clients, i, line, err)
		}
		cpu += procCPU(procs[i].Process.Pid)
		for _, f := range strings.Fields(line)[1:] {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return tmeasure{}, fmt.Errorf("%s client %d: atom time %q: %v", clients, i, f, err)
			}
			lats = append(lats, time.Duration(v*1e3))
		}
	}
	elapsed := time.Since(t0)
	cpu += procCPU(s.cmd.Process.Pid)
	for i, p := range procs {
		stdins[i].Close()
		if err := p.Wait(); err != nil {
			return tmeasure{}, fmt.Errorf("%s client %d: %v", clients, i, err)
		}
	}
	if len(lats) != n**perRun {
		return tmeasure{}, fmt.Errorf("%s clients: %d atom times for %d atoms", clients, len(lats), n**perRun)
	}
	return tmeasure{float64(n**perRun) / elapsed.Seconds(), pct(lats, 50), cpu / time.Duration(n**perRun)}, nil
}

// serveHello is the floor of any HTTP protocol on this machine: a handler
// that answers a small JSON object, in its own process, on a Unix socket.
func serveHello(sock string) {
	os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		log.Fatal(err)
	}
	body := []byte(`{"call":0,"status":"done","result":"ok"}` + "\n")
	http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
}

// serveHelloFrames is serveHello over continuum-frames/1: each frame
// answered with the same small JSON object as it is read, by the
// connection's reader itself (no goroutine in between): the floor of
// frames between two processes.
func serveHelloFrames(sock string) {
	os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		log.Fatal(err)
	}
	body := []byte(`{"call":0,"status":"done","result":"ok"}` + "\n")
	head := wireframe.AppendAnswerHead(nil, 200, http.Header{"Content-Type": {"application/json"}})
	for {
		c, err := l.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			defer c.Close()
			br := bufio.NewReaderSize(c, 64<<10)
			var p [len(wireframe.Preface)]byte
			if _, err := io.ReadFull(br, p[:]); err != nil || string(p[:]) != wireframe.Preface {
				return
			}
			w := wireframe.NewWriter(c, 0, nil)
			if w.Raw([]byte(wireframe.Preface)) != nil {
				return
			}
			var fixed [wireframe.FixedLen]byte
			for {
				if _, err := io.ReadFull(br, fixed[:]); err != nil {
					return
				}
				n, id, _ := wireframe.Fixed(fixed[:])
				if n < 8 {
					return
				}
				if _, err := br.Discard(int(n - 8)); err != nil {
					return
				}
				if w.Frame(id, head, body) != nil {
					return
				}
			}
		}()
	}
}

// latencyHello times 4 round trips (the requests of one atom, with bodies
// of their sizes) to serveHello's process: what the HTTP stack and two
// processes cost, with no server work.
func latencyHello(dir string, frames bool) (measure, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return measure{}, err
	}
	sock := filepath.Join(dir, "h.sock")
	cmd := exec.Command(os.Args[0], "-serve-hello", sock)
	if frames {
		cmd = exec.Command(os.Args[0], "-serve-hello-frames", sock)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return measure{}, err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	s := &server{sock: sock, base: "http://hello", client: &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}}
	if frames {
		s.client.Transport = &wireframe.Transport{Dial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := s.do("GET", "/", nil); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return measure{}, fmt.Errorf("the hello server did not answer")
		}
	}
	out := make([]time.Duration, 0, *atoms)
	var cpu0 time.Duration
	for i := 0; i < *atoms+*atoms/10; i++ {
		if i == *atoms/10 {
			cpu0 = selfCPU() + procCPU(cmd.Process.Pid)
		}
		t0 := time.Now()
		for _, b := range []any{map[string]any{}, map[string]any{"tool": "deploy", "args": json.RawMessage(args)},
			map[string]any{"result": string(result)}, map[string]any{"delta": deltaOps("1")}} {
			if _, err := s.do("POST", "/", b); err != nil {
				return measure{}, err
			}
		}
		if i >= *atoms/10 {
			out = append(out, time.Since(t0))
		}
	}
	return measure{out, selfCPU() + procCPU(cmd.Process.Pid) - cpu0}, nil
}

func (s *server) stop() {
	s.cmd.Process.Signal(os.Interrupt)
	s.cmd.Wait()
}

func (s *server) do(method, path string, body any) (map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		return nil, err
	}
	if s.tcp != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("%s %s: %v: %q", method, path, err, raw)
	}
	if resp.StatusCode >= 400 {
		return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return out, nil
}

// atom is one atom over the wire: begin, call 0 (execute), outcome,
// commit; with s.ride in 2 requests: begin with call 0, the outcome with
// the commit.
func (s *server) atom(run string) error {
	if s.ride {
		b, err := s.do("POST", "/v1/runs/"+run+"/attempts", map[string]any{"call": map[string]any{"tool": "deploy", "args": json.RawMessage(args)}})
		if err != nil {
			return err
		}
		if c, _ := b["call"].(map[string]any); c["status"] != "execute" {
			return fmt.Errorf("begin with call 0: %v", b)
		}
		p := "/v1/runs/" + run + "/attempts/" + b["attempt"].(string)
		o, err := s.do("POST", p+"/calls/0/outcome", map[string]any{"result": string(result), "commit": map[string]any{"delta": deltaOps(fmt.Sprint(b["seq"]))}})
		if err != nil {
			return err
		}
		if o["commit"] == nil {
			return fmt.Errorf("outcome with the commit: %v", o)
		}
		return nil
	}
	b, err := s.do("POST", "/v1/runs/"+run+"/attempts", map[string]any{})
	if err != nil {
		return err
	}
	p := "/v1/runs/" + run + "/attempts/" + b["attempt"].(string)
	c, err := s.do("POST", p+"/calls/0", map[string]any{"tool": "deploy", "args": json.RawMessage(args)})
	if err != nil {
		return err
	}
	if c["status"] != "execute" {
		return fmt.Errorf("call: %v", c)
	}
	if _, err := s.do("POST", p+"/calls/0/outcome", map[string]any{"result": string(result)}); err != nil {
		return err
	}
	_, err = s.do("POST", p+"/commit", map[string]any{"delta": deltaOps(fmt.Sprint(b["seq"]))})
	return err
}
