package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/cmd/internal/cli"
)

// TestExitCodes: usage errors exit 2 and say what is wrong, before any
// agent runs.
func TestExitCodes(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "STORE"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--dir", full}, "is not empty"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--bogus"}, "bogus"},
		{[]string{agentCmd}, "want --dir and --downstream"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(tc.args...)
			if code != cli.ExitUsage || out != "" {
				t.Errorf("exit %d, want %d, stdout %q; stderr:\n%s", code, cli.ExitUsage, out, errOut)
			}
			if !strings.Contains(errOut, tc.msg) {
				t.Errorf("stderr does not say %q:\n%s", tc.msg, errOut)
			}
		})
	}
}

// TestBadDirExits2: a --dir that cannot be created is an I/O error of
// the demo (exit 2), named in the message, not an agent failure (exit 1).
func TestBadDirExits2(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"/proc/nope", filepath.Join(file, "store")} {
		code, _, errOut := runCLI("--dir", dir)
		if code != cli.ExitUsage {
			t.Errorf("--dir %s: exit %d, want %d\n%s", dir, code, cli.ExitUsage, errOut)
		}
		if !strings.Contains(errOut, dir) {
			t.Errorf("--dir %s: the message does not name the directory: %s", dir, errOut)
		}
	}
}
