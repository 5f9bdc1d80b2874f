package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoBadDirExits2: a --dir that cannot be created is an I/O error of
// the demo (exit 2), named in the message, not an agent failure (exit 1).
func TestDemoBadDirExits2(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"/proc/nope", filepath.Join(file, "store")} {
		code, _, errOut := runCLI("demo", "--dir", dir)
		if code != exitUsage {
			t.Errorf("demo --dir %s: exit %d, want %d\n%s", dir, code, exitUsage, errOut)
		}
		if !strings.Contains(errOut, dir) {
			t.Errorf("demo --dir %s: the message does not name the directory: %s", dir, errOut)
		}
	}
}
