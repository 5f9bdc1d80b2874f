package engine_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/ledger"
)

// holderChildEnv makes the test binary, run as a child, the agent of
// TestInspectHolderOtherProcess.
const holderChildEnv = "CONTINUUM_HOLDER_CHILD_DIR"

// TestInspectHolderOtherProcess: a store another process holds open is
// seen live, with that process's pid, and the atom it is running shows as
// running, not interrupted; once the process is gone the same atom is
// interrupted and its action in doubt. The child blocks in exec until its
// stdin closes.
func TestInspectHolderOtherProcess(t *testing.T) {
	if dir := os.Getenv(holderChildEnv); dir != "" {
		holderChild(dir)
		return
	}
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("the other process's lock is seen through fcntl, on Unix systems")
	}
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	cmd := exec.Command(os.Args[0], "-test.run=^TestInspectHolderOtherProcess$")
	cmd.Env = append(os.Environ(), holderChildEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "running" {
		t.Fatalf("child said %q, %v; want running", line, err)
	}

	in, err := engine.Inspect(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := in.Holder()
	s, _ := in.Run("r")
	in.Close()
	if !h.Live || h.PID != cmd.Process.Pid {
		t.Errorf("Holder %+v, want live, pid %d", h, cmd.Process.Pid)
	}
	if s.Running != 1 || s.Interrupted != 0 || len(s.InDoubt) != 0 || len(s.AtomActions) != 1 || !s.AtomActions[0].Running {
		t.Errorf("live store: running %d, interrupted %d, in doubt %d, actions %+v; want seq 1 running",
			s.Running, s.Interrupted, len(s.InDoubt), s.AtomActions)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	stdin.Close()
	in, err = engine.Inspect(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if h := in.Holder(); h.Live {
		t.Errorf("Holder %+v after the process died", h)
	}
	if s, _ := in.Run("r"); s.Interrupted != 1 || s.Running != 0 || len(s.InDoubt) != 1 || s.InDoubt[0].Running {
		t.Errorf("crashed store: running %d, interrupted %d, in doubt %+v; want seq 1 interrupted, one action in doubt",
			s.Running, s.Interrupted, s.InDoubt)
	}
}

// holderChild opens the store in dir, starts an action, says "running" on
// stdout from inside its exec, and blocks there until stdin closes or the
// parent kills it.
func holderChild(dir string) {
	ctx := context.Background()
	db, err := engine.Open(dir, &engine.Options{NoSync: true})
	if err != nil {
		os.Exit(3)
	}
	run, err := db.Run(ctx, "r")
	if err != nil {
		os.Exit(3)
	}
	atom, err := run.Begin(ctx)
	if err != nil {
		os.Exit(3)
	}
	atom.Do(ctx, ledger.Action{Tool: "t", Args: []byte(`{}`)}, func(context.Context, string) ([]byte, error) {
		os.Stdout.WriteString("running\n")
		var b [1]byte
		os.Stdin.Read(b[:])
		return nil, nil
	})
	os.Exit(0)
}
