package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestMain lets the test binary stand for continuumdemo when the demo
// starts it as its agent child (os.Executable is the test binary in tests).
func TestMain(m *testing.M) {
	if os.Getenv(demoChildEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	flag.Parse()
	os.Exit(m.Run())
}

// runCLI runs continuumdemo with args and returns its exit code and
// outputs.
func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

var (
	reDuration = regexp.MustCompile(`\b[0-9.]+(ns|µs|ms|s)\b`)
	rePort     = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)
)

// normalize masks what legitimately changes between runs: the store's
// directory, durations and the downstream's port.
func normalize(s string, dirs map[string]string) string {
	for dir, name := range dirs {
		s = strings.ReplaceAll(s, dir, name)
	}
	s = rePort.ReplaceAllString(s, "127.0.0.1:<port>")
	return reDuration.ReplaceAllString(s, "<duration>")
}

// golden compares got with testdata/name.golden, or rewrites it with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("output differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
