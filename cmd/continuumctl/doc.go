// Command continuumctl checks and looks inside a CONTINUUM store, and runs
// the demo that shows what the engine is for.
//
//	continuumctl verify  DIR [--pubkey F] [--state F] [--save-state F] [--json] [--strict] [--deep] [--chain-key F]
//	continuumctl inspect DIR [RUN] [--seq N] [--json]
//	continuumctl stats   DIR [--json]
//	continuumctl export  DIR --run ID [--from N] [--to M]
//	continuumctl demo    [--dir DIR]
//
// Flags may come before or after DIR (and RUN): continuumctl moves every
// flag ahead of the positional arguments before parsing, so both
// `verify --json DIR` (the form DESIGN.md documents) and `verify DIR --json`
// work. After "--" every argument is positional.
//
// # Exit codes
//
//	0  success: for verify, the store is intact
//	1  the store is tampered or corrupt (verify: any failure; with
//	   --strict, any warning too; the other commands: a record they could
//	   not decode)
//	2  usage error, or an I/O error (missing directory, unreadable file,
//	   not a store)
//
// # Read-only
//
// verify, inspect, stats and export never change the store: they take no
// lock, trim no torn tail and write nothing to it (verify --save-state
// writes only the file it is given). They can therefore run beside an agent
// that has the store open; they see the log as it was when they started.
//
// # Caveats
//
//   - inspect and export rebuild frames from the log (StateAt replays the
//     deltas from seq 1), so inspecting a late seq of a long run reads the
//     whole run.
//   - Snapshot ages are in atoms (last seq minus the latest snapshot's seq
//     as of the last engine checkpoint); reading Pebble for times would take
//     its lock.
//   - verify without --pubkey cannot check signatures and says so with a
//     warning; --strict turns that warning (and every other) into exit 1.
package main
