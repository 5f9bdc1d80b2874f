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
// # Lifecycle and forks
//
// A run is active until Run.End(ctx, status, result) ends it completed,
// failed or cancelled: the end is a record of the log and the last link of
// the run's chain (status, time and result are chained), durable when End
// returns, and final (Begin and End then fail with ErrRunEnded; End with an
// atom in flight fails with ErrAtomInProgress). Run.Status and RunInfo say
// how a run ended; DB.Runs(status...) selects by status. With a signing
// key a signed final checkpoint covers the end's link.
//
// DB.Fork(ctx, src, at, id) starts run id from run src's state at a
// committed seq at ("reconsider step at+1", a context rolled back): the
// fork's state at at equals src.StateAt(at), StateAt below at answers from
// src's history, its first atom is at+1, and its chain begins with a
// record committing to (src, at, src's head at at), which verify checks.
// RunInfo.Parent and ForkedAt name the lineage. Fork writes one record
// whatever the history: the fork's state is built on its first use (from
// src.StateAt(at)), so its cost is paid by the first State or Begin, and
// an error reading src's history there is that call's. No duplicate
// effects across a lineage (I10): an action the fork repeats at the same
// position (same tool, same sanitized args, default key) gets the key its
// parent used there, so the ledger returns the parent's certificate
// without calling exec, or reports the parent's in-doubt action in doubt;
// an action that differs gets the fork's own key, which no run of the
// lineage used. Explicit keys are the caller's, as everywhere.
//
// # Compensation and rollback (sagas)
//
// An action can carry the action that undoes it: ledger.Action.Compensate
// (a tool and args; its Key, Idempotent and Redact as for any action). It
// is recorded in the action's intent, so it is durable before exec is
// called, and it is part of the action's fingerprint (an action without
// one keeps the fingerprint it always had).
//
// Run.Rollback(ctx, to, RollbackOptions{Exec, AllowNotUndone}) returns the
// run to its state at seq to. It undoes the actions this run certified at
// a seq after to (those of committed atoms to+1..LastSeq and of an atom a
// crash interrupted), newest first, each once, compensations of an
// earlier rollback excepted (an undo is never undone): it runs each
// compensation through the ledger as an action of a new atom at
// LastSeq+1, with the exec RollbackOptions.Exec gives for it and the key
// its Compensate gave or ledger.CompensationKey(the undone action's
// fingerprint), deterministic, so exactly once whatever crashes: a
// certified compensation is never run again, an in-doubt one is run again
// with the same key if Idempotent, and otherwise Rollback fails with an
// error matching ledger.ErrInDoubt, settled by Run.ResolveCompensation or
// ResolveCompensationFailed. Then it commits that atom: one replace_frame
// op (frame.Delta.ReplaceFrame) that makes State equal StateAt(to), its
// actions the compensations. History stays: StateAt of the seqs rolled
// back still reads them, and LastSeq grows by one. A certified action
// without a compensation is listed in RollbackResult.NotUndone and
// refuses the rollback (ErrNotUndone, nothing written) unless
// AllowNotUndone lets its effect stay.
//
// A rollback record (the target, the run's head, what it undoes and how)
// is durable before the first compensation runs; from then the rollback
// is pending (Run.PendingRollback) until its atom commits, whatever
// happens: Begin and End fail with ErrRollbackPending, an engine
// checkpoint keeps the record in the replayed tail, and Rollback(ctx, to,
// ...) with the same target resumes it after an error or a restart
// (RollbackResult.Resumed), running only what is not certified yet. The
// completing atom is chained over the rollback record too, so verify
// reports a changed or removed record at the run and that atom's seq;
// verify (Report.Rollbacks), inspect (RunSummary.Rollbacks) and export
// (ExportedAtom.Rollback) show each rollback and what it undid. A
// rollback of a fork stops at its fork point: the parent's effects are
// the parent's.
//
// # Branches
//
// Run.Branch(ctx, name, reads...) begins a branch: one of several atoms of
// a run in flight at once (optimistic concurrency). Its exact meaning:
//
//   - Base: a branch reads the state as of the run's LastSeq when it
//     began (Atom.Base; read it with Run.StateAt(ctx, atom.Base())). It has
//     no seq until it commits (Atom.Seq is 0): seqs are assigned in commit
//     order, LastSeq+1 for the first branch whose Commit gets its record
//     into the log, the next for the next.
//   - Writes and reads: what a delta writes is derived from its ops, as
//     state keys (StateKey, record.DeltaWrites): SetObjective the objective (ObjectiveKey);
//     AddSubgoal and SetSubgoalStatus the subgoal (SubgoalKey(id)); Set
//     and Delete the memory key (MemoryKey); AppendScratch and
//     ClearScratch the scratchpad (ScratchpadKey); AppendMessage and
//     DropMessages the conversation (MessagesKey: every message, so two
//     appends conflict); AddPending and RemovePending the pending action
//     (PendingKey(call id)); ToolOutput both the conversation and the
//     pending action; an op this version does not know, the whole frame
//     (FrameKey). reads are the keys the branch declares it read besides;
//     FrameKey reads everything.
//   - Conflict: at Commit, if an atom with a seq after the branch's base
//     (a branch or not, committed or with its record in the log already)
//     wrote a key the branch writes or declared it reads, Commit fails
//     with a *ConflictError (errors.Is(err, ErrConflict)) that names that
//     atom and key, and applies nothing: nothing is written. Otherwise the
//     delta is applied on top of every atom before it (it touches none of
//     what they wrote, so it applies to their state as to its base's).
//     Either way the branch is over (ErrAtomDone from then on) and its
//     name free.
//   - The window: a run keeps the write sets of the atoms after the oldest
//     base of its branches in flight, at most MaxBranchWindow, and none
//     once no branch is in flight. A branch whose base is older than the
//     oldest it keeps conflicts, conservatively (ConflictError.Lost): it
//     may have lost to an atom whose writes are forgotten.
//   - Retry: a branch's default idempotency keys derive from the run, its
//     name and the call's index (ledger.BranchKey), not from a seq. Branch
//     again with the same name after a conflict, a Fail or a crash, and
//     the retry's Do of an action the earlier attempt certified returns
//     the certified result without calling exec; an action in doubt
//     follows Do's rules (ResolveInDoubt and Resolve work in the retry).
//     A name is therefore one piece of work of the run: reusing it for
//     other work gets that work the earlier certificates. Two branches in
//     flight never share a name (ErrAtomInProgress). A branch's intents
//     and certificates carry seq 0, since its seq is not known when they
//     are written; its atom record lists their fingerprints as any
//     atom's does.
//   - Fail of a branch writes nothing (a branch reserves no seq): the
//     branch is over, its name free, its certified actions stay.
//   - Begin keeps its single-atom meaning: Begin fails with
//     ErrAtomInProgress while a branch is in flight, Branch while an atom
//     of Begin runs or a crash's interrupted atom waits to be begun again,
//     End while either is in flight; Rollback fails with ErrAtomInProgress
//     while a branch is in flight, Branch with ErrRollbackPending while a
//     rollback is pending. An atom of Begin is the only atom of its run in
//     flight: its base is seq-1, and it never conflicts.
//   - Durability and readers: a branch's Commit that returned nil is
//     durable (I1), as any Commit. The commits of a run's branches share
//     group commits: each record is chained to the run's newest record in
//     the log (durable or not) and enqueued in seq order, the run's lock
//     released for the fsync; the atom is applied to the run's state, in
//     seq order, once it and every record before it are durable. A log
//     failure fails every branch commit chained after the failed record.
//   - Messages between runs: a branch neither sends nor receives them
//     (Send and the Receive family fail with ErrBranchMessage); an atom
//     of Begin does.
//   - Crash: branches in flight are lost (they are not interrupted atoms:
//     Run.Interrupted does not list them); their certified actions stay
//     in the ledger for the retry.
//   - The atom DAG: a branch's atom records its base, its name and its
//     declared reads in its body (record.ExtTagBase, record/branch.go),
//     covered by the chain; verify checks that the base is before the atom,
//     not before the run's fork point and at most record.MaxBranchLag
//     atoms behind, and with Deep that no atom between them wrote what
//     the branch wrote or declared it reads (record.DeltaWrites, the
//     engine's own rule); inspect (AtomInfo.Base, Branch, Reads) and
//     export (the branch field) show them. An atom without it has base
//     seq-1.
//
// # Retention
//
// DB.Delete(ctx, ids...) and DB.DeleteRuns(ctx, DeleteOptions{Status,
// EndedBefore, ...}) delete ended runs (ErrRunNotEnded otherwise): one
// delete record each in the log, written together and durable when they
// return, the run's deletion link past its end with a chain checkpoint of
// it, signed with the store's key. A run with a fork not deleted with it
// is refused when named (ErrRunHasForks) and kept when a policy selects
// it: the fork reads its history. A deleted run is gone from Runs, Run
// and Fork for good, its id never created again (ErrRunDeleted);
// DB.Deleted lists the deletions. DB.GC reclaims the space: it removes
// the segments at the start of the log whose records are all dead
// (records of deleted runs, superseded store heads), after an engine
// checkpoint, the ledger forgetting their actions and RETENTION naming
// the first segment kept, and compacts the later ones that are wholly or
// mostly dead (Options.CompactDead): each is rewritten in place with its
// live records at their positions, so no derived file changes (package
// internal/retention says what happens at a crash at each step: nothing of a live
// run is ever touched). Commits go on beside it;
// Deletes wait for it. The delete records stay, so that verify tells a
// run deleted by policy (Report.Deleted) from one whose records vanished
// (reported as ever). continuumctl gc does the same from the command
// line, for a store no process has open.
//
// DB.Erase(ctx, id, reason) erases an ended or deleted run of an
// encrypted store (crypto-shredding): an erase record deletes the run,
// and the run's data key is then dropped from KEYS, so that nothing it
// sealed (atoms, the intents and certificates of its default-key actions,
// its end result, frame files, snapshots) can be opened again, in the
// store or in any copy of its log, while every link of the chain still
// verifies and verify lists the run erased (DeletedRun.Erasure). The
// records of actions with explicit keys are the store's and stay (another
// run may have repeated one). A crash in an erasure is finished, or
// undone, by the next Open (erase.go). continuumctl erase does the same
// from the command line.
//
// DB.EraseKey(ctx, id, key, reason) erases the values of one memory key
// of a run, live or ended, in an encrypted store: the memory keys listed
// in Options.ErasableKeys ("email", or a prefix: "pii/*") have each value
// sealed with a data key of their own (one per run and key, in KEYS), the
// frame carries it sealed (frame.Frame.Sealed) and State, StateE and
// StateAt open it on the way out. EraseKey appends an erase-key record
// (record.KindEraseKey, a signed link beside the run's chain that names
// the data keys) and then drops those keys from KEYS: every value of the
// key written until then reads as absent, in the run, at every seq, in a
// fork that inherited it, and in any copy of the log; a value written
// later takes a new key and stays. Verify lists the erasure
// (Report.ErasedKeys) and compares it with KEYS. It returns ErasedKey;
// ErrNotErasable for a key whose values were never sealed so,
// ErrNothingToErase when they are all erased already (erasekey.go).
// Erasing the run whole (Erase) erases its memory keys' data keys too.
//
// # Encryption at rest
//
// Options.Keyring (a seal.Keyring: the user's key-encryption keys, by id;
// seal.NewKeyring for keys in memory, or a KMS behind the interface)
// creates a store encrypted: every payload that holds agent data is
// sealed with AES-256-GCM under a data key, one per run and one for the
// store, after compression (atom bodies, intents, certificates, end
// results, fail reasons, frame files, snapshot values, the ledger's table,
// INBOX). The data keys are wrapped by the keyring and kept in KEYS, which
// is made durable before anything is sealed with a key it adds (a run's
// key before its creation record); KEYS is as precious as the log: back
// them up together. Run ids, seqs, heads, kinds, statuses and times stay
// in the clear, and the chain links each record over its sealed bytes, so
// Verify without any key checks every record, link, checkpoint and
// signature (Report.Unchecked says the payloads were not opened);
// VerifyOptions.Keyring with Deep also opens every payload and checks
// frames, fingerprints, certificates and references. Open fails with
// ErrKeyring for an encrypted store without a keyring (or a plaintext one
// with a keyring: a store stays what it was created), and with an error
// matching seal.ErrUnknownKey or seal.ErrWrongKey for a keyring that lacks
// a key KEYS needs or holds a wrong one, before any record is read.
// Rotation: a keyring whose Current is a new key wraps the data keys of
// the runs created from then on; the old key stays needed until DB.Rekey
// (continuumctl rekey) re-wraps every data key with the current one. The
// read-only tools take the keyring too (InspectOptions.Keyring,
// continuumctl --keyring FILE, seal.ParseKeyringFile's format). A
// plaintext store's format is byte for byte what it was. See
// docs/DESIGN.md, "Encryption at rest", and record/seal.go.
//
// # Messages between runs
//
// An atom sends bytes to another run of the store with Atom.Send(ctx, to,
// payload), and receives with Atom.Receive(ctx) (any sender),
// Atom.ReceiveFrom(ctx, from) (one sender) or Atom.TryReceive(ctx) (no
// wait). Run.Inbox lists what a run has not consumed yet. Exactly:
//
//   - A message exists if and only if its sending atom commits (I11): it
//     is part of that atom's record (an extension of its body, covered by
//     its chain link), so an atom that fails or that a crash interrupts
//     sent nothing, and no run ever sees its messages. Its id, MessageID
//     (sending run, the atom's seq, its place among the atom's messages),
//     is the log's: stable across restarts and copies.
//   - The receiving run sees a message in its inbox from the moment the
//     sending Commit returns. Receive returns the oldest message no
//     running atom of the run received: oldest by the log position of the
//     atom that sent it, so each sender's messages come in the order sent.
//     It waits for one until ctx ends (ctx's error), or the store closes
//     (ErrClosed).
//   - Consuming is part of the receiving atom's commit: the ids it
//     received are in its record. Until that Commit returns, the messages
//     stay in the inbox (Inbox lists them); after a Fail, or a crash, a
//     later attempt receives them again. So after any crash each message of
//     a committed atom is consumed at most once, by its receiver, in order
//     per sender, and once the receiver goes on, exactly once; verify
//     checks each consumed message was sent before by a committed atom, to
//     this run, and is consumed once, in order per sender.
//   - A message to a run that does not exist yet waits for it: a run
//     created later with that id finds it in its inbox. Send to a run that
//     ended fails with ErrRunEnded, to a deleted one with ErrRunDeleted, and
//     a message whose receiver ends before consuming it is never
//     delivered: an ended run's inbox is empty (its undelivered messages
//     stay in the log, where inspect and export show them). Deleting a run
//     withdraws its messages that no run consumed yet.
//   - A fork does not inherit the inbox: messages are addressed by run id,
//     and a fork is another run; what its parent consumed before the fork
//     point is in the history the fork shares, and nothing else is.
//   - A message to the sending run itself is consumed by one of its later
//     atoms. An atom sends and receives at most MaxMessagesPerAtom
//     messages, each payload at most MaxMessageSize bytes
//     (ErrMessageTooLarge).
//   - Across stores: messages are between the runs of one store. A run of
//     another store (another process, another machine) is another id
//     space: Send names a run of this store, existing or to come. The
//     replication of a store carries its messages with the atoms that send
//     and consume them, since they are in the same records.
//
// The inbox is derived state: the messages the log's committed atoms sent,
// minus those the receivers' atoms consumed and those to ended runs. The
// engine checkpoint writes it to INBOX (naming the checkpoint's
// generation and replay position, with a checksum); a restart loads INBOX
// on first use and applies the log's tail over it, so its cost is the
// messages not consumed and the tail, never the history. An INBOX that is
// missing, damaged or of another checkpoint (a crash between INBOX and
// CHECKPOINT) is rebuilt from the log (Stats.InboxRebuilt); verify checks
// an INBOX the engine would use against the log.
//
// # Streams
//
// An atom appends chunks (tokens, progress) to a named stream of its run
// while it works, before it commits: Atom.Append(ctx, name, chunk) returns
// the chunk's offset in the stream. Anyone reads a stream from an offset
// with Run.ReadStream(ctx, name, from, opts), and follows its tail with
// opts.Wait (a blocking read until ctx ends); Run.Streams lists a run's
// streams. Exactly:
//
//   - Offsets are the log's: each chunk is a record of the log
//     (record.KindStreamChunk) that holds its offset, and the chunks of one
//     stream of a run have offsets 0, 1, 2, ... in log order. A reader sees
//     a chunk only once it is durable, and a crash keeps a prefix of the
//     log, so a chunk a reader saw is never lost, and one lost in a crash
//     was never seen (its offset goes to the next chunk appended). A reader
//     that resumes from the Next of its last batch, after its own crash or
//     the writer's, sees every chunk once: no gap, no repeat.
//   - Durability and cost: Append encodes the record and enqueues it to
//     the log (no fsync of its own, no wait); the chunk is durable, and
//     readable, at the next group commit, which the log's writer starts as
//     soon as it is idle (no timer), sharing one fdatasync with every
//     append and commit pending. The atom's record follows its chunks in
//     the one log, so when Commit returns its chunks are durable too.
//     Atom.FlushStreams waits for the atom's last chunk. With NoSync,
//     "durable" is "written".
//   - Each chunk names the seq and attempt (from 1) of the atom that
//     appended it, and a read gives the attempt's status: ChunkOpen until
//     the log says how it ended, then once ChunkCommitted (the atom record
//     of that attempt), ChunkFailed (Atom.Fail) or ChunkAbandoned (it
//     stopped: a later attempt of the seq appended, or committed without
//     appending, or the run ended). A retry's chunks are never mixed with
//     the ones of the attempt a crash stopped: they carry another attempt
//     and only one attempt of a seq is ever committed. When an attempt
//     that appended nothing commits a seq whose earlier attempt appended
//     (and crashed), the engine writes a stream abandon record
//     (record.KindStreamAbandon) before the atom's, so that the log alone
//     says which attempt committed.
//   - A stream ends with its run: a read past its last chunk of an ended
//     run says Ended. Deleting a run deletes its streams (garbage
//     collection reclaims the chunks with the run's other records); in an
//     encrypted store a chunk's data is sealed with the run's key, bound to
//     its run, seq, attempt, stream and offset, so erasing the run makes
//     every chunk unreadable.
//   - A branch appends to no stream (ErrBranchStream): it has no seq until
//     it commits. Chunks are not part of the run's state or chain: they
//     are output; verify checks the stream rules (offsets without gap or
//     repeat, a chunk of the run's next seq before its end, attempts that
//     never go down), inspect lists a run's streams and export --stream
//     writes one.
//
// The index of chunks (internal/stream) is derived from the log: built on
// first use after Open by one scan of the log (the records' headers, no
// data), then kept by the capability's hooks; it holds some 40 bytes per
// chunk in memory, the data stays in the log. A store writes the file
// STREAMS before its first chunk: a store without it never scans for
// streams.
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
//   - Messages exactly once (I11): after any crash, each sent message of a
//     committed atom is consumed at most once, in order per sender, and
//     none of an uncommitted atom is ever seen (see Messages between
//     runs).
//   - Tamper evidence (I5): every atom is linked into its run's BLAKE3 chain;
//     Verify reports any change, removal, reordering or truncation.
//   - Bad input never panics (I6), corruption is never skipped (I7), and an
//     fsync error is final for the log (I8).
//   - Replicated (Options.Replicator): a write returns once it is durable
//     here and the Replicator acknowledged it; its refusal fails the write
//     and every later one, and a writer another node took over gets an
//     error matching ErrFenced (I12 across machines).
//   - Fencing reaches the exec: the context an exec receives carries the
//     writer's fencing token (FencingToken) to pass downstream beside the
//     idempotency key (ExampleFencingToken). With a FencedReplicator the
//     context is cancelled when the writer loses its lease and at its bound
//     on a call's duration (Fence.CallBound), and what exec returns after
//     that is never certified (ErrLeaseLost, ErrCallBound); an action an
//     earlier writer left in doubt waits for Fence.InDoubtAfter before it
//     is executed again, reported or resolved. docs/DESIGN.md (the write
//     path's fencing) has the local store's token and the caveats.
//   - Secrets (contract): the values an Action's Redact pointers name never
//     reach the store; where exec echoes them in its error message or its
//     result, the certificate stores "[redacted]" (ledger.Redacted) in
//     their place, and the values its RedactResult pointers name in the
//     result are stored so too. The Do that ran exec returns exec's own
//     result and error, unredacted; every later Do of the action, in this
//     process or after a restart, returns the certified, redacted result.
//   - Only the store's own files (privfs.Confine): below the store's
//     directory no symbolic link is followed and nothing but regular files
//     and directories is opened, by the engine, Pebble or the read-only
//     tools; a named pipe, device, socket or link planted in a store is
//     refused with an error naming it, never blocked on, read or written
//     through. The store's directory itself may be a link.
//
// # Resources on an untrusted store
//
// Verify, Inspect, Scan and Open's replay decompress within a budget
// (frame.Budget: 256 MiB plus 256 times the compressed bytes read), so
// their time and memory are linear in the bytes present whatever sizes a
// store's records claim; the writer keeps the same rule (frame.MaxRatio),
// so a store the engine wrote is never refused by it. With GOMEMLIMIT=128MiB
// none of them needs more than 256 MB. docs/DESIGN.md ("Resources on an
// untrusted store") has the figures; docs/THREATS.md what a store's writer
// can and cannot do.
//
// # Crash safety and the log as the truth (I9)
//
// Every operation has one commit point, a record of the log made durable
// before the call returns (strict mode); nothing in memory changes before
// it. Every file besides the log is derived from it, checked when loaded
// against its checksum and the log position and head it names, and
// rebuilt from the log on any mismatch (a slower restart, never a
// different answer; Stats and OpenInfo say so). Damage to the log itself
// is never rebuilt over: Open refuses it with a *CorruptionError naming
// the file, offset, run and seq. Restart replays only the log's tail since
// the last engine checkpoint (at most Options.RestartTail bytes), so its
// cost never depends on total history. docs/DESIGN.md has each
// operation's commit point ("Crash safety, operation by operation") and
// each derived file's check and rebuild ("Derived files and what happens
// when one is damaged").
//
// # Caveats
//
//   - Encryption hides content, not sizes, counts, timing or run ids. A
//     rollback record (its compensations' tools and arguments) and a
//     deletion's reason are not sealed. Scan reads an encrypted store
//     without opening its payloads (LogRecord.Sealed).
//   - One process per store (a file lock). Within the process, one DB:
//     a second Open fails with ErrLocked whatever path names the store
//     (the store is known by its directory's device and inode). A store
//     that cannot be written (a read-only LOCK file or mount) is
//     ErrReadOnly; the read-only tools still read it.
//   - One size limit, MaxSize (63 MiB): a record's body and a run's
//     encoded frame. Commit, Do and Resolve check it before writing, so
//     what they accept always reads back; a refusal (ErrTooLarge) leaves
//     the log usable. A Do result past MaxResultSize is certified as a
//     failure that says so, never left in doubt.
//   - A full disk or a failing device fails the log (I8) with an error
//     that names the file and says what to do; nothing acknowledged is
//     lost. Free space, Close and Open again. Open needs at most
//     wal.MinPrealloc (64 KiB) of free space for the log, none when the
//     newest segment has room; a failed write's temporary file is removed
//     at once, and Open removes those a crash left. The snapshot store
//     (Pebble) does not yet survive a full disk: it may end the process.
//   - A rollback's completing atom holds the whole frame at the target, so
//     a frame past MaxSize cannot be rolled back to; a pending rollback
//     holds the replay position at its record; a rollback's cost grows
//     with the distance to the target; messages are not taken back.
//     docs/DESIGN.md ("Compensation and rollback", its limits) has each.
//   - Inspect, Scan and Verify take no lock and run beside a live engine:
//     they read the log as far as it was durable when they opened it, and
//     start over when a file they listed vanishes (a rotated ledger table,
//     a removed segment).
//   - Default idempotency keys derive from run id, seq and the index of
//     the call among the atom's Do calls with a default key: an agent that
//     relies on them must issue those calls in a deterministic order. It
//     settles an in-doubt action with Resolve of the same action (a
//     default key names the in-doubt default-key call of the atom with the
//     same tool and args; ErrAmbiguousResolve if two are), with
//     ResolveInDoubt, or with Resolve with the key of its InDoubtError;
//     none of them, nor a Do with an explicit key, moves a later default
//     key, nor does a Do rejected before its intent is written (invalid
//     args, a done atom). A Do whose exec returned an error gives its index
//     back: the atom's next default-key Do of the same tool and sanitized
//     args takes it, so a retry calls exec with the failed call's key and
//     the calls after it keep the keys of an atom whose first try worked.
//     After Resolve the agent goes on with the result it recorded: a
//     second Do of the same action with a default key is another call
//     (the next index), so a retry after ResolveFailed passes the
//     InDoubtError's key. An atom re-begun after a crash whose default-key
//     call differs (tool or args) from the interrupted attempt's call at
//     the same index never takes that call's key: while the old call is in
//     doubt the new one fails with an *ActionChangedError
//     (ErrActionChanged, naming run, seq, index, both tools and the old
//     call's InDoubtError) and takes no index; once the agent settles the
//     old call (ResolveInDoubt, or ResolveInDoubtFailed to abandon it) the
//     new one runs at that index with a key no earlier call used (the
//     default key, "~" and 16 hex digits of its fingerprint), and the
//     calls after it keep the interrupted attempt's keys.
//   - Fail does not consume the seq: the next Begin retries it, and
//     certified actions of the failed attempt are not executed again.
//   - Relaxed durability trades in-doubt actions after a crash for fewer
//     fsync waits; see Relaxed.
//   - The log is kept whole but for what GC removes (records of deleted
//     runs and superseded store heads, below the replay position): the
//     dead prefix, and the dead records of compacted segments. A deleted
//     run loses only a prefix of what is left of it, so its records in a
//     mostly live segment hold its later ones until that segment is
//     compacted. The atom-index entries of deleted runs stay in the
//     snapshot store (their snapshots are deleted).
//   - Frames of idle runs leave memory past Options.FrameCache, but only
//     once an engine checkpoint has written them. A Close right after 64
//     runs or more moved by at most maxTailAtoms each writes none of
//     their frame files (a run left to its tail: background.go), and
//     creates the snapshot store for their atom index if a new store has
//     none; their first use after the next Open then waits for Pebble to
//     open and reads those atoms from the log. Fewer runs, or runs that
//     moved further, get one frame file (and one fsync) each, 16 at a
//     time on the operating system's filesystem, about 1 ms per file
//     (bench/RESULTS-2026-12-06-close.md).
//   - Branches and lineage: a branch's position is its name and call
//     index, so a fork's branch repeating a call of a lineage's branch of
//     the same name gets that call's key and certificate (I10); a fork's
//     Begin atom never takes a branch's certificate, nor a branch a Begin
//     atom's. GC keeps the intents and certificates of a deleted run's
//     branch keys, as it keeps those of explicit keys.
//   - Verify checks the conflict rule only with Deep (it reads again the
//     atoms between each branch's base and it, at most
//     record.MaxBranchLag); without it, only the base.
package engine
