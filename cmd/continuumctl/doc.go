// Command continuumctl checks and looks inside a CONTINUUM store, and
// collects its garbage.
//
//	continuumctl verify  DIR [--pubkey F] [--state F] [--save-state F] [--json] [--strict] [--deep] [--chain-key F]
//	continuumctl inspect DIR [RUN] [--seq N] [--json]
//	continuumctl stats   DIR [--json]
//	continuumctl export  DIR --run ID [--from N] [--to M]
//	continuumctl diff    DIR RUN_A A [RUN_B] B [--json]
//	continuumctl view    DIR [--listen ADDR] [--keyring F] [--allow-remote]
//	continuumctl keygen  (--store DIR | --origin NAME) --out FILE [--json]
//	continuumctl keyring --out FILE [--id ID] [--json]
//	continuumctl gc      DIR [--run ID]... [--status S] [--ended-before T] [--reason TEXT] [--key FILE] [--json]
//	continuumctl erase   DIR --run ID [--run ID]... [--memory-key KEY]... --keyring FILE [--reason TEXT] [--key FILE] [--json]
//
// Every command's --help lists its flags as they are typed (--name VALUE)
// and examples; testdata/help_*.golden pins them.
//
// Flags may come before or after DIR (and RUN): continuumctl moves every
// flag ahead of the positional arguments before parsing, so both
// `verify --json DIR` (the form DESIGN.md documents) and `verify DIR --json`
// work. After "--" every argument is positional.
//
// It links the engine's public API and the offline tools (package
// offline: Verify, Inspect, Inspector.Export, Inspector.Diff), and classifies errors by
// the public engine.ErrCorrupt alone. The demo that shows what the engine
// is for, with its fake outside world, is a command of its own,
// cmd/continuumdemo, so none of it is linked here (layout_test.go checks);
// "continuumctl demo" says so and exits 2.
//
// # Exit codes
//
//	0  success: for verify, the store is intact
//	1  the store is tampered or corrupt (verify: any failure; with
//	   --strict, any warning too; the other commands: a record they could
//	   not decode)
//	2  usage error, or an I/O error (missing directory, unreadable file,
//	   not a store)
//	3  verify --pubkey: the store was never signed (checkpoint records,
//	   none signed) and is intact otherwise. Not 0: nothing vouches for
//	   it. Not 1: nothing in it shows tampering; "result: NOT SIGNED"
//
// # Read-only, and the commands that write
//
// verify, inspect, stats, export, diff, view, keygen and keyring never change
// the store: they take no lock, trim no torn tail and write nothing to it (verify
// --save-state, keygen --out and keyring --out write only the files they are
// given, atomically: a temporary file, fsync, rename, fsync of the
// directory). They can therefore run beside an agent that has the store
// open; they see the log as it was when they started. gc, erase and rekey
// write to the store: they open it as the engine does, take its lock, and
// fail while another process has it open.
//
// # Signing keys
//
// keygen writes a signing key file (FILE) and its public key file
// (FILE.pub), both 0600, named for the store's origin: the signer name the
// engine signs a store under, "continuum-" and the first 16 hex digits of
// its id (engine.DB.Origin). --store DIR reads the origin from the store's
// STORE file, so the store must exist (open it once); --origin NAME gives
// it. A store is signed from the first checkpoint written with
// Options.SigningKey; verify --pubkey reports each unsigned checkpoint
// before it as a bad signature, so make the key before the first run.
// verify fails a public key file of another origin (key-origin).
//
// # Erased memory keys
//
// In an encrypted store, the values of erasable memory keys
// (engine.Options.ErasableKeys) are sealed with data keys of their own.
// inspect, export and diff open them with --keyring; once a key was
// erased (erase --memory-key, DB.EraseKey) they show it as erased ("KEY:
// erased" in a frame, "erased_keys" in JSON frames, a set_sealed op with
// "erased" and no value), never its values, and verify lists the erasure.
//
// # Running, interrupted, in doubt
//
// inspect calls an atom begun but neither committed nor failed "running"
// when a live process holds the store (this process's DBs, or another
// process's fcntl lock on LOCK, asked with F_GETLK without taking it) and
// "interrupted" otherwise; an action with an intent and no certificate is
// "running" in a running atom and "in doubt" elsewhere. The limits: a
// process on another machine (a network filesystem) is not seen, and an
// action an earlier crash left in doubt in the atom now running looks
// running until the agent settles it.
//
// # Caveats
//
//   - inspect and export rebuild frames from the log (StateAt replays the
//     deltas from seq 1), so inspecting a late seq of a long run reads the
//     whole run.
//   - diff holds the atoms of both its sides at once (offline.Inspector.Diff):
//     a diff across a long history needs memory for all of them; narrow the
//     seqs, or export the run.
//   - Snapshot ages are in atoms (last seq minus the latest snapshot's seq
//     as of the last engine checkpoint); reading Pebble for times would take
//     its lock.
//   - verify --deep holds per-action indexes of the whole log (about
//     1.4 KB per action measured; 238 MB for 510,000 records;
//     docs/THREATS.md) and every run's frame: past half a million actions,
//     or with runs near the 63 MiB frame limit (738 MB for three), it needs
//     more than 256 MB. verify without --deep does not grow so.
//   - A store with a record near the frame limit costs every command about
//     200 MB (one record read and decompressed). inspect streams a frame's
//     large values (198-297 MB for a run at the limit); export and diff
//     --json render an atom's delta ops whole (402-487 MB for an atom at
//     the limit).
//   - verify without --pubkey cannot check signatures and says so with a
//     warning; --strict turns that warning (and every other) into exit 1.
package main
