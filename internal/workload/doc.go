// Package workload is the scripted agent that CONTINUUM's benchmarks, crash
// tests and SIGKILL harness all drive: a deterministic description of what
// an AI agent does at each atom (one thought-action cycle), so that a run
// replayed after a crash, or the same run against another store, produces
// byte-identical inputs.
//
// A run is R runs x A atoms. Each atom holds one tool call (about 200 bytes
// of JSON arguments and a result of about 300 bytes), one assistant message
// of about 500 bytes of realistic agent text (the thought), one working
// memory update, and every tenth atom a new subgoal. The text comes from
// internal/agenttext, so it compresses like a real transcript, not like
// zeros or random bytes.
//
// Usage:
//
//	for seq := uint64(1); seq <= atoms; seq++ {
//		a := workload.Script(workload.RunID(i), seq, seed)
//		result := workload.Downstream(a.Tool, a.Args, a.Key) // == a.Result
//		... store a.Thought, a.MemKey/a.MemVal, a.Subgoal as the atom's delta
//	}
//
// State is the whole accumulated state of one run (its objective, subgoals,
// memory map, every thought and the tool messages) as a plain agent
// framework would keep it: it is what a checkpoint-per-step store writes at
// every atom, and what a snapshot holds. EncodeDelta/DecodeDelta give the
// JSON form of one atom's change, for stores that keep deltas.
//
// # Guarantees
//
// Script and Downstream are pure functions: the same arguments give
// byte-identical results on every platform and Go version (agenttext has its
// own random source, and the per-atom seed is mixed here with fixed
// constants). Crash tests rely on it: an agent that re-executes atom n after
// a crash asks for exactly the same tool call and writes exactly the same
// delta as the agent that never crashed. Downstream depends only on (tool,
// args, key), so a re-executed idempotent call returns the same bytes, as a
// downstream that honours idempotency keys would.
//
// # Caveats
//
// Sizes are averages, not exact: one atom's thought may be 450 or 600
// bytes. The memory keys come from a fixed set of 24, so a run's memory map
// stays bounded while its thoughts and messages grow without bound, as an
// agent's transcript does. Seqs start at 1 (the first atom of a run sets the
// objective); Script accepts seq 0 and returns a well-formed atom, but no
// run has one. A State is not safe for concurrent use.
package workload
