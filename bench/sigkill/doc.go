// Command sigkill is CONTINUUM's SIGKILL crash harness: it runs the scripted
// agent (internal/agent's workload) in a child process on a real directory,
// kills the child with SIGKILL at seeded random moments, restarts it, and
// checks after every restart and at the end that the engine kept its
// promises. A fake downstream (internal/downstream) in the parent process,
// outside the child, records every dispatch by idempotency key: the outside
// world, which survives the kills.
//
// # Usage
//
//	go run ./bench/sigkill -n 2800             # the full run: 2,800 kills
//	go run ./bench/sigkill -n 40 -seed 7 -v    # a short one, reproducible plan
//	go run ./bench/sigkill -mode relaxed -runs 4 -atoms 20 -dir /mnt/disk/x
//
// Flags: -n kills (cycles) in all; -runs and -atoms size one workload (a
// workload is -runs runs of -atoms atoms, round-robin); -seed seeds the
// kill plan and the workloads (default: the clock, printed); -dir is where
// the stores go (default: a temporary directory, removed after a run
// without violations); -mode is the durability mode; -v prints every cycle.
//
// # What a cycle is
//
// The parent starts a child, which opens the store, reports what it found
// (the last seq and chain head of every run, its in-doubt actions, how long
// Open and the first State took) and drives the agent, printing every
// acknowledged atom (run, seq, head) the moment Commit returns. The parent
// kills it with SIGKILL according to a plan drawn for that cycle:
//
//   - delay: after a random delay (anywhere: open, recovery, exec, commit);
//   - before-effect: when the downstream receives the child's k-th call,
//     before it takes effect (the call never happened);
//   - after-effect (mid-exec): after the k-th call took effect, before the
//     reply (the child never heard back: the action is in doubt);
//   - mid-commit: right after the child announces a Commit (the log's
//     fsync is usually under way);
//   - mid-snapshot: shortly after an atom that makes a background snapshot
//     due (a snapshot or engine checkpoint is usually being written);
//   - after-acks: right after the k-th acknowledged atom.
//
// Then it restarts the child. When a workload completes, the next one
// starts in a new directory, until -n kills were made; the last workload
// then runs to completion without kills.
//
// # What is checked
//
// After every restart: every acknowledged atom is present, with the head it
// was acknowledged with (I1, I4), and no idempotency key took effect more
// than once (I3). Every acknowledged head equals the head of a reference run
// of the same workload in process that never crashed. At the end of each
// workload: the store converges to the reference (same last seq, head and
// frame for every run, I4), every key took effect exactly once, and a deep
// engine.Verify passes. The report gives cycles, lost acknowledged atoms,
// keys with duplicate effects, in-doubt actions and how each was resolved,
// restart time p50/p99, convergence and verification; the exit status is 1
// on any violation, 2 on a usage or setup error.
//
// # Caveats
//
//   - SIGKILL kills the process, not the machine: data written but not
//     fsynced survives in the page cache. Power loss is simulated in
//     process by engine/crash_test.go (TestCrashConvergence).
//   - Timing plans (delay, mid-commit, mid-snapshot) land where the child
//     happens to be; the seed fixes the plan, not the instant. A failing
//     cycle is reported with its plan and workload seed, and the store of a
//     failed workload is kept on disk.
//   - Restart time is measured in the child (engine.Open, then the State of
//     every run) and, separately, from the parent's exec of the child to
//     its "ready" line, which adds process start-up.
package main
