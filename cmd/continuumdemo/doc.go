// Command continuumdemo shows what CONTINUUM is for: an agent deploys a
// service to three regions against a fake outside world, is killed
// (SIGKILL) in the middle of a billing charge, after the charge went
// through and before the agent heard back, and resumes without doing
// anything twice.
//
//	go run ./cmd/continuumdemo [--dir DIR]
//
// The demo starts itself as the agent (a child process, with the hidden
// first argument "agent"), serves the fake downstream (internal/downstream)
// in its own process, which outlives the agent as the real world does, and
// kills and restarts the child. Then it prints each side effect with its
// count (all 1), verifies the store with the ephemeral signing key it made,
// and leaves the store and the key's public half (DIR.pub) for
// continuumctl inspect, stats, export and verify.
//
// It is a command of its own, not a subcommand of continuumctl, so that
// the tools that check and read stores do not link its fake outside world
// or its scripted agent (layout_test.go at the repository root checks).
//
// # Exit codes
//
//	0  every effect happened exactly once and the store verifies
//	1  otherwise
//	2  usage error, or an I/O error (a --dir that cannot be created)
package main
