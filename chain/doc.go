// Package chain is CONTINUUM's tamper-evident audit trail: per-run hash
// chains, signed checkpoints, a store-level head log, and a verifier that
// reads all of them back and says, per run, whether the history is intact
// and if not, what is wrong and where.
//
// # The chain
//
// Every committed atom of a run is one chained record with seq n = 1, 2, 3,
// ... (contiguous) and
//
//	h(0) = Genesis(run id, nonce)          // nonce: 16 random bytes in the run's creation record
//	h(n) = Link(run id, n, h(n-1), payload)
//
// computed with BLAKE3 in derive-key mode under a versioned context string
// (format.go has the exact bytes). The engine stores h(n) next to the
// payload. In keyed mode (NewHasher with a 32-byte secret kept outside the
// store) the hash is BLAKE3 keyed with a subkey derived from the secret:
// nobody without the secret can compute a valid h(n).
//
// # Checkpoints and store heads
//
// Every N records, every T seconds and when a run ends, the engine writes a
// Checkpoint (store id, run id, seq, head), signed with Ed25519 in the
// golang.org/x/mod/sumdb/note format when a signing key is configured. It
// also writes StoreHead entries listing every run's latest checkpoint, so a
// run cannot vanish without its name still being on record.
//
// # Crashes
//
// The package does no I/O: Link is a pure function of its inputs, and
// durability is the log's. A checkpoint is only ever written after the
// record it commits, so a crash that loses the log tail loses the
// checkpoint with (or after) its records and the chain still verifies; the
// records after the last surviving checkpoint show as an unanchored-tail
// warning, not a failure. WriteState writes bytes; making a saved state
// durable (temp file, fsync, rename) is the caller's job.
//
// # Verifying
//
//	v, err := chain.NewVerifier(chain.VerifyOptions{PublicKey: pub, Trusted: &saved})
//	v.Store(storeID)
//	v.Run("r1", nonce, "wal/000001.log:0")
//	v.Record("r1", 1, payload, storedHead, "wal/000001.log:64")
//	v.Checkpoint(checkpointBytes, "wal/000001.log:700")
//	report := v.Finish()   // report.OK, report.Runs[i].Failure, report.State()
//
// Inputs come in log order. Each run is checked in order by one worker
// goroutine; runs are spread over VerifyOptions.Workers goroutines. A
// failure stops the checks of its run only: the report has, per run, OK or
// the first failure (kind, seq, expected and actual hash, location), plus
// warnings, and store-level failures (unreadable data, unparseable or badly
// signed store heads).
//
// Failure kinds for the classic tampering (seq is the one reported):
//
//	one byte of record n changed / record n cut short   hash-mismatch n
//	record n replaced by another (other run, swapped     link-mismatch n
//	  with seqs rewritten, recomputed under another key)
//	record n removed / records n, n+1 swapped            seq-gap n
//	record n duplicated                                  seq-duplicate n
//	records after n cut, a later checkpoint kept         truncated n+1
//	record n changed and later hashes recomputed         checkpoint-mismatch c (first checkpoint c >= n)
//	  (unkeyed)                                          (keyed: link-mismatch n)
//	checkpoint forged, or re-signed with another key     bad-signature (checkpoint's seq)
//	a whole run deleted                                  run-missing 1
//	older copy of the store put back (needs Trusted)     rollback (first seq beyond the copy)
//	records after the last verified checkpoint           unanchored-tail warning
//	  with a public key, more than UnsignedTail of them   unsigned-tail (first seq not signed)
//	keyed chain verified without its key (or wrong key)  keyed-chain 1
//
// # What is detected with what
//
// Without a public key, without a key, without a saved state: any edit,
// removal, duplication or reordering of records that is not followed by a
// recomputation of every later hash; any record whose stored head no longer
// matches; checkpoints and store heads that disagree with the chain; runs
// named by a checkpoint or store head that are gone. Signatures are not
// checked (a warning, KindUnsigned), so someone able to write the files can
// recompute the chain from any point, rewrite or drop checkpoints and store
// heads, cut the tail, and the store still verifies.
//
// With the public key (from the user: a flag or a file, never the store):
// a recomputed chain is caught at the first signed checkpoint at or after
// the edit (checkpoint-mismatch; the edit lies after the previous verified
// checkpoint); a cut tail is caught when a later signed checkpoint or store
// head survives (truncated); a deleted run is caught while any signed store
// head or checkpoint names it (run-missing); forged checkpoints or a
// replaced signing key are bad-signature. A public key means signatures are
// required: a run whose head is more than VerifyOptions.UnsignedTail atoms
// past its last checkpoint (or store head) signed with the key fails
// (unsigned-tail), so a store rewritten by someone without the key, whose
// writer never wrote a signed checkpoint, does not pass; each RunReport
// says its SignedSeq and UnsignedTail.
//
// With the keyed-mode secret: no record hash can be recomputed at all, so a
// rewritten chain fails at the first altered record, with or without
// checkpoints. A keyed chain checked without its key (VerifyOptions.Keyed
// says the store records keyed mode), or with another key, is reported as
// keyed-chain at seq 1 rather than as tampering: no record links to the one
// before it in the verifier's mode, where a damaged chain still has links
// that hold.
//
// With a saved State (from an earlier verification, kept outside the
// store): a rollback to an older copy, a history that diverges from the
// one verified then, a deleted run, and a cut of the whole tail including
// its checkpoints and store heads are caught (rollback, run-missing).
//
// # Caveats
//
//   - Records after the last verified checkpoint are only as trustworthy as
//     the files: cutting them together with every later checkpoint and store
//     head is invisible without a saved State. The report says so with an
//     unanchored-tail warning; checkpoint often to keep that window short.
//   - Without a public key, a store that verifies OK is internally
//     consistent, nothing more. Anyone who can write the store can forge it.
//   - A checkpoint that arrives more than RecentHeads records after its seq
//     in log order cannot be compared (a checkpoint-unchecked warning).
//   - A stolen signing key forges checkpoints; a stolen keyed-mode secret
//     lets the chain be recomputed. Keep them apart from the store, and keep
//     saved States where the store's writer cannot change them.
//   - A hash mismatch on the last record of a run cannot be told apart from
//     a replaced record (there is no next record to check the link); it is
//     reported as hash-mismatch.
//   - Only the order within a run is protected. How records of different
//     runs interleave in the log is not chained, so moving a record among
//     other runs' records (keeping its place in its own run) goes unnoticed.
//   - Verification starts at each run's genesis: the verifier needs every
//     record of a run since its creation record. A store that discards old
//     log segments cannot be verified from the start of its runs.
//   - Without a public key, the Store record and checkpoints name the store
//     id; the first id seen is taken as the store's. Only a saved State pins
//     which store this is.
//   - A keyed store verified without its secret (or with another) fails
//     every run at seq 1; the secret cannot be recovered from the store.
//   - Verifier methods must be called from a single goroutine; Hasher and
//     Signer are safe for concurrent use.
package chain
