// Command continuumdemo shows what CONTINUUM is for: an agent deploys a
// service to three regions against a fake outside world, is killed
// (SIGKILL) in the middle of a billing charge, after the charge went
// through and before the agent heard back, and resumes without doing
// anything twice; then a fork of the finished run reconsiders a step
// ("reconsider step 10": a discounted fee in the third region) without
// repeating any effect it did not change.
//
//	go run ./cmd/continuumdemo [--dir DIR]
//
// The demo starts itself as the agent (a child process, with the hidden
// first argument "agent"), serves the fake downstream (internal/downstream)
// in its own process, which outlives the agent as the real world does, and
// kills and restarts the child, which finishes and ends its run
// (Run.End). Then it prints each side effect with its count (all 1) and
// verifies the store with the ephemeral signing key it made.
//
// Then it starts the agent once more, with --fork: the agent forks the run
// at atom 9 (DB.Fork) and does steps 10 to 14 on the fork with the fee of
// ap-southeast-2 discounted. The script's actions take default keys, so
// the bucket, migration and email the fork repeats unchanged get the
// original's keys and certificates, with no call downstream (I10), and the
// changed charge goes out under the fork's own key; the demo checks each
// (every key the downstream saw was called once), prints the lineage
// (RunInfo.Parent, ForkedAt) and verifies the store again, deeply. It
// leaves the store and the key's public half (DIR.pub) for continuumctl
// inspect, stats, export and verify.
//
// It is a command of its own, not a subcommand of continuumctl, so that
// the tools that check and read stores do not link its fake outside world
// or its scripted agent (layout_test.go at the repository root checks).
//
// # Exit codes
//
//	0  every effect happened exactly once, the fork repeated none, and the
//	   store verifies
//	1  otherwise
//	2  usage error, or an I/O error (a --dir that cannot be created)
package main
