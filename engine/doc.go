// Package engine is CONTINUUM's public API: durable runs of an AI agent, an
// exactly-once action ledger, snapshots, and millisecond restarts. It ties
// together the lower packages (wal, frame, chain, ledger, snapshot); none of
// them imports it.
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
//
// # Crash safety, operation by operation
//
//   - Run: the run record (id, nonce) is the commit point; durable before
//     Run returns.
//   - Do: the intent record is durable before exec is called; the
//     certificate is durable before Do returns (strict mode).
//   - Commit: the atom record is the commit point. The frame in memory is
//     changed only after the record is durable.
//   - Snapshots go to Pebble in the background; a crash loses at most
//     snapshots, never atoms: the log still has every delta.
//   - The engine checkpoint (CHECKPOINT, replaced atomically) names the log
//     position Open replays from. It is written after the frame files,
//     snapshots and ledger table it relies on are durable, and records its
//     generation in the snapshot store, which is re-indexed from the log
//     if it is found older (a crash during its rebuild).
//   - Open: the store's directories (its parent, the store, wal, frames,
//     dicts) are fsynced before anything is acknowledged, whatever a
//     previous process left in the page cache after a failed or missing
//     fsync. The fsyncs start on the first Begin or write (or 200 ms after
//     Open), off the restart path; their failure fails the log (I8).
//
// Restart replays only the log tail since the last engine checkpoint (at
// most Options.RestartTail bytes, plus what a crash interrupted), so its
// cost depends on the tail, never on total history. A run's in-memory
// state is built from CHECKPOINT when the run is first used; sealed log
// segments are not opened until read. Pebble and the ledger's persisted
// index load in the background; the first call that needs them waits.
//
// # Caveats
//
//   - One process per store (a file lock). Within the process, one DB.
//   - Default idempotency keys derive from run id, seq and the index of
//     the call among the atom's Do calls with a default key: an agent that
//     relies on them must issue those calls in a deterministic order. It
//     settles an in-doubt action with Resolve of the same action (a
//     default key names the in-doubt default-key call of the atom with the
//     same tool and args; ErrAmbiguousResolve if two are), with
//     ResolveInDoubt, or with Resolve with the key of its InDoubtError;
//     none of them, nor a Do with an explicit key, moves a later default
//     key. After Resolve the agent goes on with the result it recorded: a
//     second Do of the same action with a default key is another call
//     (the next index), so a retry after ResolveFailed passes the
//     InDoubtError's key.
//   - Fail does not consume the seq: the next Begin retries it, and
//     certified actions of the failed attempt are not executed again.
//   - Relaxed durability trades in-doubt actions after a crash for fewer
//     fsync waits; see Relaxed.
//   - The log is kept whole: it is the audit trail. Nothing is garbage
//     collected yet.
//   - Frames of every run are kept in memory once a run is used.
package engine
