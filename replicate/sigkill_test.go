package replicate

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/nats-io/nats.go"
)

// The writer child of TestSIGKILLWriter: it runs when the test binary is
// started with CONTINUUM_REPLICATE_CHILD set to the cluster's URLs, and
// reports on stdout every effect before its exec returns ("effect KEY")
// and every acknowledged atom after its Commit returned ("ack RUN SEQ
// HEAD"), until it is killed.
func init() {
	urls := os.Getenv("CONTINUUM_REPLICATE_CHILD")
	if urls == "" {
		return
	}
	os.Exit(childWriter(urls, os.Getenv("CONTINUUM_REPLICATE_DIR")))
}

// openChild is a writer child's set-up: it connects to the cluster at
// urls (as the application and as the system account), opens store in
// dir as node "child", and opens the engine over it.
func openChild(urls, dir, store string) (*engine.DB, error) {
	nc, err := nats.Connect(urls, nats.UserInfo("app", "app"))
	if err != nil {
		return nil, err
	}
	sys, err := nats.Connect(urls, nats.UserInfo("sys", "sys"))
	if err != nil {
		return nil, err
	}
	r, err := Open(ctx, dir, Config{Conn: nc, SystemConn: sys, Store: store, Node: "child", LeaseTTL: 600 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	return engine.Open(dir, engineOptions(r))
}

func childWriter(urls, dir string) int {
	fail := func(err error) int {
		fmt.Println("error", err)
		return 1
	}
	db, err := openChild(urls, dir, "kill9")
	if err != nil {
		return fail(err)
	}
	var runs []*engine.Run
	for i := range 4 {
		run, err := db.Run(ctx, fmt.Sprintf("run-%d", i))
		if err != nil {
			return fail(err)
		}
		runs = append(runs, run)
	}
	d := &downstream{report: func(key string) { fmt.Println("effect", key) }}
	out := make(chan string, 64)
	for _, run := range runs {
		go func() {
			for {
				seq, err := step(run, d)
				if err != nil {
					out <- "error " + err.Error()
					return
				}
				out <- fmt.Sprintf("ack %s %d %s", run.ID(), seq, run.Head())
			}
		}()
	}
	for line := range out {
		fmt.Println(line)
	}
	return 0
}

// TestSIGKILLWriter: a child process writes four runs to a replicated
// store and is SIGKILLed mid-flight; a node that takes the store after its
// lease expired has every atom the child had acknowledged, with its head,
// finishes the runs with no effect twice, and converges with runs that
// never failed.
func TestSIGKILLWriter(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	c := newCluster(t, true)
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	childDir := filepath.Join(t.TempDir(), "child")
	cmd.Env = append(os.Environ(), "CONTINUUM_REPLICATE_CHILD="+strings.Join(c.urls, ","),
		"CONTINUUM_REPLICATE_DIR="+childDir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var d downstream
	acked := map[string]uint64{}
	heads := map[string]string{}
	sc := bufio.NewScanner(stdout)
	for n := 0; n < 120 && sc.Scan(); {
		f := strings.Fields(sc.Text())
		switch f[0] {
		case "effect":
			d.mu.Lock()
			if d.effects == nil {
				d.effects = map[string]int{}
			}
			d.effects[f[1]]++
			d.mu.Unlock()
		case "ack":
			seq, _ := strconv.ParseUint(f[2], 10, 64)
			acked[f[1]], heads[f[1]] = seq, f[3]
			n++
		default:
			t.Fatalf("child: %s", sc.Text())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// What the child printed before it died, effects included.
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "effect" {
			d.mu.Lock()
			d.effects[f[1]]++
			d.mu.Unlock()
		} else if len(f) == 4 && f[0] == "ack" {
			seq, _ := strconv.ParseUint(f[2], 10, 64)
			acked[f[1]], heads[f[1]] = seq, f[3]
		}
	}
	t0 := time.Now()
	rb, dbb, dirb := open(t, c, "kill9", "b", 1, false)
	t.Logf("resumed %v after the SIGKILL (lease TTL 600 ms): %+v", time.Since(t0), rb.Restored())
	n := map[string]uint64{}
	for id, seq := range acked {
		run, err := dbb.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if run.LastSeq() < seq {
			t.Errorf("run %s: the child acknowledged %d atoms, the stream has %d", id, seq, run.LastSeq())
		}
		if run.LastSeq() == seq && run.Head().String() != heads[id] {
			t.Errorf("run %s: head %s at seq %d, the child acknowledged %s", id, run.Head(), seq, heads[id])
		}
		for range 3 {
			if _, err := step(run, &d); err != nil {
				t.Fatalf("run %s after the SIGKILL: %v", id, err)
			}
		}
		n[id] = run.LastSeq()
	}
	if dup := d.duplicates(); len(dup) > 0 {
		t.Errorf("duplicate effects: %v", dup)
	}
	ids := []string{"run-0", "run-1", "run-2", "run-3"}
	converged(t, dbb, reference(t, ids, n))
	closeAndVerify(t, dbb, rb, dirb, "verify after the SIGKILL and the failover")

	// The killed node comes back and opens its own copy: it left REPLICA
	// as of at most markEvery before the kill, and a log that may end with
	// a group the stream never acknowledged (cut) or has, though the child
	// never saw the ack (kept). Either way the copy ends up as the stream
	// says.
	rc, dbc := openAt(t, c, "kill9", "child", 0, false, childDir)
	info := rc.Restored()
	t.Logf("the killed node's copy: %+v", info)
	if info.Path != PathCaughtUp {
		t.Errorf("reopen of the killed writer's copy: path %q (%s), want %q", info.Path, info.Replaced, PathCaughtUp)
	}
	for _, id := range ids {
		run, err := dbc.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := step(run, &d); err != nil {
				t.Fatalf("run %s on the killed node's copy: %v", id, err)
			}
		}
		n[id] = run.LastSeq()
	}
	if dup := d.duplicates(); len(dup) > 0 {
		t.Errorf("duplicate effects: %v", dup)
	}
	converged(t, dbc, reference(t, ids, n))
	closeAndVerify(t, dbc, rc, childDir, "verify of the killed node's copy")
}
