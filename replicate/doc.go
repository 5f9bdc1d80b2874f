// Package replicate replicates a CONTINUUM store on NATS JetStream, so
// that its runs survive the loss of a machine: every group commit of the
// store's log is published to a stream of three or more replicas before
// the writes in it return, one node at a time may write (a lease in a
// JetStream key-value bucket, and a fence in the stream that stops the
// previous writer at write time), and another node takes the store over
// by rebuilding its directory from the stream. It is a nested module
// (github.com/continuumdb/continuum/replicate): the engine links no NATS
// code; it only calls engine.Options.Replicator.
//
// # Usage
//
//	nc, _ := nats.Connect(urls)                    // the application's account
//	sys, _ := nats.Connect(urls, nats.UserInfo(…)) // the system account: checks sync_interval
//	r, err := replicate.Open(ctx, dir, replicate.Config{
//		Conn: nc, SystemConn: sys, Store: "orders", Node: hostname})
//	// dir now holds what the stream acknowledged (nothing for a new store)
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
// Failover: Open restores dir from the stream up to its fence (STORE, the
// compression dictionaries, every log append, batch by batch), then
// engine.Open replays it like any store (the restart path), with the same
// frames, heads and certificates. An atom the old writer was running comes
// back interrupted, and its actions in doubt, exactly as after a local
// crash. RestoreInfo says what the restore read and how long it took.
//
// Group commit: the appends of one group commit (many runs' records) are
// published as one message, or as consecutive parts of one when larger
// than the connection's payload limit, each part expecting the previous
// one's sequence. A group is acknowledged once its last part is. A group
// whose parts a fence cut was never acknowledged, and a restore drops it.
//
// # Failure semantics
//
// Partition of the writer: a writer cut off from the stream's quorum
// cannot publish; its writes wait for Config.Timeout (30 s), retrying, and
// then fail, unacknowledged, and its log refuses every later write. Its
// lease expires; a node on the majority side takes it and fences the
// stream. If the partition heals before anyone took over, a write in the
// wait succeeds; after a takeover it fails with ErrFenced. A write whose
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
// is dead). What the writer had acknowledged is in the stream; a group it
// had published but not yet acknowledged to its callers may be there too
// (the ack raced the crash), and is restored like any other: an atom that
// committed just before a crash may be present though its Commit never
// returned, as with a local store.
//
// # Caveats
//
//   - The restore reads the whole stream: failover time grows with the
//     store's history. Snapshots are not shipped, and a node that was the
//     writer earlier does not reuse its old directory (Open wants an empty
//     one): catching up from a local copy is not done.
//   - The stream keeps every message (no limits: that is what makes it
//     the store's truth); the engine's garbage collection frees local
//     segments only.
//   - A file (STORE, a dictionary) must fit in one message (the
//     server's max_payload, 1 MiB by default, less 1 KiB for headers);
//     a group of any size is split into parts.
//   - Clock skew between nodes delays or hastens lease expiry, never
//     safety (see above).
//   - One stream per store, and one writer per store: runs of one store
//     cannot be written from two nodes at once.
package replicate
