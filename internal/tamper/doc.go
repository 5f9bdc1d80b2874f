// Package tamper is the tamper suite of CONTINUUM: it checks invariant I9
// (the log is the truth) from the outside, as an attacker and a demanding
// user would, through the public API only.
//
// Build makes a store the way an agent does (several runs, certified
// actions, actions that were in doubt after a real crash of a child process
// and were settled, one left in doubt, a failed atom, snapshots in Pebble,
// a trained dictionary, engine checkpoints, a signed head) and keeps a copy
// of the store at each earlier Close. Plan lists the damage to try on every
// file of it: bytes flipped at seeded offsets, truncations, the file's
// deletion, an older copy of the file swapped in, and files of an earlier
// Close brought back. Each scenario runs on a fresh copy: the continuumctl
// binary (verify, inspect, stats, export) reads it first, each command
// with a deadline, then a child process (the oracle), with a deadline too,
// runs Verify, plain and deep, reads it with the read-only tools (Scan and
// Inspect), then opens it through the engine and reads everything a
// resuming agent reads (every run's LastSeq, Head, Info, State, StateAt and
// Atom at every seq, the interrupted atom, and a Do of every past action,
// which must return the certified result without calling exec), closes
// it, opens it again, reads it all once more and goes on (a new atom with a
// new action), and opens and reads it a third time. The parent compares
// that with the answers of the pristine store:
//
//   - DETECTED: verify reports the store tampered or corrupt and names the
//     damaged file (and, for damage to a log record, the run and seq of
//     that record), and the engine served no wrong answer silently (an
//     error instead of an answer is fine, a different answer is not);
//   - HARMLESS: the engine and the tools read exactly the pristine answers;
//   - MISSED: anything else. In particular verify passing a store that the
//     engine reads differently, refuses to open, or that a refused Open
//     wrote into; and a wrong answer served without an error, whatever
//     verify said.
//   - PANIC, HANG: the child (or a continuumctl it ran) died of a panic or
//     a fatal runtime error (in any goroutine, a dependency's included), or
//     missed its deadline.
//
// The suite passes with no MISSED, PANIC or HANG scenario.
//
// # Usage
//
// A binary that uses Build or Run must let its child processes in first:
//
//	func TestMain(m *testing.M) {
//		if tamper.IsChild() {
//			os.Exit(tamper.ChildMain())
//		}
//		os.Exit(m.Run())
//	}
//
// and the suite runs with every go test of the package: under -short at
// CI size (about 200 scenarios), otherwise at full size (about 1,000):
//
//	go test -short ./internal/tamper -run TestTamper
//	go test ./internal/tamper -run TestTamper -timeout 0
//
// See tamper_test.go for the flags (-tamper=false skips it, -tamper.seed, -tamper.flips,
// -tamper.cuts, -tamper.scenarios, -tamper.only, -tamper.report,
// -tamper.json, -tamper.keep, -tamper.from, -tamper.cli). BenchmarkRestart
// measures the restart with each derived file removed against a normal one.
//
// # Caveats
//
//   - A store is built afresh for every run of the suite, so a seed
//     reproduces the same damage plan (files, kinds, relative positions)
//     on a store of the same shape; run ids, actions and frames are the
//     same, but timestamps, record sizes and Pebble's file numbers may
//     differ. -tamper.keep keeps the exact store (and the damaged copies
//     that failed); -tamper.from reruns the plan on it.
//   - The oracle writes to the damaged copy as an agent would (a Begin, Do
//     and Fail per run, one committed atom, Close's checkpoints); copies
//     are thrown away afterwards.
//   - A scenario damages one file at a time; coordinated edits of several
//     files (a frame file and CHECKPOINT made to agree) are not tried.
package tamper
