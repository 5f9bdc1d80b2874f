package tamper

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The child protocol: the parent re-executes its own binary with childEnv
// naming the mode and specEnv naming a JSON file that holds the mode's
// spec; the child writes its answer where the spec says.
const (
	childEnv = "CONTINUUM_TAMPER_CHILD"
	specEnv  = "CONTINUUM_TAMPER_SPEC"

	modeOracle = "oracle" // read a store, see oracleSpec
	modeCrash  = "crash"  // stop inside an exec, see crashSpec
)

// crashExit is the status a crash child exits with from inside exec, after
// the action's intent is durable and before its certificate is written.
const crashExit = 75

// IsChild reports whether this process is a child of the suite.
func IsChild() bool { return os.Getenv(childEnv) != "" }

// ChildMain runs the child named by the environment and returns its exit
// status. Call it first thing in main or TestMain when IsChild is true.
func ChildMain() int {
	mode := os.Getenv(childEnv)
	b, err := os.ReadFile(os.Getenv(specEnv))
	if err != nil {
		fmt.Fprintf(os.Stderr, "tamper child: spec: %v\n", err)
		return 3
	}
	switch mode {
	case modeOracle:
		var s oracleSpec
		if err := json.Unmarshal(b, &s); err != nil {
			fmt.Fprintf(os.Stderr, "tamper child: spec %s: %v\n", os.Getenv(specEnv), err)
			return 3
		}
		return oracleMain(&s)
	case modeCrash:
		var s crashSpec
		if err := json.Unmarshal(b, &s); err != nil {
			fmt.Fprintf(os.Stderr, "tamper child: spec %s: %v\n", os.Getenv(specEnv), err)
			return 3
		}
		return crashMain(&s)
	}
	fmt.Fprintf(os.Stderr, "tamper child: unknown mode %q\n", mode)
	return 3
}

// childRun is how a child process ended.
type childRun struct {
	ExitCode int           // -1 if killed
	TimedOut bool          // killed at its deadline
	Stderr   string        // the tail of its stderr
	Elapsed  time.Duration // wall time
	Panicked bool          // died of a panic or a fatal runtime error
}

// stderrKeep bounds the stderr a childRun keeps (its end: where a panic's
// first goroutine trace is, after the message).
const stderrKeep = 8 << 10

// runChild runs this binary as a child in mode with spec (written to
// specFile), killing it at deadline.
func runChild(ctx context.Context, mode, specFile string, spec any, deadline time.Duration) (childRun, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return childRun{}, err
	}
	if err := os.WriteFile(specFile, b, 0o600); err != nil {
		return childRun{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return childRun{}, fmt.Errorf("tamper: own executable: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, specEnv+"="+specFile, "GOTRACEBACK=all")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	cmd.WaitDelay = time.Second
	start := time.Now()
	err = cmd.Run()
	r := childRun{Elapsed: time.Since(start), ExitCode: cmd.ProcessState.ExitCode()}
	r.TimedOut = ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded)
	out := stderr.String()
	// A panic prints "panic: " at the start of a line, a fatal runtime
	// error "fatal error: "; either ends the process with status 2.
	r.Panicked = !r.TimedOut && (strings.HasPrefix(out, "panic: ") || strings.Contains(out, "\npanic: ") ||
		strings.HasPrefix(out, "fatal error: ") || strings.Contains(out, "\nfatal error: "))
	if i := panicStart(out); r.Panicked && i >= 0 {
		out = out[i:]
	}
	if len(out) > stderrKeep {
		out = out[:stderrKeep]
	}
	r.Stderr = out
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) && !r.TimedOut {
		return r, fmt.Errorf("tamper: run child: %w", err)
	}
	return r, nil
}

// panicStart is where the panic message begins in a child's output.
func panicStart(out string) int {
	best := -1
	for _, p := range []string{"panic: ", "fatal error: "} {
		i := strings.Index(out, p)
		if i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

// readAnswer reads the JSON a child wrote to name into v.
func readAnswer(name string, v any) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// writeAnswer writes v to name as JSON, atomically (a reader never sees half
// of it: a child killed while writing leaves no answer). The path dir, if
// set, is written as $STORE, so that answers read from different copies
// of a store compare equal and read short.
func writeAnswer(name string, v any, dir string) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if dir != "" {
		b = bytes.ReplaceAll(b, []byte(dir), []byte("$STORE"))
	}
	tmp := filepath.Join(filepath.Dir(name), "."+filepath.Base(name)+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}
