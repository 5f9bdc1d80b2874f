// Package replicate replicates a CONTINUUM store on NATS JetStream, so
// that its runs survive the loss of a machine: every group commit of the
// store's log is published to a stream of three or more replicas before
// the writes in it return, one node at a time may write (a lease in a
// JetStream key-value bucket, and a fence in the stream that stops the
// previous writer at write time), and another node takes the store over
// by catching its own copy of the store up from the stream, or by
// rebuilding it from the whole stream. It is a nested module
// (github.com/continuumdb/continuum/replicate): the engine links no NATS
// code; it only calls engine.Options.Replicator.
//
// # Usage
//
//	nc, _ := nats.Connect(urls)                    // the application's account
//	sys, _ := nats.Connect(urls, nats.UserInfo(…)) // the system account: checks sync_interval
//	r, err := replicate.Open(ctx, dir, replicate.Config{
//		Conn: nc, SystemConn: sys, Store: "orders", Node: hostname})
//	// dir (absent, empty, or this node's earlier copy) now holds what the
//	// stream acknowledged (nothing for a new store)
//	db, err := engine.Open(dir, &engine.Options{Replicator: r})
//	… // Begin, Do, Commit as with a local store
//	db.Close()
//	r.Close() // releases the lease: the next node takes over at once
//
// A write that fails with an error matching ErrFenced (engine.ErrFenced)
// means another node has the store: this process closes its DB and stops.
//
// # What is guaranteed
//
// An acknowledged write (a Commit, Do, Resolve, End, Fork, … that returned
// nil) is durable on the local disk and in the stream: a quorum of its
// replicas has it, each on disk (the servers must run with sync_interval:
// always; Open checks this through SystemConn, and refuses the stream
// otherwise, as it refuses fewer than three replicas, memory storage,
// limits that drop messages, and streams that allow deletes, purges or
// rollups: ErrUnsafeStream).
//
// One writer (the engine's I12): every message of a writer carries its
// epoch and is published with Nats-Expected-Last-Sequence, the sequence of
// its own previous message. A node that takes the store over first takes
// the lease (compare-and-set on the key's revision, epoch + 1), then
// publishes a fence with the stream's last sequence expected, then reads
// everything before its fence. From that moment every publish of the
// previous writer expects a sequence before the fence and is rejected by
// the stream: its write fails with ErrFenced, and so does every write
// after it (the engine's log treats a replication error like an fsync
// error: final). Everything the previous writer had acknowledged lies
// before the fence, so the new writer has it. The lease is for liveness
// only: a wrong clock or a paused process can delay a failover, or let a
// node take an unexpired lease, but never lets two writers both be
// acknowledged, because the stream, not the clock, decides.
//
// Failover: Open brings dir up to the stream up to its fence, then
// engine.Open replays it like any store (the restart path), with the same
// frames, heads and certificates. An atom the old writer was running comes
// back interrupted, and its actions in doubt, as after a local crash, with
// one difference: the old writer may still be alive inside one of those
// calls, so they are executed again, or reported in doubt, only once it
// can no longer be (see Tool calls in flight). RestoreInfo says which way dir was brought up, what was read and
// how long it took:
//
//   - an absent or empty dir is restored from the whole stream (STORE, the
//     compression dictionaries, every log append, batch by batch), in
//     dir+".restore" renamed to dir once whole (PathRestored);
//   - this node's earlier copy of the store is kept and caught up: only the
//     stream's messages after its REPLICA mark are read (see below);
//     nothing at all when the copy is current (PathCurrent), the missing
//     groups otherwise, appended to its log, after the records the stream
//     never acknowledged are cut from it (PathCaughtUp);
//   - a copy that cannot be caught up is replaced (PathReplaced);
//   - any other non-empty dir is refused.
//
// Then, whichever way, dir gets every blob it lacks (RestoreInfo.Blobs).
//
// # Blobs
//
// The Replicator is an engine.BlobReplicator: the engine gives it each
// new blob file before PutBlob hands out its Ref, and every blob file at
// Open. ReplicateBlob puts the file, streamed, into the JetStream Object
// Store bucket named after the store's stream (CONTINUUM_<store>; created
// with Config.Replicas on file storage, refused with ErrUnsafeStream
// otherwise) under its name in the store ("blobs/<hex>"), and returns once
// the object's chunks and then its metadata are acknowledged. The engine
// gives it a blob only if its mark of shipped blobs (blobs/SHIPPED) lacks
// it: an Open whose blobs were all shipped calls no ReplicateBlob and
// lists nothing. A blob file never changes, so an object of its name is
// not put again if it is whole: its metadata (looked up by name; the
// bucket is never listed) gives the file's size, the bucket's stream
// holds as many chunks as the metadata counts, and the chunks read back
// through the digest the metadata keeps; a name found whole or put is
// remembered for the Replicator's life. A put that fails
// (Config.Timeout, or a limit of the bucket) fails the PutBlob; the
// object it may have left (nats.go publishes the metadata before every
// chunk is acknowledged) is deleted, and if its delete fails too, the
// check finds it lacking and a later ship puts the blob again. The check
// reads the object whole, once per name and Replicator, within
// Config.Timeout. A blob the engine sweeps is kept in the bucket.
//
// After the log, Open writes every object of the bucket that dir's
// blobs/ lacks into it: through a temporary file (blobs/tmp-restore-*,
// which the engine's sweep removes if a crash leaves it), read through
// the object's digest check, fsynced, checked against the hash its name is
// (blob.Store.VerifyAs: every chunk against the trailer, the trailer
// against the name), renamed; blobs/ is fsynced after. A crash meanwhile
// leaves a whole copy of the log whose next Open catches up and fetches
// the rest. An object that is not the blob its name says is skipped
// (RestoreInfo.BlobsDamaged, logged): it can only be a failed put's
// leftover, never a referenced blob, since a Ref is handed out only once
// its object is whole; Verify of the store would name any referenced
// blob missing.
//
// # The local copy
//
// The local store stays the fast path: a node reads and restarts from its
// own disk, and a node that had the store before catches up on what it
// missed instead of rebuilding the store. Each copy has REPLICA
// (format.go), a mark that says: the local log up to position P holds
// exactly the log records of the stream's messages up to sequence S (and,
// optionally, that the n records after P, with their SHA-256, are the
// group of the messages up to S'). The writer learns P with every group
// it publishes (the engine gives it where the group begins in the local
// log: engine.PositionedReplicator), and a goroutine writes the newest
// mark every 100 ms, off the commit path (temporary file, fsync, rename,
// fsync of the directory); Close writes the last one, which then covers
// the whole log. Every mark ever written stays true: only records the
// stream acknowledged lie before P, and the local log only grows. REPLICA
// also names the store (STORE's id) and the stream (its creation time): a
// copy of another store, or of an earlier stream of the same name, is
// refused, and so is a directory without REPLICA (Open never deletes what
// it cannot tell is a copy of this store).
//
// Open reads the mark and the local log after it before it takes the
// lease (a wait for the lease hides that read), then, after its fence,
// reads the stream's messages after S (or S' when the records hash as the
// mark says): the local records after the mark must be the stream's next
// groups, record for record. The groups the stream has beyond them are
// appended to the local log (the stream's dictionaries written first);
// the engine's derived files stay valid, since the log only grew. A copy
// whose mark is current reads not one message of the stream.
//
// The wal writes a group here before it replicates it, so the copy of a
// writer that was fenced, or crashed, can end with records the stream
// never acknowledged: the group whose publish the stream refused, or the
// group in flight at a crash. Open finds them (local records after the
// stream's last group, or records that are not the stream's group there)
// and never keeps them: they are cut from the local log (RestoreInfo.Cut;
// cut.go zeroes them in the newest segment, from the end backwards, in
// durable chunks, and checks that the log then ends where they began),
// and the stream's groups appended in their place. A group a crashed
// writer had published whose ack it never saw is in the stream and in the
// copy: it is kept, like any other. Derived files (CHECKPOINT, frames,
// snapshots, the ledger table) never reflect the cut records: the log's
// readers, and so the engine's derived state, see a group only once the
// Replicator acknowledged it (a cut before CHECKPOINT's replay position
// is refused all the same). When the records cannot be cut (they are not
// all in the newest, unsealed segment), or the log cannot be read from
// its mark (garbage collection removed the segment, or the log is
// damaged), the copy is replaced instead: set aside (dir+".replaced"),
// dir restored from the whole stream, the old copy removed;
// RestoreInfo.Replaced says why.
//
// Crash safety: a catch-up appends to the local log through the wal
// (durable before Open returns), so a crash in it leaves a copy that is a
// longer prefix of the stream, still under its old mark. A crash in a cut
// leaves the records before it and a shorter prefix of the unacknowledged
// ones (each carries a synced mark at or before the cut, so the wal's
// recovery takes the zeroed hole for the end of the log, not for
// damage), which the next Open cuts again. A replacement crashed between
// its renames leaves dir absent, and the next Open restores it and
// removes dir+".replaced". A copy must be opened through Open: engine.Open
// alone would read a fenced writer's unacknowledged records as its own.
//
// Group commit: the appends of one group commit (many runs' records) are
// published as one message, or as consecutive parts of one when larger
// than the connection's payload limit, each part expecting the previous
// one's sequence. A group is acknowledged once its last part is. A group
// whose parts a fence cut was never acknowledged, and a restore drops it.
//
// # Tool calls in flight
//
// Fencing stops a stale writer's log writes, not a tool call it has
// already started. A writer can be alive inside a call while another
// takes the store (a takeover, a paused process, a partitioned node whose
// lease expired), and a new writer that executed the call again at once,
// or asked the downstream whether it happened, would race it. So
// (engine.FencedReplicator, engine.Fence):
//
//   - Every exec's context carries the writer's fencing token, its epoch
//     (engine.FencingToken): it grows with every writer of the store. A
//     downstream that keeps the largest token it has seen and refuses
//     smaller ones is safe against any delay of a stale writer's request
//     (engine's ExampleFencingToken).
//   - The writer stops its calls when it cannot prove it holds the lease:
//     the context of every running exec is cancelled, no exec starts, and
//     nothing an exec returns afterwards is certified (the action stays in
//     doubt, ledger.ErrUncertified), once its last successful renewal is
//     LeaseTTL old by its own monotonic clock (a renewal goes out every
//     LeaseTTL/3), once a renewal finds the lease taken (at most LeaseTTL/3
//     after a takeover), once it is fenced, and at Close. The context's Err
//     checks the clock, so a process resumed after a SIGSTOP sees it at
//     once. A writer whose late renewal goes through (nobody took the lease
//     meanwhile) runs calls again; Open renews the lease once the directory
//     is up, so that a long restore does not leave the DB's first calls
//     without a proven lease. A machine too loaded to renew within LeaseTTL
//     refuses calls meanwhile (engine.ErrLeaseLost): that is the price of
//     never acting on a lease it cannot prove.
//   - The writer bounds its own calls: Config.CallBound (10 s) after exec
//     was called its context is cancelled, and what it returns after that
//     is not certified (engine.ErrCallBound). Every call it starts
//     therefore ends, or is never certified, by its lease's expiry plus
//     CallBound, and its lease records CallBound.
//   - The rule: an action that an earlier writer left in doubt is neither
//     executed again (idempotent) nor reported in doubt (ErrInDoubt, on
//     which the agent asks the downstream), nor resolved as failed, before
//     InDoubtAfter = the replaced lease's expiry + its CallBound (the
//     latest over every earlier writer: the lease carries it forward, as
//     Quiet). A Do that finds it in doubt before then waits; if its
//     context ends first, it returns an error matching ErrInDoubt, and
//     nothing was executed. Actions that were not in doubt, and runs
//     without any, do not wait. RestoreInfo.InDoubtAfter says when.
//   - A takeover (Config.Takeover) takes the lease at once but does not
//     shorten that wait: the old writer's lease still runs until its
//     expiry. Config.HolderDead (with Takeover) says the holder is dead
//     (its process or machine is gone): its own calls are then not waited
//     for. A lease released by Close counts from the release.
//
// The numbers a user tunes: LeaseTTL (2 s), CallBound (10 s), larger than
// the longest call and its wind-down after cancellation, plus the clock
// skew between nodes (Expires is by the old holder's clock: a skew of s
// shortens the wait by s). With R the old writer's last renewal: its lease
// expires at E = R + LeaseTTL; after a crash or a stopped renewal the new
// writer opens at E, and an action in doubt waits until E + CallBound,
// CallBound after the failover; after a takeover at time T (R <= T <
// E) the wait ends at E + CallBound, at most LeaseTTL + CallBound after
// T. A run with no action in doubt resumes as before. Measured in
// bench/RESULTS-2026-12-06-fencing.md.
//
// What no lease can do: a process paused between its check of the lease
// and its request to the downstream (or a call that ignores its context's
// cancellation longer than CallBound) can still act late. Only a
// downstream that checks the token excludes that; the rule above makes it
// improbable for the others, as a bound makes any timeout.
//
// # Failure semantics
//
// Partition of the writer: a writer cut off from the stream's quorum
// cannot publish; its writes wait for Config.Timeout (30 s), retrying, and
// then fail, unacknowledged, and its log refuses every later write. Its
// lease expires; a node on the majority side takes it and fences the
// stream. Its calls stop LeaseTTL after its last renewal (see Tool calls
// in flight): a call still running is cancelled and not certified, and
// the new writer waits for its lease's expiry plus CallBound before it
// executes or reports in doubt what it left in doubt. If the partition
// heals before anyone took over, a write in the wait succeeds (and a
// renewal that goes through lets calls run again); after a takeover it
// fails with ErrFenced. A write whose
// publish timed out may still be in the stream (the ack was lost, not the
// message): never acknowledged, but present for the next writer, like a
// local write that a crash interrupted after its fsync. Nothing
// acknowledged is ever lost.
//
// Partition or loss of one JetStream node (of three): the stream keeps a
// quorum. If the lost node led the stream, publishes fail with no
// responders or time out until a new leader is elected (5 to 15 s); the
// writer retries each message (with its message id, so that a retry of a
// message that landed is recognised as a duplicate) within
// Config.Timeout, and the commits wait meanwhile.
//
// Lost quorum (two of three nodes down or cut off): nothing can be
// acknowledged; writes wait, then fail as above, and the store stays
// readable locally. No node can take the lease either (the bucket has no
// quorum), so no failover happens until a quorum is back.
//
// Slow follower: the stream acknowledges once a quorum has the message:
// with three replicas one slow or stopped follower costs nothing; the
// leader catches it up. Two slow ones make every commit as slow as the
// faster of them.
//
// Crashed writer: its lease stops being renewed and expires after
// Config.LeaseTTL (2 s); a node whose Open waits for it takes it then
// (or at once with Config.Takeover, when something else knows the writer
// is dead, and with Config.HolderDead too, not to wait CallBound for its
// actions in doubt). What the writer had acknowledged is in the stream; a group it
// had published but not yet acknowledged to its callers may be there too
// (the ack raced the crash), and is restored like any other: an atom that
// committed just before a crash may be present though its Commit never
// returned, as with a local store. When the crashed node (or its process,
// restarted) opens its own copy again, its REPLICA is at most 100 ms
// behind its log: Open reads the stream from there, keeps what the stream
// has, and cuts the group the crash left unacknowledged, if the stream
// does not have it (see The local copy).
//
// A fenced or partitioned writer's own copy: its writes after the fence
// failed with ErrFenced, but the first of them is durable in its log.
// Nothing of it is ever acknowledged, read by its engine as committed, or
// kept: its next Open cuts it. What the writer had acknowledged before is
// in the stream, so the copy loses nothing.
//
// Catching up with a JetStream node down, or a slow follower: the reads
// of a catch-up are the stream leader's, like the publishes; they wait
// for an election as those do (Config.Timeout).
//
// # Caveats
//
//   - A node without a copy (or whose copy is replaced) reads the whole
//     stream: its failover time grows with the store's history. Snapshots
//     are not shipped. A node with a recent copy reads only what it lacks.
//   - The wal has no operation that removes records at its tail: the cut
//     relies on the wal's frozen segment format and recovery rules
//     (cut.go) and checks its result by opening the log again. Its place
//     is the wal package.
//   - A mark is written every 100 ms: a node that crashed reads from the
//     stream, and compares, at most that much of its own history again.
//   - The stream keeps every message (no limits: that is what makes it
//     the store's truth); the engine's garbage collection frees local
//     segments only, and local blobs: the blob bucket keeps every blob.
//   - Blobs are fetched after the log, one at a time, each checked as it
//     is read from the bucket (the object's digest) and read again from
//     disk (VerifyAs): a restore's time grows with the blobs' bytes. A replicated store is never encrypted (the engine
//     refuses a keyring with a Replicator), so every blob is plaintext
//     and checkable by its name.
//   - A blob's put, whole, must finish within Config.Timeout, and puts
//     are one at a time per Replicator: a blob of gigabytes on a slow link
//     needs a longer Timeout, and concurrent PutBlobs wait for each other
//     while they ship.
//   - A file (STORE, a dictionary) must fit in one message (the
//     server's max_payload, 1 MiB by default, less 1 KiB for headers);
//     a group of any size is split into parts.
//   - Clock skew between nodes delays or hastens lease expiry, never
//     safety (see above).
//   - One stream per store, and one writer per store: runs of one store
//     cannot be written from two nodes at once.
package replicate
