package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/internal/downstream"
)

// prog is this program, for its messages and usage.
const prog cli.Program = "continuumdemo"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program: it returns the exit code. The demo starts
// itself as its agent child with agentCmd first.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == agentCmd {
		return runAgent(args[1:], stdout, stderr)
	}
	return runDemo(args, stdout, stderr)
}

const demoUsage = "[--dir DIR]"

const demoAbout = `The demo shows what CONTINUUM is for. An agent deploys a service to three
regions (create a bucket, run a schema migration, charge a billing webhook,
send an email, in each) against a local fake downstream that records every
call. The demo runs the agent as a child process, kills it (SIGKILL) in the
middle of the billing charge of the second region, after the charge went
through and before the agent heard back, and starts it again: it resumes where
it stopped, reconciles the in-doubt charge with the downstream instead of
charging twice, finishes, and ends its run. Then it prints each side effect
with its count (all 1) and verifies the store.

Then it reconsiders a step: it forks the finished run at the atom before the
third region's rollout, and the agent redoes the rest on the fork with one
decision changed (a discounted fee). The steps it repeats unchanged are
served from the ledger without a call; the changed charge is one new call,
under a key of the fork's own. The demo prints the lineage and verifies the
store again, deeply.

Without --dir the store goes to a fresh temporary directory, which is kept
(its path is printed) so that you can look inside it with continuumctl
inspect, stats, export and verify. --dir must be empty or not exist.
From a checkout of the repository: go run ./cmd/continuumdemo [--dir DIR].
Exit 0 when every effect happened exactly once, the fork repeated none, and
the store verifies, 1 otherwise, 2 on a usage or I/O error.`

const demoExamples = `  continuumdemo
  continuumdemo --dir /tmp/demo-store
  continuumctl inspect /tmp/demo-store
  continuumctl verify --strict --pubkey /tmp/demo-store.pub /tmp/demo-store`

// demoChildEnv marks a process started by the demo as its agent; the test
// binary, which the demo starts as its child in tests, uses it to run the
// program's code instead of the tests.
const demoChildEnv = "CONTINUUM_DEMO_CHILD"

func runDemo(args []string, stdout, stderr io.Writer) int {
	d, code := setupDemo(args, stdout, stderr)
	if d == nil {
		return code
	}
	return d.run(context.Background())
}

// setupDemo parses the arguments and prepares the store's directory. It
// returns the demo to run, or nil and the exit code.
func setupDemo(args []string, stdout, stderr io.Writer) (*demo, int) {
	fs := prog.Flags("", demoUsage, demoAbout, demoExamples, stderr)
	dir := fs.String("dir", "", "store `directory` (empty or absent; default: a fresh temporary directory)")
	pos, code, ok := cli.ParseFlags(fs, args)
	if !ok {
		return nil, code
	}
	if len(pos) != 0 {
		return nil, cli.UsageErr(fs, stderr, "unexpected argument %q", pos[0])
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "continuum-demo-")
		if err != nil {
			return nil, prog.Fail(stderr, "", fmt.Errorf("temporary directory: %w", err))
		}
		*dir = d
	} else if names, err := os.ReadDir(*dir); err == nil && len(names) > 0 {
		fmt.Fprintf(stderr, "continuumdemo: %s is not empty; give an empty or new directory\n", *dir)
		return nil, cli.ExitUsage
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, prog.Fail(stderr, "", err)
	}
	// Create the store's directory here, so that a path that cannot hold
	// one is an I/O error of the demo (exit 2), not an agent that failed.
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) && pe.Path == *dir {
			err = pe.Err // the message names the directory already
		}
		fmt.Fprintf(stderr, "continuumdemo: cannot create the store directory %s (%v); give a directory you can write\n", *dir, err)
		return nil, cli.ExitUsage
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, prog.Fail(stderr, "", fmt.Errorf("cannot find this program to start the agent: %w", err))
	}
	return &demo{dir: *dir, exe: exe, out: stdout, stderr: stderr, script: demoScript(), forkScript: demoForkScript()}, cli.ExitOK
}

type demo struct {
	dir, exe    string
	out, stderr io.Writer
	script      []demoStep // of demoRun
	forkScript  []demoStep // of demoForkRun, which does its steps after demoForkAt
	seed        []byte     // of the ephemeral signing key

	// calls is every call the downstream received, in order, once run
	// has returned.
	calls []downstream.Call

	mu struct {
		sync.Mutex
		child  *exec.Cmd
		exited chan struct{} // closed when child has exited
		armed  bool          // the running child is to be killed
		killed bool
	}
}

// event is one line the agent child printed.
type event struct {
	name string
	kv   map[string]string
}

func parseEvent(line string) (event, bool) {
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != demoEvent {
		return event{}, false
	}
	ev := event{name: f[1], kv: map[string]string{}}
	for _, p := range f[2:] {
		if k, v, ok := strings.Cut(p, "="); ok {
			ev.kv[k] = v
		}
	}
	return ev, true
}

func (ev event) uint(k string) uint64 {
	n, _ := strconv.ParseUint(ev.kv[k], 10, 64)
	return n
}

func (d *demo) run(ctx context.Context) int {
	w := d.out
	d.seed = make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(d.seed); err != nil {
		return prog.Fail(d.stderr, "", err)
	}
	killSeq := stepSeq(d.script, demoRegions[demoKillRegion], "charge")
	killKey := demoKey(demoRun, killSeq)
	srv, err := downstream.Start(&downstream.Options{
		Result: demoResult,
		AfterEffect: func(c downstream.Call) {
			if c.Key == killKey {
				d.kill()
			}
		},
	})
	if err != nil {
		return prog.Fail(d.stderr, "", err)
	}
	defer func() {
		srv.Close()
		d.calls = srv.History()
	}()

	fmt.Fprintf(w, "CONTINUUM demo: an agent deploys checkout v2 to %d regions, is killed in the\n", len(demoRegions))
	fmt.Fprintf(w, "middle of a step, and resumes without doing anything twice; then a fork\n")
	fmt.Fprintf(w, "reconsiders a step without repeating what it did not change.\n\n")
	fmt.Fprintf(w, "store:      %s\n", d.dir)
	fmt.Fprintf(w, "downstream: %s (a fake outside world that records every call)\n\n", srv.URL())

	fmt.Fprintf(w, "start the agent (process 1)\n")
	res1, err := d.child(ctx, srv.URL(), killSeq, false)
	if err != nil {
		return prog.Fail(d.stderr, "", err)
	}
	if !res1.killed {
		if res1.err != nil {
			// The agent could not run (its store could not be opened, say):
			// an I/O error, not a store that misbehaved.
			fmt.Fprintf(d.stderr, "continuumdemo: the agent failed before it could be killed: %v\n", res1.err)
			return cli.ExitUsage
		}
		fmt.Fprintf(d.stderr, "continuumdemo: the agent finished without being killed\n")
		return cli.ExitCorrupt
	}
	fmt.Fprintf(w, "\nrestart the agent (process 2)\n")
	res2, err := d.child(ctx, srv.URL(), 0, false)
	if err != nil {
		return prog.Fail(d.stderr, "", err)
	}
	if res2.err != nil {
		fmt.Fprintf(d.stderr, "continuumdemo: the restarted agent failed: %v\n", res2.err)
		return cli.ExitCorrupt
	}

	effects := srv.Effects()
	fmt.Fprintf(w, "\nside effects recorded by the downstream (each must be 1):\n")
	once := true
	for _, e := range effects {
		mark := "ok"
		if e.Effects != 1 {
			mark = "DUPLICATE"
			once = false
		}
		fmt.Fprintf(w, "  %-22s %-16s %d  %s\n", e.Tool, d.keyRegion(e.Key), e.Effects, mark)
	}
	if len(effects) != 4*len(demoRegions) {
		once = false
		fmt.Fprintf(w, "  expected %d calls, saw %d\n", 4*len(demoRegions), len(effects))
	}

	pub := ed25519.NewKeyFromSeed(d.seed).Public().(ed25519.PublicKey)
	rep, err := engine.Verify(ctx, d.dir, &engine.VerifyOptions{PublicKey: pub})
	if err != nil {
		return prog.Fail(d.stderr, "", err)
	}
	fmt.Fprintf(w, "\nverify: ")
	printVerify(w, rep)

	forked, err := d.reconsider(ctx, srv, pub)
	if err != nil {
		return prog.Fail(d.stderr, "", err)
	}

	fmt.Fprintf(w, "\nsummary: %d atoms done; the agent was killed at atom %d and restarted in %s;\n",
		res2.lastSeq, killSeq, res2.restart.Round(10*time.Microsecond))
	if once {
		fmt.Fprintf(w, "%d side effects, each exactly once; the in-doubt charge was reconciled, not repeated;\n", len(effects))
	} else {
		fmt.Fprintf(w, "SOME SIDE EFFECTS DID NOT HAPPEN EXACTLY ONCE;\n")
	}
	if forked {
		fmt.Fprintf(w, "the fork redid steps %d-%d with one new call, its changed charge, and repeated no effect.\n",
			demoForkAt()+1, len(d.forkScript))
	} else {
		fmt.Fprintf(w, "THE FORK DID NOT KEEP ITS PROMISES (see above).\n")
	}
	fmt.Fprintf(w, "\nlook inside:\n  continuumctl inspect %s %s --seq %d\n", d.dir, demoRun, killSeq)
	fmt.Fprintf(w, "  continuumctl inspect %s %s\n", d.dir, demoForkRun)
	fmt.Fprintf(w, "  continuumctl diff %s %s last %s last\n", d.dir, demoRun, demoForkRun)
	if name, err := d.writePublicKey(rep.StoreID); err != nil {
		fmt.Fprintf(d.stderr, "continuumdemo: %v\n", err)
	} else {
		fmt.Fprintf(w, "  continuumctl verify --pubkey %s %s\n", name, d.dir)
	}
	if !once || !rep.OK || !forked || res2.lastSeq != uint64(len(d.script)) || res2.status != engine.StatusCompleted.String() {
		return cli.ExitCorrupt
	}
	return cli.ExitOK
}

// printVerify prints a verify report's verdict, its failures and warnings.
func printVerify(w io.Writer, rep *chain.Report) {
	if rep.OK {
		runs := "runs"
		if len(rep.Runs) == 1 {
			runs = "run"
		}
		fmt.Fprintf(w, "INTACT: %d %s, %d records on the hash chain, %d signed checkpoints verified, %d warnings\n",
			len(rep.Runs), runs, rep.Records, rep.CheckpointsVerified, len(rep.Warnings))
	} else {
		fmt.Fprintf(w, "FAILED\n")
		for _, f := range rep.Failures {
			cli.PrintFinding(w, f)
		}
	}
	for _, f := range rep.Warnings {
		cli.PrintFinding(w, f)
	}
}

// keyRegion names the region of the step whose action went out under key
// (the default key of a step of demoRun or of demoForkRun), or the key
// itself if no step's action has it.
func (d *demo) keyRegion(key string) string {
	for _, s := range d.script {
		if s.tool != "" && key == demoKey(demoRun, s.seq) {
			return s.region
		}
	}
	for _, s := range d.forkScript[demoForkAt():] {
		if s.tool != "" && key == demoKey(demoForkRun, s.seq) {
			return s.region
		}
	}
	return key
}

type childResult struct {
	killed  bool
	err     error // the child's exit error, if it was not killed by the demo
	lastSeq uint64
	restart time.Duration
	status  string // the run's status after the child ("" if it did not say)

	// Of the fork (process 3): what the agent reported.
	sameState bool
	state     string            // digest of the fork's state at the fork point
	calls     map[uint64]int    // the calls of each atom's exec, by seq
	keys      map[uint64]string // the key of each atom's last call, by seq
	runs      []event           // the store's runs (RunInfo), after the fork ended
}

// child runs the agent as a child process until it exits, narrating its
// events. killSeq is the atom in which the demo kills it (0: none
// expected); fork runs the agent on the fork (process 3).
func (d *demo) child(ctx context.Context, url string, killSeq uint64, fork bool) (childResult, error) {
	args := []string{agentCmd, "--dir", d.dir, "--downstream", url}
	if fork {
		args = append(args, "--fork")
	}
	cmd := exec.CommandContext(ctx, d.exe, args...)
	cmd.Env = append(os.Environ(), demoChildEnv+"=1", demoKeyEnv+"="+hex.EncodeToString(d.seed))
	cmd.Stderr = d.stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return childResult{}, err
	}
	exited := make(chan struct{})
	d.mu.Lock()
	d.mu.child, d.mu.exited, d.mu.armed, d.mu.killed = cmd, exited, killSeq != 0, false
	d.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return childResult{}, fmt.Errorf("start the agent %s: %w", d.exe, err)
	}
	res := childResult{calls: map[uint64]int{}, keys: map[uint64]string{}}
	w := d.out
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		ev, ok := parseEvent(sc.Text())
		if !ok {
			continue
		}
		switch ev.name {
		case "open":
			res.restart = time.Duration(ev.uint("restart_ns"))
			last, intr := ev.uint("last_seq"), ev.uint("interrupted")
			if fork {
				break // the forked event told
			}
			if last == 0 && intr == 0 {
				fmt.Fprintf(w, "  opened a new store in %s\n", res.restart.Round(10*time.Microsecond))
				break
			}
			fmt.Fprintf(w, "  restarted in %s (engine.Open %s, then the run's frame): %d atoms done",
				res.restart.Round(10*time.Microsecond), time.Duration(ev.uint("open_ns")).Round(10*time.Microsecond), last)
			if intr != 0 {
				fmt.Fprintf(w, ", atom %d was interrupted", intr)
			}
			fmt.Fprintln(w)
		case "forked":
			res.sameState, res.state = ev.kv["same_state"] == "true", ev.kv["state"]
			d.narrateFork(ev)
		case "atom":
			seq := ev.uint("seq")
			res.lastSeq = seq
			res.calls[seq], res.keys[seq] = int(ev.uint("calls")), ev.kv["key"]
			switch {
			case seq < 1 || seq > uint64(len(d.script)):
			case fork:
				d.narrateForkAtom(seq, res.calls[seq], res.keys[seq])
			default:
				fmt.Fprintf(w, "  atom %2d  %s\n", seq, d.script[seq-1].describe())
			}
		case "reconciled":
			found := "the downstream has no trace of it: call it again"
			if ev.kv["found"] == "true" {
				found = "the downstream has it: record its result, do not call again"
			}
			fmt.Fprintf(w, "  atom %2d  in doubt after the crash: %s\n", ev.uint("seq"), found)
		case "ended":
			res.status = ev.kv["status"]
			if !fork {
				fmt.Fprintf(w, "  Run.End: %s %s\n", demoRun, res.status)
			}
		case "run":
			res.runs = append(res.runs, ev)
		case "done":
			res.lastSeq = ev.uint("last_seq")
		}
	}
	err = cmd.Wait()
	close(exited)
	d.mu.Lock()
	res.killed = d.mu.killed
	d.mu.child = nil
	d.mu.Unlock()
	if res.killed && killSeq >= 1 && killSeq <= uint64(len(d.script)) {
		fmt.Fprintf(w, "  atom %2d  %s: the downstream took the charge ...\n", killSeq, d.script[killSeq-1].describe())
		fmt.Fprintf(w, "  >>> SIGKILL: the agent dies before it hears back; the charge is now in doubt\n")
		return res, nil
	}
	res.err = err
	return res, nil
}

// kill SIGKILLs the running child once, and waits until it is gone, so
// that the reply of the call in progress never reaches it.
func (d *demo) kill() {
	d.mu.Lock()
	cmd, exited := d.mu.child, d.mu.exited
	if cmd == nil || !d.mu.armed || d.mu.killed || cmd.Process == nil {
		d.mu.Unlock()
		return
	}
	d.mu.killed = true
	d.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil {
		fmt.Fprintf(d.stderr, "continuumdemo: kill the agent: %v\n", err)
		return
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		fmt.Fprintf(d.stderr, "continuumdemo: the agent did not exit 30s after SIGKILL\n")
	}
}

// writePublicKey writes the demo's public key next to the store (never in
// it: verification takes the key from the user), so that verify can check
// the signatures after the demo.
func (d *demo) writePublicKey(storeID string) (string, error) {
	pub := ed25519.NewKeyFromSeed(d.seed).Public().(ed25519.PublicKey)
	b, err := chain.MarshalPublicKey(chain.OriginName(storeID), pub)
	if err != nil {
		return "", err
	}
	name := strings.TrimRight(d.dir, string(os.PathSeparator)) + ".pub"
	if err := os.WriteFile(name, b, 0o644); err != nil {
		return "", fmt.Errorf("write the demo's public key: %w", err)
	}
	return name, nil
}
