// Package snapshotbench measures the snapshot store where the engine feels
// it: Pebble's open time (which decides whether the store may sit on the
// restart path), the StateAt lookup (the nearest snapshot plus the positions
// of the following 50 atoms), and the background batch commit. Each figure
// is set beside a baseline measured in the same run: raw Pebble with the
// same data and options.
//
//	go test -run '^$' -bench . -count 5 ./bench/snapshot/
//
// Results with the machine and the commands are in bench/RESULTS-snapshot.md.
package snapshotbench
