package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/wal"
)

// Exit codes, the same for every subcommand.
const (
	exitOK      = 0
	exitCorrupt = 1 // tampered or corrupt store
	exitUsage   = 2 // usage or I/O error
)

// memoryLimit is the soft limit of the Go heap of every subcommand unless
// GOMEMLIMIT says otherwise. The tools hold one record at a time (at most
// 64 MiB compressed and 64 MiB decompressed) besides small per-record
// indexes, so the collector keeps the heap near that instead of letting it
// grow to twice the live set: no tool needs more than 256 MB.
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
		{name: "keygen", usage: keygenUsage, about: "make a signing key for a store: the key file and its public key, named for the store's origin", run: runKeygen},
		{name: "demo", usage: demoUsage, about: "crash an agent in the middle of a deployment and watch it resume", run: runDemo},
		{name: demoAgentCmd, hidden: true, run: runDemoAgent},
	}
}

// run is the whole program: it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		topUsage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		topUsage(stdout)
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "continuumctl: unknown command %q\n\n", args[0])
	topUsage(stderr)
	return exitUsage
}

func topUsage(w io.Writer) {
	fmt.Fprintf(w, "continuumctl checks and looks inside CONTINUUM stores.\n\nUsage:\n")
	for _, c := range commands() {
		if !c.hidden {
			fmt.Fprintf(w, "  continuumctl %s\n      %s\n", c.usage, c.about)
		}
	}
	fmt.Fprintf(w, "\nFlags may come before or after the positional arguments. Run\n"+
		"\"continuumctl COMMAND --help\" for a command's flags.\n"+
		"Exit codes: 0 success, 1 tampered or corrupt store, 2 usage or I/O error.\n")
}

// newFlags returns a flag set for a subcommand whose usage goes to w: the
// synopsis, about, the flags as a user types them (--name VALUE, with
// defaults that are not the zero value), and examples.
func newFlags(name, usage, about, examples string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintf(w, "Usage: continuumctl %s\n\n%s\n", usage, about)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintf(w, "\nFlags (before or after the arguments):\n")
			printFlags(w, fs)
		}
		if examples != "" {
			fmt.Fprintf(w, "\nExamples:\n%s\n", examples)
		}
	}
	return fs
}

// printFlags prints fs's flags the way a user types them: "--name VALUE"
// (the value's name from the usage's `backquoted` word), the usage, and
// "(default X)" when the default is not the zero value. flag's own
// PrintDefaults writes -name and prints defaults such as math.MaxUint64
// as numbers nobody would type.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		value, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
			line += " " + strings.ToUpper(value)
		}
		fmt.Fprintf(w, "%s\n        %s", line, strings.ReplaceAll(usage, "\n", "\n        "))
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// parseFlags parses args with flags allowed anywhere: it moves every flag
// (and the value of a non-boolean flag given as a separate argument) ahead
// of the positional arguments. "--" ends the flags. It returns the
// positional arguments, or an exit code when parsing ended the command
// (--help: exitOK; a bad flag: exitUsage).
func parseFlags(fs *flag.FlagSet, args []string) ([]string, int, bool) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // flag.Parse reports it
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if err := fs.Parse(flags); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, exitOK, false
		}
		return nil, exitUsage, false
	}
	return pos, 0, true
}

// usageErr reports a usage error and prints the command's usage.
func usageErr(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "continuumctl %s: %s\n\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return exitUsage
}

// fail reports an error of a subcommand in plain words and returns its exit
// code: 1 if the store is damaged, 2 otherwise.
func fail(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "continuumctl %s: %v\n", cmd, err)
	if isCorrupt(err) {
		return exitCorrupt
	}
	return exitUsage
}

func isCorrupt(err error) bool {
	return errors.Is(err, engine.ErrCorrupt) || errors.Is(err, wal.ErrCorrupt)
}

// openInspector opens dir read-only for inspect, stats and export.
func openInspector(cmd, dir string, stderr io.Writer) (*engine.Inspector, int) {
	in, err := engine.Inspect(context.Background(), dir, nil)
	if err != nil {
		return nil, fail(stderr, cmd, err)
	}
	for _, w := range in.Warnings() {
		fmt.Fprintf(stderr, "continuumctl %s: warning: %s\n", cmd, w)
	}
	return in, exitOK
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
