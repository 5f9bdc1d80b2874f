package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/continuumdb/continuum/engine"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// agentCmd is the hidden first argument with which the program starts
// itself as the agent.
const agentCmd = "agent"

// childEnv marks a process started as the agent; the test binary, which
// stands for the program in tests, runs the program instead of its tests.
const childEnv = "LLMAGENT_CHILD"

// defaultKills are the demo's kill points with the stub model: after the
// first order took effect (in doubt), and before the email step commits.
const defaultKills = "after:place_order#1,commit:3"

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == agentCmd {
		return runAgent(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("llmagent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: llmagent [--dir DIR] [--url URL] [--model NAME] [--kill POINTS]\n\n%s\n\nflags:\n", about)
		fs.PrintDefaults()
	}
	dir := fs.String("dir", "", "store `directory`, empty or new (default: a fresh temporary directory, kept)")
	url := fs.String("url", os.Getenv("OPENAI_BASE_URL"), "chat completions base `URL`, e.g. https://api.openai.com/v1 (env OPENAI_BASE_URL; default: a local stub)")
	model := fs.String("model", os.Getenv("LLMAGENT_MODEL"), "model `name` (env LLMAGENT_MODEL; default gpt-4o-mini, or stub for the stub)")
	kills := fs.String("kill", "", "comma-separated kill `points`, one per process, or none (default "+defaultKills+" with the stub, commit:1 with a real model)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "llmagent: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	key := os.Getenv(agentEnv)
	if *url == "" {
		key = "" // the stub needs none; never send a real key to it
	}
	if *model == "" {
		*model = "gpt-4o-mini"
		if *url == "" {
			*model = "stub"
		}
	}
	if *kills == "" {
		*kills = defaultKills
		if *url != "" {
			*kills = "commit:1"
		}
	}
	var points []string
	if *kills != "none" {
		for _, p := range strings.Split(*kills, ",") {
			if p = strings.TrimSpace(p); !validPoint(p) {
				fmt.Fprintf(stderr, "llmagent: kill point %q: want model:N, before:TOOL#K, after:TOOL#K or commit:N\n", p)
				return 2
			}
			points = append(points, p)
		}
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "llmagent-")
		if err != nil {
			fmt.Fprintf(stderr, "llmagent: %v\n", err)
			return 2
		}
		*dir = d
	} else if names, err := os.ReadDir(*dir); err == nil && len(names) > 0 {
		fmt.Fprintf(stderr, "llmagent: %s is not empty; give an empty or new directory\n", *dir)
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "llmagent: cannot find this program to start the agent: %v\n", err)
		return 2
	}
	h := &harness{exe: exe, env: []string{childEnv + "=1"}, dir: *dir, modelURL: *url, model: *model, key: key,
		points: points, out: stdout, stderr: stderr}
	where := "a local stub of the chat completions API"
	if *url != "" {
		where = *url + " (" + *model + ")"
	}
	fmt.Fprintf(stdout, "llmagent: an agent on %s orders coffee through a shop\n", where)
	fmt.Fprintf(stdout, "that counts every effect, is killed (SIGKILL) at %s, and resumes.\n", orNone(points))
	fmt.Fprintf(stdout, "store: %s\n\n", *dir)
	return report(context.Background(), h, stdout, stderr)
}

const about = `An LLM agent on agentloop: it orders office supplies through a fake shop
(check stock, place two orders, mail a receipt) with an OpenAI-compatible
chat completions model, a local stub by default. It runs as a child process
that is killed (SIGKILL) at the given points and started again until it
finishes; then the shop's effects are listed (each must be 1) and the store
is verified. With --url the agent talks to that endpoint, with the key in
OPENAI_API_KEY.

Kill points: model:N (the model call of step N, stub only), before:TOOL#K
and after:TOOL#K (the K-th call of TOOL, before or after its effect),
commit:N (step N about to commit). Exit 0 when the run completed, every
effect happened once and the store verifies; 1 otherwise; 2 on a usage error.`

func orNone(points []string) string {
	if len(points) == 0 {
		return "no point"
	}
	return strings.Join(points, ", then ")
}

func validPoint(p string) bool {
	kind, rest, ok := strings.Cut(p, ":")
	if !ok || rest == "" {
		return false
	}
	switch kind {
	case "model", "commit":
		return strings.Trim(rest, "0123456789") == ""
	case "before", "after":
		tool, k, ok := strings.Cut(rest, "#")
		return ok && tool != "" && k != "" && strings.Trim(k, "0123456789") == ""
	}
	return false
}

// report runs the harness and says what happened: exit 0 when the run
// completed, every effect happened once and the store verifies.
func report(ctx context.Context, h *harness, stdout, stderr io.Writer) int {
	out, err := h.run(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "llmagent: %v\n", err)
		return 1
	}
	ok := out.status == engine.StatusCompleted.String()
	fmt.Fprintf(stdout, "\nside effects the shop recorded (each must be 1):\n")
	for _, e := range out.effects {
		mark := "ok"
		if e.Effects != 1 {
			mark, ok = "NOT ONCE", false
		}
		fmt.Fprintf(stdout, "  %-13s %-28s effects %d, calls %d  %s\n", e.Tool, e.Key, e.Effects, e.Calls, mark)
	}
	rep, err := engine.Verify(ctx, h.dir, &engine.VerifyOptions{Deep: true})
	if err != nil {
		fmt.Fprintf(stderr, "llmagent: verify: %v\n", err)
		return 1
	}
	if rep.OK {
		fmt.Fprintf(stdout, "\nverify --deep: intact (%d records on the hash chain)\n", rep.Records)
	} else {
		ok = false
		fmt.Fprintf(stdout, "\nverify --deep: FAILED\n")
		for _, f := range rep.Failures {
			fmt.Fprintf(stdout, "  %v\n", f)
		}
	}
	fmt.Fprintf(stdout, "%d processes, killed at: %s\n", out.processes, orNone(out.killed))
	fmt.Fprintf(stdout, "look inside: go run ./cmd/continuumctl inspect %s %s\n", h.dir, runID)
	if !ok {
		return 1
	}
	return 0
}
