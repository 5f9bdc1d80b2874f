// Package mailbox is the inbox of messages between the runs of a store
// (engine/doc.go, "Messages between runs"). An atom's Send rides in its
// own record (the record.ExtTagSent extension), a Receive's consumption
// in the consuming atom's record (record.ExtTagConsumed). The inbox is
// derived: the messages the log's committed atoms sent, minus those the
// receivers' committed atoms consumed, minus those to runs that ended. A
// Box keeps it in memory, hands it to the engine checkpoint as INBOX
// (layout/inbox.go), and builds it again after a restart, lazily on its
// first use, from INBOX and the log's tail, or from the log when INBOX
// does not match CHECKPOINT. It knows nothing of runs' locks, frames or
// the log's files: package engine conducts it (engine/messages.go) and
// reads the log for it (Source).
//
// # The interface
//
// What the engine implements for the Box (its adapter over the DB):
//
//	type Source interface {
//		// InboxFile returns INBOX's name and bytes, opened when the store
//		// seals it, as written for the checkpoint of generation gen. A
//		// missing file is an error matching os.ErrNotExist.
//		InboxFile(gen uint64) (name string, b []byte, err error)
//		// Messages returns what atom record a sent and consumed. a.Body
//		// is its compressed body, or nil: the atom is read from the log at
//		// a.Pos, and an atom whose run was erased sent nothing. The
//		// payloads may alias memory of this call's, which the Box keeps.
//		Messages(a *record.Record) ([]record.SentMessage, []record.MessageID, error)
//		// Scan calls fn with each atom (but erased ones), end and deletion
//		// record of the log before to, in the log's order, and stops at
//		// fn's first error.
//		Scan(to wal.Pos, fn func(*record.Record) error) error
//		// Rebuilding is told why INBOX is not used, before the inbox is
//		// built from the log instead.
//		Rebuilding(why string)
//	}
//
// and, for a send or a receive, one running atom (the engine's atom,
// with the engine's sentinels handed in as Errors):
//
//	type Atom interface {
//		ID() (run string, seq uint64)
//		Draft() *Draft                      // the atom's, guarded by its run's lock
//		Lock(ctx context.Context) error     // the run's lock, or why the atom sends and receives no more
//		Unlock()
//		Stopping() (<-chan struct{}, error) // closed when the store closes; the receive's error then
//		Peer(to string) (deleted bool, ended any, err error) // how the store holds run to (Takes)
//	}
//
// What the engine calls, whole. Lock order: the run's lock, then the
// Box's (its own mutex); a Source's methods are called with the Box's
// lock held and take none of the engine's locks but the log's.
//
//	// Open and recovery
//	(*Box).Reset(src, cp, from)                // a replay from CHECKPOINT cp (nil: none) at from; src: a LogSource
//	(*Box).Replayed(rec, body, reflected)      // an atom, end or deletion of the replayed tail
//	(*Box).Load() error                        // build the inbox now (else on first use); sticky error
//	// an atom of Begin, under its run's lock (the Draft is the atom's)
//	Send(ctx, a, to, payload, errs) error      // Atom.Send: CheckSend, a.Peer and Takes, then Draft.Add under a.Lock
//	CheckSend(run, seq, to, n, tooLarge) error // Send's checks of a message
//	Takes(to, deleted, ended, errDeleted, errEnded) error // Send: whether run to takes messages
//	(*Draft).Send(to, payload)                 // payload copied
//	(*Draft).Add(run, seq, to, payload, tooLarge) error // Send within MaxMessagesPerAtom
//	(*Draft).Receivable(run, seq, tooLarge) error       // a receive within MaxMessagesPerAtom (Next, under a.Lock)
//	(*Draft).Counts() (sent, received int)
//	(*Box).Receive(to, from, d, wait)          // claim the next message, or a channel closed on arrival
//	(*Box).Next(ctx, a, from, wait, errs)      // Receive for an Atom, within its limit, waiting for a message if wait
//	(*Box).Consumable(run, seq, d) error       // the check before commit: received in order, still there
//	(*Draft).Record() (sent, consumed)         // the atom record's data (AppendExts encodes it)
//	(*Box).Publish(run, seq, at, sent, consumed) // after the atom's record is durable at at
//	(*Box).Release(run, d)                     // the atom failed: its messages go back
//	// other runs' events, after their records are durable
//	(*Box).Gone(kind, run)                     // KindEnd, KindDelete, KindErase
//	(*Box).List(to) ([]Message, error)         // Run.Inbox
//	// engine checkpoint
//	(*Box).Capture(gen, replay) (*layout.Inbox, error)
//	(*Box).Written(gen, replay)                // that checkpoint wrote INBOX
//	(*Box).Rebuilt() string                    // why INBOX was not used ("": it was)
//
// # Guarantees
//
//   - Publish, Gone and the replay are idempotent per message: a message
//     at or before its queue's consumed cursor, or queued already, is not
//     queued again, and a cursor only moves forward; so the log's tail may
//     be applied over an INBOX that already reflects part of it.
//   - Receive returns the oldest message no Draft claimed, by the log
//     position of the atom that sent it (each sender's in the order sent);
//     Consumable refuses a Draft whose messages of a sender are not the
//     first ones of that sender's queue, so no record ever consumes out of
//     order.
//   - A load failure (INBOX unusable and the log unreadable) is sticky:
//     every later use returns it.
//
// # Caveats
//
// The inbox is in memory whole: a store whose runs leave many messages
// unconsumed holds them all (each at most record.MaxMessageSize bytes).
// Nothing is delivered to a run that ended; a deleted run's messages not
// consumed are withdrawn.
package mailbox
