package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/continuumdb/continuum/internal/downstream"
)

// The harness runs the agent as a child process, kills it (SIGKILL) at
// chosen points, and starts it again until it finishes. It serves the
// shop (internal/downstream, which counts the effects each idempotency
// key took) and, unless a real endpoint is given, the stub model, in its
// own process: they outlive the agent, as the real world does.
//
// A kill point names a moment of a step:
//
//	model:N        the stub received step N's model call and has not
//	               answered (the call is not certified)
//	before:TOOL#K  the shop received the K-th call of TOOL of the whole run
//	               and it has not taken effect
//	after:TOOL#K   that call took effect and the agent has not heard back
//	               (the call is in doubt)
//	commit:N       step N is about to commit (every call of it certified)
//
// The harness kills at its points in order, one per process: the first
// process dies at the first point, the second at the second, and so on; a
// process whose point never comes runs to the end.

// maxIncarnations bounds the processes of one harness run.
const maxIncarnations = 32

type harness struct {
	exe      string   // the program to start as the agent
	env      []string // extra environment for it
	dir      string   // the store
	modelURL string   // "" : the stub
	model    string
	key      string // the model's API key, passed in the environment
	points   []string
	out      io.Writer // narration; nil for none
	stderr   io.Writer // the agent's stderr

	mu struct {
		sync.Mutex
		child  *exec.Cmd
		exited chan struct{} // closed once child has exited
		next   int           // index in points of the point to kill at
		killed []string      // the points reached, in order
		calls  map[string]int
	}
}

// outcome is what a harness run saw.
type outcome struct {
	processes int
	killed    []string // points the agent was killed at, in order
	status    string   // how the run ended
	result    string
	lastSeq   uint64
	effects   []downstream.Effect
}

func (h *harness) say(format string, args ...any) {
	if h.out != nil {
		fmt.Fprintf(h.out, format, args...)
	}
}

func (h *harness) run(ctx context.Context) (*outcome, error) {
	h.mu.calls = map[string]int{}
	shop, err := downstream.Start(&downstream.Options{
		Result: shopResult,
		BeforeEffect: func(c downstream.Call) error {
			h.mu.Lock()
			h.mu.calls[c.Tool]++
			k := h.mu.calls[c.Tool]
			h.mu.Unlock()
			if h.killAt(fmt.Sprintf("before:%s#%d", c.Tool, k)) {
				return errors.New("the caller is gone")
			}
			return nil
		},
		AfterEffect: func(c downstream.Call) {
			h.mu.Lock()
			k := h.mu.calls[c.Tool]
			h.mu.Unlock()
			h.killAt(fmt.Sprintf("after:%s#%d", c.Tool, k))
		},
	})
	if err != nil {
		return nil, err
	}
	defer shop.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen on 127.0.0.1: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook", func(w http.ResponseWriter, r *http.Request) {
		if h.killAt(r.URL.Query().Get("point")) {
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.Handle("POST /v1/chat/completions", stubModel(func(step int) bool {
		return !h.killAt(fmt.Sprintf("model:%d", step))
	}))
	hsrv := &http.Server{Handler: mux}
	go hsrv.Serve(ln)
	defer hsrv.Close()
	base := "http://" + ln.Addr().String()
	modelURL, model := h.modelURL, h.model
	if modelURL == "" {
		modelURL = base + "/v1"
	}

	out := &outcome{}
	for {
		if out.processes == maxIncarnations {
			return nil, fmt.Errorf("the agent did not finish in %d processes", maxIncarnations)
		}
		out.processes++
		h.say("process %d:\n", out.processes)
		done, killed, err := h.child(ctx, modelURL, model, shop.URL(), base, out)
		if err != nil {
			return nil, err
		}
		if killed != "" {
			h.say("  >>> SIGKILL at %s: %s\n", killed, describePoint(killed))
			continue
		}
		if !done {
			return nil, fmt.Errorf("process %d exited without finishing the run", out.processes)
		}
		break
	}
	h.mu.Lock()
	out.killed = append([]string(nil), h.mu.killed...)
	if h.mu.next < len(h.points) {
		h.say("  (not reached: %s)\n", strings.Join(h.points[h.mu.next:], ", "))
	}
	h.mu.Unlock()
	out.effects = shop.Effects()
	return out, nil
}

func describePoint(p string) string {
	switch {
	case strings.HasPrefix(p, "model:"):
		return "the model's answer was never heard (the call is not certified)"
	case strings.HasPrefix(p, "before:"):
		return "the call reached the shop, before its effect"
	case strings.HasPrefix(p, "after:"):
		return "the call took effect, the agent never heard back (it is in doubt)"
	case strings.HasPrefix(p, "commit:"):
		return "every call of the step is certified, the step is not committed"
	}
	return p
}

// killAt kills the running agent if p is the point to kill at, and waits
// until it is gone, so that the reply in progress never reaches it.
func (h *harness) killAt(p string) bool {
	h.mu.Lock()
	if h.mu.child == nil || h.mu.next >= len(h.points) || h.points[h.mu.next] != p {
		h.mu.Unlock()
		return false
	}
	cmd, exited := h.mu.child, h.mu.exited
	h.mu.next++
	h.mu.killed = append(h.mu.killed, p)
	h.mu.child = nil
	h.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil {
		fmt.Fprintf(h.stderr, "llmagent: kill the agent: %v\n", err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		fmt.Fprintf(h.stderr, "llmagent: the agent did not exit 30 s after SIGKILL\n")
	}
	return true
}

// child runs one agent process to its end. It returns whether the run
// finished, or the point it was killed at.
func (h *harness) child(ctx context.Context, modelURL, model, shopURL, hookURL string, out *outcome) (bool, string, error) {
	cmd := exec.CommandContext(ctx, h.exe, agentCmd, "--dir", h.dir, "--url", modelURL, "--model", model,
		"--downstream", shopURL, "--hook", hookURL)
	cmd.Env = append(append(os.Environ(), h.env...), agentEnv+"="+h.key)
	cmd.Stderr = h.stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return false, "", err
	}
	exited := make(chan struct{})
	// Under the lock: a point the agent reaches at once waits for it.
	h.mu.Lock()
	if err := cmd.Start(); err != nil {
		h.mu.Unlock()
		return false, "", fmt.Errorf("start the agent %s: %w", h.exe, err)
	}
	h.mu.child, h.mu.exited = cmd, exited
	nKilled := len(h.mu.killed)
	h.mu.Unlock()

	done := false
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, kv, ok := parseEvent(sc.Text())
		if !ok {
			continue
		}
		switch name {
		case "open":
			if kv["last_seq"] == float64(0) && kv["interrupted"] == float64(0) {
				h.say("  opened the store: a new run\n")
			} else {
				h.say("  opened the store: %v steps committed, step %v was interrupted\n", kv["last_seq"], kv["interrupted"])
			}
		case "step":
			what := fmt.Sprintf("calls %v", kv["calls"])
			if kv["final"] == true {
				what = "the final answer"
			}
			again := ""
			if kv["interrupted"] == true {
				again = " (resumed: calls certified before the kill come from the ledger)"
			}
			h.say("  step %v: %s%s\n", kv["seq"], what, again)
		case "reconciled":
			res := "no effect: called again under the same key"
			if kv["happened"] == true {
				res = "it took effect: its result recorded, not called again"
			}
			h.say("  reconciled %v (in doubt): %s\n", kv["tool"], res)
		case "done":
			done = true
			out.status, _ = kv["status"].(string)
			out.result, _ = kv["result"].(string)
			if n, ok := kv["last_seq"].(float64); ok {
				out.lastSeq = uint64(n)
			}
			h.say("  run %s after %d steps: %s\n", out.status, out.lastSeq, out.result)
		}
	}
	werr := cmd.Wait()
	close(exited)
	h.mu.Lock()
	h.mu.child = nil
	killed := ""
	if len(h.mu.killed) > nKilled {
		killed = h.mu.killed[len(h.mu.killed)-1]
	}
	h.mu.Unlock()
	if killed != "" {
		return false, killed, nil
	}
	if werr != nil {
		return false, "", fmt.Errorf("the agent failed: %w", werr)
	}
	return done, "", nil
}

func parseEvent(line string) (string, map[string]any, bool) {
	rest, ok := strings.CutPrefix(line, eventPrefix)
	if !ok {
		return "", nil, false
	}
	name, js, ok := strings.Cut(rest, " ")
	if !ok {
		return "", nil, false
	}
	var kv map[string]any
	if json.Unmarshal([]byte(js), &kv) != nil {
		return "", nil, false
	}
	return name, kv, true
}
