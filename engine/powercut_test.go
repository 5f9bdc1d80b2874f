package engine

import (
	"fmt"
	"testing"
)

// everyPowerCut runs a power-loss suite: in each durability mode, with 0%
// and 100% of unsynced data kept at the cut, trial(t, mode, pct, 0) runs
// the sequence without a cut and returns how many filesystem operations
// it performed, then trial(..., target) runs it again for each target,
// cutting the power at that operation. Only with -long (long_test.go) is
// every target cut; without it (and always under -short) every stride-th
// (or fewer: at most reducedCuts, or everyPowerCutUpTo's maxCuts), starting at 1 + shift*pct/100 so that the modes' points interleave;
// under the race detector every fourth of those. empty says what the
// sequence is, for the failure when it performed none ("" allows none).
// reducedCuts bounds the targets cut per mode and kept share without
// -long.
const reducedCuts = 40

func everyPowerCut(t *testing.T, stride, shift uint64, empty string, trial func(t *testing.T, mode Durability, pct int, target uint64) uint64) {
	t.Helper()
	everyPowerCutUpTo(t, stride, shift, reducedCuts, empty, trial)
}

// everyPowerCutUpTo is everyPowerCut with maxCuts in place of reducedCuts;
// 0: no bound but the stride, for a suite that asserts that a narrow
// window of operations (a few in hundreds) was cut, which a bounded
// sample can step over when the sequence grows.
func everyPowerCutUpTo(t *testing.T, stride, shift, maxCuts uint64, empty string, trial func(t *testing.T, mode Durability, pct int, target uint64) uint64) {
	t.Helper()
	for _, mode := range []Durability{Strict, Relaxed} {
		for _, pct := range []int{0, 100} {
			t.Run(fmt.Sprintf("%v/unsynced=%d%%", mode, pct), func(t *testing.T) {
				ops := trial(t, mode, pct, 0)
				if ops == 0 && empty != "" {
					t.Fatalf("%s performed no filesystem operation", empty)
				}
				step, first := uint64(1), uint64(1)
				if reduced() {
					step, first = stride, 1+shift*uint64(pct)/100
					// At most reducedCuts targets: a sequence whose operations
					// grow with the machine's load (an agent committing beside)
					// does not grow the suite with it.
					if maxCuts > 0 && ops/step > maxCuts {
						step = (ops + maxCuts - 1) / maxCuts
					}
				}
				if raceOn {
					step *= 4
				}
				for target := first; target <= ops; target += step {
					trial(t, mode, pct, target)
				}
				t.Logf("%d crash points", ops)
			})
		}
	}
}
