// Package cli is what the module's commands (continuumctl, continuumdemo)
// share, so that they behave alike: the exit codes, flags that may come
// before or after the arguments and are listed as a user types them, and
// how an error becomes an exit code.
//
//	const prog cli.Program = "continuumctl"
//	fs := prog.Flags("stats", "stats DIR [--json]", about, examples, stderr)
//	asJSON := fs.Bool("json", false, "print one JSON object")
//	pos, code, ok := cli.ParseFlags(fs, args)
//	if !ok {
//		return code // --help (0) or a bad flag (2), already reported
//	}
//	...
//	if err != nil {
//		return prog.Fail(stderr, "stats", err) // 1 if the store is damaged, else 2
//	}
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
)

// Exit codes, the same for every command.
const (
	ExitOK      = 0
	ExitCorrupt = 1 // a tampered or corrupt store (the demo: an effect not exactly once)
	ExitUsage   = 2 // a usage or I/O error
	// ExitNotSigned: verify --pubkey of a store that carries no signature
	// at all (written without a signing key) and is otherwise intact:
	// nothing vouches for it, and nothing in it shows tampering either. A
	// script that accepts only 0 refuses it, as it should.
	ExitNotSigned = 3
)

// Program is a command-line program: its name, as users type it.
type Program string

// Flags returns a flag set for command cmd of p ("" for a program without
// subcommands), named "p cmd" for its messages, whose usage goes to w:
// the synopsis (usage, after the program's name), about, the flags as a
// user types them (--name VALUE, with defaults that are not the zero
// value), and examples.
func (p Program) Flags(cmd, usage, about, examples string, w io.Writer) *flag.FlagSet {
	name := string(p)
	if cmd != "" {
		name += " " + cmd
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintf(w, "Usage: %s %s\n\n%s\n", p, usage, about)
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

// ParseFlags parses args with flags allowed anywhere: it moves every flag
// (and the value of a non-boolean flag given as a separate argument) ahead
// of the positional arguments. "--" ends the flags. It returns the
// positional arguments, or an exit code when parsing ended the command
// (--help: ExitOK; a bad flag, reported: ExitUsage).
func ParseFlags(fs *flag.FlagSet, args []string) ([]string, int, bool) {
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
			return nil, ExitOK, false
		}
		return nil, ExitUsage, false
	}
	return pos, 0, true
}

// UsageErr reports a usage error of the command fs parses, prints its
// usage, and returns ExitUsage.
func UsageErr(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s\n\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return ExitUsage
}

// Fail reports an error of command cmd of p in plain words and returns
// its exit code: ExitCorrupt if the error is a damaged store (IsCorrupt),
// ExitUsage otherwise.
func (p Program) Fail(stderr io.Writer, cmd string, err error) int {
	name := string(p)
	if cmd != "" {
		name += " " + cmd
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	if IsCorrupt(err) {
		return ExitCorrupt
	}
	return ExitUsage
}

// IsCorrupt reports whether err says that a store is damaged: whether it
// matches engine.ErrCorrupt, the one corruption error of the public API
// (record.ErrCorrupt, which every damage the engine and the offline tools
// report matches, the log's framing included).
func IsCorrupt(err error) bool { return errors.Is(err, engine.ErrCorrupt) }

// PrintFinding prints one failure or warning of a verification over a few
// lines: kind, run and seq; where; what was expected and found.
func PrintFinding(w io.Writer, f chain.Failure) {
	var b strings.Builder
	fmt.Fprintf(&b, "  - %s", f.Kind)
	if f.RunID != "" {
		fmt.Fprintf(&b, " in run %q", f.RunID)
	}
	if f.Seq != 0 {
		fmt.Fprintf(&b, " at seq %d", f.Seq)
	}
	b.WriteString("\n")
	if f.Location != "" {
		fmt.Fprintf(&b, "      location: %s\n", f.Location)
	}
	if !f.Expected.IsZero() {
		fmt.Fprintf(&b, "      expected: %s\n", f.Expected)
	}
	if !f.Actual.IsZero() {
		fmt.Fprintf(&b, "      actual:   %s\n", f.Actual)
	}
	if f.Detail != "" {
		fmt.Fprintf(&b, "      detail:   %s\n", f.Detail)
	}
	io.WriteString(w, b.String())
}
