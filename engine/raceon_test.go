//go:build race

package engine

// raceOn: the race detector is on (it looks at interleavings, not counts:
// the power-loss suites cut at fewer points).
const raceOn = true
