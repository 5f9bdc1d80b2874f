package engine

import (
	"flag"
	"os"
	"testing"
)

// longFlag runs the engine's long suites at full size: every crash point
// of the power-loss sweeps (everyPowerCut), 5,000 crash points per mode in
// TestCrashConvergence, the full fault, disk-full and snapshot-fault trial
// counts, and the decompression bombs (some GiB in child processes). .ci/run
// and bench/ set it (or CONTINUUM_LONG=1):
//
//	go test ./engine -long -timeout 60m
//
// Without it, `go test ./engine` runs every suite at the sizes -short
// uses, so that the package stays far below go test's default timeout on
// a loaded 2-core machine; -short also skips the tests that open stores on
// disk some hundred times.
var longFlag = flag.Bool("long", false, "run the long suites at full size (also CONTINUUM_LONG=1); .ci/run sets it")

// long reports whether the long suites run at full size.
func long() bool { return *longFlag || os.Getenv("CONTINUUM_LONG") == "1" }

// reduced reports whether a long suite runs at its reduced size: without
// -long, and always under -short.
func reduced() bool { return testing.Short() || !long() }

// ReducedTests is reduced, for the external test package (engine_test).
func ReducedTests() bool { return reduced() }

// LongTests is long, for the external test package (engine_test).
func LongTests() bool { return long() }
