//go:build race

package wal

// raceEnabled scales the long randomized suites down under the race
// detector, which runs them 5-10x slower; the plain `go test -short` run
// keeps their full size (2,100 crash points, every byte flipped and cut).
const raceEnabled = true
