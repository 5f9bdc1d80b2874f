package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
)

// ctl is this program, for the messages and usage of its commands.
const ctl cli.Program = "continuumctl"

// memoryLimit is the soft limit of the Go heap of every subcommand unless
// GOMEMLIMIT says otherwise. The tools hold one record at a time (at most
// 64 MiB compressed and 64 MiB decompressed) besides small per-record
// indexes, so the collector keeps the heap near that instead of letting it
// grow to twice the live set. verify --deep (per-action indexes) and the
// frame of a huge run go past it: docs/THREATS.md, "Bounded time and
// memory", gives the measurements.
const memoryLimit = 128 << 20

func main() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand.
type command struct {
	name   string
	usage  string // the synopsis after "continuumctl "
	about  string // one line
	hidden bool
	run    func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{name: "verify", usage: verifyUsage, about: "check that a store is intact (exit 0 intact, 1 tampered/corrupt, 2 usage/IO)", run: runVerify},
		{name: "inspect", usage: inspectUsage, about: "show the runs of a store, one atom, or the frame at a seq", run: runInspect},
		{name: "stats", usage: statsUsage, about: "sizes, counts, compression and snapshot ages of a store", run: runStats},
		{name: "export", usage: exportUsage, about: "the atoms of a run as JSON Lines, deltas and actions decoded", run: runExport},
		{name: "diff", usage: diffUsage, about: "the delta ops between two seqs of a run, or of two runs of a lineage, from their common state", run: runDiff},
		{name: "view", usage: viewUsage, about: "serve a read-only web view of a store (runs, timelines, frames, lineage, ledger, verify) on loopback", run: runWebView},
		{name: "gc", usage: gcUsage, about: "delete ended runs (by id, status, end time) and reclaim their space in the log", run: runGC},
		{name: "erase", usage: eraseUsage, about: "erase ended runs of an encrypted store, or one memory key of a run (--memory-key): destroy their data keys (crypto-shredding)", run: runErase},
		{name: "blob", usage: blobUsage, about: "write one blob (a large value kept outside the log) to stdout or a file, checked chunk by chunk", run: runBlob},
		{name: "rekey", usage: rekeyUsage, about: "re-wrap an encrypted store's data keys with the keyring's current key, so older keys can be retired", run: runRekey},
		{name: "keygen", usage: keygenUsage, about: "make a signing key for a store: the key file and its public key, named for the store's origin", run: runKeygen},
		{name: "keyring", usage: keyringUsage, about: "make a keyring file for an encrypted store: a new random key, current, written 0600", run: runKeyring},
		{name: "demo", hidden: true, run: runDemoMoved},
	}
}

// run is the whole program: it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		topUsage(stderr)
		return cli.ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		topUsage(stdout)
		return cli.ExitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "continuumctl: unknown command %q\n\n", args[0])
	topUsage(stderr)
	return cli.ExitUsage
}

func topUsage(w io.Writer) {
	fmt.Fprintf(w, "continuumctl checks and looks inside CONTINUUM stores, and collects their garbage.\n\nUsage:\n")
	for _, c := range commands() {
		if !c.hidden {
			fmt.Fprintf(w, "  continuumctl %s\n      %s\n", c.usage, c.about)
		}
	}
	fmt.Fprintf(w, "\nFlags may come before or after the positional arguments. Run\n"+
		"\"continuumctl COMMAND --help\" for a command's flags.\n"+
		"Exit codes: 0 success, 1 tampered or corrupt store, 2 usage or I/O error,\n3 (verify --pubkey) a store never signed, intact otherwise.\n\n"+
		"%s\n", demoMoved)
}

// demoMoved says where the demo is: a command of its own, so that the
// tools that check and read stores do not link its fake outside world.
const demoMoved = "The demo (an agent killed in the middle of a deployment, resuming without\n" +
	"doing anything twice) is its own command: go run ./cmd/continuumdemo"

// runDemoMoved answers "continuumctl demo", where the demo used to be: it
// says where it went and runs nothing.
func runDemoMoved(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintf(stderr, "continuumctl demo: the demo is a command of its own now, so that continuumctl does not\n"+
		"link its fake outside world. From a checkout of the repository:\n  go run ./cmd/continuumdemo [--dir DIR]\n")
	return cli.ExitUsage
}

// openInspector opens dir read-only for inspect, stats, export and diff.
func openInspector(cmd, dir, keyring string, stderr io.Writer) (*engine.Inspector, int) {
	ring, err := readKeyring(keyring)
	if err != nil {
		return nil, ctl.Fail(stderr, cmd, err)
	}
	in, err := engine.Inspect(context.Background(), dir, &engine.InspectOptions{Keyring: ring})
	if err != nil {
		return nil, ctl.Fail(stderr, cmd, err)
	}
	for _, w := range in.Warnings() {
		fmt.Fprintf(stderr, "continuumctl %s: warning: %s\n", cmd, w)
	}
	return in, cli.ExitOK
}

// size formats a byte count for people.
func size(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// plural writes n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
