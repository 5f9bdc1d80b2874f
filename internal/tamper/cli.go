package tamper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
)

// CLIAnswer is how one continuumctl command ended on a store.
type CLIAnswer struct {
	Cmd      string `json:"cmd"` // the arguments, with the store as $STORE
	Exit     int    `json:"exit"`
	Out      string `json:"out"` // a digest of stdout, with the store's path as $STORE
	Panicked bool   `json:"panicked,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
	Stderr   string `json:"stderr,omitempty"` // its first lines
	// Wrote is a change the commands made to the store (they must make
	// none); such an answer stands for all of them.
	Wrote string `json:"wrote,omitempty"`
}

// cliCommands are the continuumctl commands the oracle runs on a store:
// verify plain and deep (with the public key), and the read-only tools.
func cliCommands(runs []string) [][]string {
	cmds := [][]string{
		{"verify", "--pubkey", "$PUBKEY", "$STORE"},
		{"verify", "--deep", "--pubkey", "$PUBKEY", "$STORE"},
		{"inspect", "$STORE"},
		{"stats", "--json", "$STORE"},
	}
	for _, id := range runs {
		cmds = append(cmds, []string{"inspect", "$STORE", id}, []string{"inspect", "$STORE", id, "--seq", "2"},
			[]string{"export", "$STORE", "--run", id})
	}
	return cmds
}

// readCLI runs every command of cliCommands with continuumctl (the binary
// bin) on the store in dir, each in its own process with its own deadline,
// and checks that together they wrote nothing (they are read-only). The
// public key file goes in work.
func readCLI(ctx context.Context, bin, dir, work string, st *Store, deadline time.Duration) ([]CLIAnswer, error) {
	pub := filepath.Join(work, "pubkey")
	// The key file names the store's origin, as continuumctl keygen
	// writes it; verify refuses a key of another origin.
	origin, err := engine.StoreOrigin(st.Dir, nil) // the pristine STORE: dir's may be damaged
	if err != nil {
		return nil, err
	}
	b, err := chain.MarshalPublicKey(origin, st.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(pub, b, 0o600); err != nil {
		return nil, err
	}
	ringFile := filepath.Join(work, "keyring")
	if st.Sealed {
		if err := os.WriteFile(ringFile, keyringFile(st.KeySeed), 0o600); err != nil {
			return nil, err
		}
	}
	before, err := treeDigest(dir)
	if err != nil {
		return nil, err
	}
	var out []CLIAnswer
	for _, args := range cliCommands(st.Runs) {
		real := make([]string, len(args))
		for i, a := range args {
			real[i] = strings.NewReplacer("$STORE", dir, "$PUBKEY", pub).Replace(a)
		}
		if st.Sealed {
			real = append(real, "--keyring", ringFile)
		}
		out = append(out, runCLI(ctx, bin, strings.Join(args, " "), real, dir, deadline))
	}
	after, err := treeDigest(dir)
	if err != nil {
		return nil, err
	}
	for _, w := range diffTrees(before, after) {
		out = append(out, CLIAnswer{Cmd: "(all, read-only)", Exit: -1, Wrote: w})
	}
	return out, nil
}

func runCLI(ctx context.Context, bin, name string, args []string, dir string, timeout time.Duration) CLIAnswer {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "GOTRACEBACK=all")
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	a := CLIAnswer{Cmd: name, Exit: cmd.ProcessState.ExitCode()}
	a.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
	e := strings.ReplaceAll(stderr.String(), dir, "$STORE")
	a.Panicked = !a.TimedOut && (strings.HasPrefix(e, "panic: ") || strings.Contains(e, "\npanic: ") ||
		strings.HasPrefix(e, "fatal error: ") || strings.Contains(e, "\nfatal error: "))
	if i := panicStart(e); a.Panicked && i >= 0 {
		e = e[i:]
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) && !a.TimedOut {
		a.Exit, a.Stderr = -1, err.Error()
	} else {
		a.Stderr = firstLines(e, 4)
	}
	a.Out = digest(bytes.ReplaceAll(stdout.Bytes(), []byte(dir), []byte("$STORE")))
	return a
}

// verifyExit is the exit status continuumctl verify owes a verdict: 1
// tampered or corrupt, 2 cannot check, 0 intact.
func verifyExit(v VerifyAnswer) int {
	switch {
	case v.Detected():
		return 1
	case v.Err != "":
		return 2
	}
	return 0
}

// compareCLI lists how the CLI's answers differ: verify must exit as the
// library's verdict says; inspect and stats must exit as on the pristine
// store; export must print the same (it reads only the log).
func compareCLI(want, got *Answers) []Diff {
	var out []Diff
	w := map[string]CLIAnswer{}
	for _, a := range want.CLI {
		w[a.Cmd] = a
	}
	for _, g := range got.CLI {
		where := "continuumctl " + g.Cmd
		wa, ok := w[g.Cmd]
		switch {
		case g.Wrote != "":
			out = append(out, Diff{Where: "continuumctl (read-only) wrote", Want: "nothing", Got: g.Wrote, Silent: true})
		case g.Panicked, g.TimedOut:
			continue // classified as PANIC or HANG
		case !ok:
			continue
		case strings.HasPrefix(g.Cmd, "verify"):
			v := got.VerifyPlain
			if strings.Contains(g.Cmd, "--deep") {
				v = got.VerifyDeep
			}
			if e := verifyExit(v); g.Exit != e {
				out = append(out, Diff{Where: where, Want: fmt.Sprintf("exit %d (as the library's verdict)", e),
					Got: fmt.Sprintf("exit %d: %s", g.Exit, g.Stderr), Silent: g.Exit == 0})
			}
		case g.Exit != wa.Exit:
			out = append(out, Diff{Where: where, Want: fmt.Sprintf("exit %d", wa.Exit),
				Got: fmt.Sprintf("%sexit %d: %s", errPrefix, g.Exit, g.Stderr)})
		case strings.HasPrefix(g.Cmd, "export") && g.Out != wa.Out:
			out = append(out, Diff{Where: where, Want: "output " + wa.Out, Got: "exit 0, output " + g.Out, Silent: true})
		}
	}
	return out
}

// cliFailure is the first CLI command that panicked or hung, if any.
func cliFailure(got *Answers) (Class, string) {
	for _, a := range got.CLI {
		switch {
		case a.Panicked:
			return Panic, fmt.Sprintf("continuumctl %s panicked: %s", a.Cmd, a.Stderr)
		case a.TimedOut:
			return Hang, fmt.Sprintf("continuumctl %s missed its deadline", a.Cmd)
		}
	}
	return "", ""
}

// BuildCLI builds continuumctl into dir and returns its path.
func BuildCLI(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "continuumctl")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/continuumdb/continuum/cmd/continuumctl")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("tamper: go build continuumctl: %v\n%s", err, out)
	}
	return bin, nil
}
