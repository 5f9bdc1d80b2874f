//go:build unix

package engine_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/ledger"
)

// TestStoppedHolderKeepsLock: a process stopped (SIGSTOP) inside a tool
// call, far past any lease, keeps the store's lock: the lock is an fcntl
// lock on LOCK, held by the kernel for the process until it exits or
// closes the file, with no timer of its own, so no second process opens
// the store and executes the call again meanwhile. Once the stopped
// process is killed, the next one opens the store with a larger fencing
// token and finds the call in doubt.
func TestStoppedHolderKeepsLock(t *testing.T) {
	if dir := os.Getenv(holderChildEnv); dir != "" {
		holderChild(dir)
		return
	}
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	// The store exists before the child takes it, so that its token is
	// measured against the one of an earlier process.
	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := db.FencingToken()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStoppedHolderKeepsLock$")
	cmd.Env = append(os.Environ(), holderChildEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
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
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		time.Sleep(200 * time.Millisecond)
		if db, err := engine.Open(dir, nil); !errors.Is(err, engine.ErrLocked) {
			if err == nil {
				db.Close()
			}
			t.Fatalf("Open while the holder is stopped inside a call: %v, want ErrLocked", err)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	db, err = engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.FencingToken() <= first {
		t.Fatalf("token %d after the stopped process, %d before it: not larger", db.FencingToken(), first)
	}
	run, _ := db.Run(ctx, "r")
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Do(ctx, ledger.Action{Tool: "t", Args: []byte(`{}`)}, func(context.Context, string) ([]byte, error) {
		t.Error("the stopped process's call executed again")
		return nil, nil
	}); !errors.Is(err, ledger.ErrInDoubt) {
		t.Fatalf("the stopped process's call: %v, want in doubt", err)
	}
}
