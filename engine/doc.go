// Package engine is CONTINUUM's public API: durable runs of an AI agent, an
// exactly-once action ledger, snapshots, and millisecond restarts. It ties
// together the lower packages (wal, frame, chain, ledger, snapshot); none of
// them imports it.
//
// The design (vocabulary, write and restart paths, the files on disk and
// which are derived, the invariants I1-I12 and the tests that hold each,
// the API's contract) is in the repository's docs/DESIGN.md.
//
// # Usage
//
//	db, err := engine.Open(dir, nil) // nil options: defaults
//	run, err := db.Run(ctx, "deploy-42")
//	atom, err := run.Begin(ctx)
//	out, err := atom.Do(ctx, ledger.Action{Tool: "bucket.create", Args: args},
//		func(ctx context.Context, key string) ([]byte, error) {
//			return cloud.CreateBucket(ctx, name, key) // key: the idempotency key
//		})
//	err = atom.Commit(ctx, new(frame.Delta).
//		AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: thought}).
//		Set("bucket", out))
//
// After a crash the agent opens the store again, calls run.State() and
// carries on: Begin gives the seq that was running, Do of an action that
// completed returns its certified result without calling exec again.
//
// # One name per idea
//
//   - Interrupted: the atom a crash caught (begun, neither committed nor
//     failed, its process gone). Run.Interrupted lists its actions,
//     RunInfo.Interrupted and RunSummary.Interrupted give its seq,
//     Atom.Interrupted says that a re-begun atom is it, OpenInfo.Interrupted
//     counts them.
//   - Running: an atom a live process is running now (RunInfo.Running,
//     RunSummary.Running); an action of it whose certificate is not yet
//     written is running (ActionInfo.Running), not in doubt.
//   - In doubt: an action with a durable intent and no certificate that no
//     live process is running (ledger.StatusIntent, the ledger's name for
//     that state; a *ledger.InDoubtError from Do). It is settled by the
//     Resolve family: ResolveInDoubt and Resolve record that it happened,
//     ResolveInDoubtFailed and ResolveFailed that it did not; the InDoubt
//     forms take the InDoubtError, the others name the action.
//   - Deprecated for one release: Atom.Resumed (Atom.Interrupted),
//     RunSummary.InFlight (Running or Interrupted), RunSummary.InFlightActions
//     (AtomActions).
//
// An exec error comes back as an *ActionError naming the run, seq, tool
// and key; errors.Is and errors.As still match the exec's own error.
//
// # Capabilities
//
// Beside atoms, a run can end (Run.End) and be forked at a committed seq
// (DB.Fork); an action can carry its compensation and a run be rolled
// back (Run.Rollback); several atoms of a run can be in flight at once as
// branches (Run.Branch, optimistic concurrency, ErrConflict); an atom can
// send to and receive from other runs (Atom.Send, Receive); ended runs
// can be deleted and their space reclaimed (DB.Delete, DeleteRuns, GC);
// a store can be encrypted at rest (Options.Keyring) and a run or one
// memory key erased by crypto-shredding (DB.Erase, EraseKey); an action
// can carry a durable retry policy (ledger.Action.Retry, ErrGaveUp);
// values above Options.BlobThreshold go to content-addressed blobs
// outside the log (Atom.PutBlob, Run.OpenValue, OpenBlob); a run can
// wait, durably, for a named event or the clock (Run.Wait, Sleep,
// DB.SendEvent, DB.Ready, Atom.WaitOutcome); an atom can stream
// chunks of output that readers follow (Atom.Append, Run.ReadStream). Each
// method's comment has its contract and errors; the exact semantics of
// each capability, section by section, are in docs/DESIGN.md ("The
// engine's API, section by section"), with the write and restart paths,
// the files on disk, each operation's commit point and the invariants
// I1-I12 and the tests that hold each.
//
// # Guarantees
//
//   - Durability (I1): a Commit, Do or Resolve that returned nil survives
//     any crash. Each waits for the group commit's fsync of the log.
//   - Atomicity (I2): an atom is one log record; after a crash it is wholly
//     present or absent.
//   - Exactly-once effects (I3): an exec whose certificate is durable is
//     never called again for that fingerprint; an in-doubt one is called
//     again only if the action is declared Idempotent, with the same key.
//   - Convergence (I4): a deterministic agent that crashes any number of
//     times ends with the same frames and chain heads as one that never did.
//   - Tamper evidence (I5): every atom is linked into its run's BLAKE3 chain;
//     Verify reports any change, removal, reordering or truncation.
//   - Bad input never panics (I6), corruption is never skipped (I7), and an
//     fsync error is final for the log (I8).
//   - The log is the truth (I9): every other file is derived from it,
//     checked when loaded and rebuilt on a mismatch; damage to the log
//     itself is refused with a *CorruptionError naming the file, offset,
//     run and seq. Restart replays only the tail since the last engine
//     checkpoint (at most Options.RestartTail bytes).
//   - No duplicate effects across a lineage (I10), messages exactly once
//     (I11), and a writer another node took over is fenced (I12,
//     ErrFenced; the exec's context carries FencingToken).
//   - Secrets: the values an Action's Redact pointers name never reach the
//     store. Only the store's own files are opened (no symbolic link,
//     pipe or device below the store's directory is followed).
//   - Resources: Verify, Inspect, Scan and Open's replay decompress within
//     a budget linear in the bytes read (frame.Budget).
//
// # Caveats
//
//   - Encryption hides content, not sizes, counts, timing or run ids.
//   - One process per store (a file lock), one DB per store in a process
//     (ErrLocked); a store that cannot be written is ErrReadOnly.
//   - One size limit, MaxSize (63 MiB), for a record's body and a run's
//     encoded frame, checked before writing (ErrTooLarge).
//   - A full disk fails the log (I8); nothing acknowledged is lost. The
//     snapshot store (Pebble) does not yet survive a full disk.
//   - Default idempotency keys derive from run id, seq and the index of
//     the call among the atom's default-key Do calls: an agent that relies
//     on them must issue those calls in a deterministic order
//     (ErrActionChanged otherwise).
//   - Fail does not consume the seq: the next Begin retries it.
//   - Relaxed durability trades in-doubt actions after a crash for fewer
//     fsync waits; see Relaxed.
//
// docs/DESIGN.md ("The engine's API, section by section", Guarantees and
// Caveats) has each of these in full.
package engine
