//go:build !race

package wal

// raceEnabled: see race_on_test.go.
const raceEnabled = false
