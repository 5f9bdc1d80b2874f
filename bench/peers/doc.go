// Command peers runs CONTINUUM's agent workload against the stores people
// use instead, side by side in one process, and prints how each fares:
// atoms per second and atom latency (p50, p99) at R = 1, 16 and 64
// concurrent runs, bytes on disk per atom, and the time to restore one run
// and all runs after a restart; then restart time against history size.
// It writes the figures as a Markdown table and as SVG line charts in
// plots/.
//
// It is its own Go module (github.com/continuumdb/continuum/bench/peers,
// with a replace directive pointing at the repository root) so that its
// peers' dependencies, bbolt and modernc.org/sqlite, never enter the main
// module.
//
// Usage (from this directory):
//
//	go run . -runs 1,16,64 -atoms 200 -reps 3 -history 100,1000,5000 -dir /path/on/a/real/disk
//
// # The workload
//
// R runs x A atoms, from internal/workload: each atom is one tool call
// (about 200 bytes of JSON arguments, a 300-byte result) and one delta with
// about 500 bytes of agent text, a memory update, a subgoal every tenth
// atom. Each run is one goroutine doing its atoms one after another, as an
// agent does; the R runs go concurrently. Each atom is written as three
// durable records, the way exactly-once execution needs them: the intent
// (before the tool call), the certificate (its result) and the delta; every
// 50 atoms a snapshot of the whole accumulated state (workload.State as
// JSON) is written too, synchronously, by the run that reaches it. An
// atom's latency is the time from its first write to the last one durable,
// snapshot included when one is due. Workload generation happens before
// the clock starts.
//
// # The stores
//
//	pebbledirect     Pebble used directly the way a user would: intent,
//	                 certificate and delta each a pebble.Sync Set; restore =
//	                 latest snapshot + the deltas after it.
//	bbolt            go.etcd.io/bbolt, each record its own synced Update.
//	sqlite           modernc.org/sqlite, journal_mode=WAL, synchronous=FULL,
//	                 three INSERTs per atom, each its own transaction.
//	sqlitecheckpoint the checkpoint-saver layout of agent frameworks: one row
//	                 per atom holding the full accumulated state (same
//	                 SQLite settings). No separate intent or certificate.
//	groupcommit      a lower bound, not a store: one append-only file, one
//	                 writer goroutine batching everything pending into one
//	                 write and one fdatasync. Open scans the whole file to
//	                 index it in memory, so restart grows with history.
//	continuum        this engine, strict durability (the default): Begin,
//	                 Do, Commit per atom; its own background snapshots.
//	continuumrelaxed this engine with engine.Relaxed durability.
//
// Adding a store is one file with an opener and one line in the registry
// (stores.go).
//
// # Caveats
//
// Restores run with the operating system's page cache warm (the files were
// just written by the same process); dropping caches would disturb the
// other users of a shared machine. The history-size experiment builds its
// histories with syncs off (the files are the same, only slower to make)
// and measures open + restore with syncs on. sqlitecheckpoint writes
// O(atoms^2) bytes, so history sizes whose projected volume exceeds
// -maxwrite are skipped for it, and reported as skipped. Figures taken on
// a machine shared with other work are noisy: use -reps and read medians.
package main
