package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/cmd/internal/cli"
)

// TestHelpGolden pins the --help of every command (testdata/help_*.golden):
// flags as a user types them, defaults a user would type, and at least one
// example each.
func TestHelpGolden(t *testing.T) {
	code, out, errOut := runCLI("--help")
	if code != cli.ExitOK || errOut != "" {
		t.Fatalf("--help: exit %d, stderr %q", code, errOut)
	}
	golden(t, "help", out)
	for _, c := range commands() {
		if c.hidden {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(c.name, "--help")
			if code != cli.ExitOK || out != "" {
				t.Fatalf("%s --help: exit %d, stdout %q", c.name, code, out)
			}
			golden(t, "help_"+c.name, errOut)
			checkHelp(t, c.name, errOut)
		})
	}
}

var (
	reSingleDashFlag = regexp.MustCompile(`(?m)^  -[a-z]`)
	reHugeDefault    = regexp.MustCompile(`\(default [0-9]{6,}\)`)
)

// checkHelp states the rules the goldens follow, so that a new command or
// flag cannot slip past them by updating its golden.
func checkHelp(t *testing.T, name, help string) {
	t.Helper()
	if !strings.HasPrefix(help, "Usage: continuumctl "+name) {
		t.Errorf("help does not start with the usage line:\n%s", help)
	}
	if reSingleDashFlag.MatchString(help) {
		t.Errorf("a flag is listed as -name, not as a user types it (--name):\n%s", help)
	}
	if m := reHugeDefault.FindString(help); m != "" {
		t.Errorf("a default nobody would type: %s", m)
	}
	i := strings.Index(help, "\nExamples:\n")
	if i < 0 {
		t.Fatalf("no Examples section:\n%s", help)
	}
	if !strings.Contains(help[i:], "  continuumctl "+name) {
		t.Errorf("the examples do not run continuumctl %s:\n%s", name, help[i:])
	}
}
