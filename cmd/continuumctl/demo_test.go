package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDemo runs the demo end to end: the agent child (this test binary, see
// TestMain) is killed in the middle of the billing charge of the second
// region and restarted; every effect must happen once and the store must
// verify. The output is compared with testdata/demo.golden, times and
// paths masked.
func TestDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	code, out, errOut := runCLI("demo", "--dir", dir)
	if code != exitOK {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if errOut != "" {
		t.Errorf("stderr: %s", errOut)
	}
	for _, want := range []string{
		"SIGKILL", "atom 8 was interrupted", "billing.charge         eu-west-1        1  ok",
		"12 side effects, each exactly once", "verify: INTACT",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "DUPLICATE") {
		t.Errorf("a side effect happened twice:\n%s", out)
	}
	golden(t, "demo", normalize(t, out, map[string]string{dir: "$DIR"}))

	// The public key the demo leaves next to the store verifies it, and
	// the store holds the 14 atoms.
	if _, err := os.Stat(dir + ".pub"); err != nil {
		t.Fatal(err)
	}
	code, vout, _ := runCLI("verify", "--strict", "--pubkey", dir+".pub", dir)
	if code != exitOK {
		t.Errorf("verify --strict --pubkey after the demo: exit %d\n%s", code, vout)
	}
	code, iout, _ := runCLI("inspect", dir)
	if code != exitOK || !regexp.MustCompile(`deploy-checkout-v2\s+14\s+14`).MatchString(iout) {
		t.Errorf("inspect after the demo: exit %d\n%s", code, iout)
	}
}
