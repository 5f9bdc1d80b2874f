// Package journal is the ledger's journal over the engine's log: the
// intents and certificates a ledger call writes (ledger.Journal), framed
// as log records (record.AppendLedger: kind | compressed body, sealed in
// an encrypted store), appended in strict or relaxed durability, and read
// back by position; and the certified result an atom's delta refers to
// (an action's fingerprint), from the ledger or from the certificate the
// ledger's index locates. It knows nothing of runs or their locks:
// package engine conducts it (engine/journal.go, a Journal per ledger
// call) and implements Core over its DB.
//
// # The interface
//
// What the engine implements (Core):
//
//	type Core interface {
//		// Encode appends kind | body compressed with the store's
//		// compressor and current dictionary to dst (record.AppendLedger).
//		Encode(dst []byte, kind record.Kind, body []byte) []byte
//		// Sealer seals the records' payloads; nil in a plaintext store.
//		Sealer() *record.Sealer
//		// Sample offers a record's body to the dictionary trainer.
//		Sample(body []byte)
//		// Append appends rec durably (the engine's append: its errors,
//		// the log's failure recorded, the bytes counted).
//		Append(ctx context.Context, rec []byte) (wal.Pos, error)
//		// AppendAsync enqueues rec; Go runs f on a goroutine an engine
//		// checkpoint waits for; Failed records the log's failure (I8),
//		// Appended counts bytes appended.
//		AppendAsync(rec []byte) *wal.Waiter
//		Go(f func())
//		Failed(err error)
//		Appended(n int)
//		// ReadAt reads the log's record at pos; Decoder decodes it, the
//		// ledger's records too; File names a segment for errors.
//		ReadAt(pos wal.Pos) ([]byte, error)
//		Decoder() *record.Decoder
//		File(seg uint64) string
//		// Ledger is the store's ledger; WaitLedger waits for its
//		// persisted table to be loaded.
//		Ledger() *ledger.Ledger
//		WaitLedger(ctx context.Context) error
//	}
//
// What the engine calls, whole:
//
//	Journal{Core, Relaxed, Landed, Max, ErrTooLarge}  // one ledger call's journal
//	(Journal).WriteIntent(ctx, in) (ledger.Loc, error)
//	(Journal).WriteCertificate(ctx, c) (ledger.Loc, error)
//	(Journal).ReadCertificate(loc); ReadIntent(loc)    // ledger.Journal, ledger.IntentReader
//	ReadCertificate(core, loc); ReadIntent(core, loc)  // a record the ledger's index names
//	CertifiedResult(core, fp) ([]byte, error)          // an atom delta's certified result
//	Action(core, fp)                                   // fp's ledger entry, its intent and certificate read back
//
// # Guarantees
//
//   - Strict: a record is durable when its write returns, and the ledger
//     applies it then. Relaxed: an intent of an idempotent action without
//     a retry policy, and a certificate that is not a failed attempt, are
//     enqueued and the write returns at once; the atom's commit, later in
//     the one ordered log, makes them durable, and the certificate's
//     location reaches the ledger (after the ledger applied the
//     certificate itself: Landed) from a goroutine the engine checkpoint
//     waits for, so a persisted table never names a record not durable.
//     An attempt of an action with a retry policy, and a failed attempt,
//     are durable before their write returns in either mode.
//   - A record over Max bytes, or one the store cannot seal, is refused
//     before anything is written (ErrTooLarge, wrapped).
//   - In an encrypted store the records of an action with an explicit key
//     are sealed with the store's key, not the run's: another run may
//     repeat the action and need them after this run is erased.
//   - ReadCertificate and ReadIntent check the record's kind: a record of
//     another kind where the index names one is corruption.
//
// # Caveats
//
// A relaxed write whose append fails leaves the ledger with a
// certificate without a location: the log's failure is recorded
// (Failed), so no engine checkpoint persists the table from then on.
package journal
