package main

import (
	"strings"
	"testing"

	"github.com/continuumdb/continuum/cmd/internal/cli"
)

// TestHelpGolden pins --help (testdata/help.golden): flags as a user types
// them, and examples that run the demo.
func TestHelpGolden(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		code, out, errOut := runCLI(arg)
		if code != cli.ExitOK || out != "" {
			t.Fatalf("%s: exit %d, stdout %q", arg, code, out)
		}
		golden(t, "help", errOut)
		if !strings.HasPrefix(errOut, "Usage: continuumdemo [--dir DIR]\n") || strings.Contains(errOut, "\n  -dir") ||
			!strings.Contains(errOut, "\nExamples:\n  continuumdemo\n") {
			t.Errorf("%s: help without its usage line, --dir as typed, or an example running it:\n%s", arg, errOut)
		}
	}
}
