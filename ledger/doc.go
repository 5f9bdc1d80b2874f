// Package ledger makes an agent's external tool calls happen exactly once
// across crashes (invariant I3 of DESIGN.md).
//
// Every call is an Action. Its Fingerprint identifies it: BLAKE3-256, in
// derive-key mode under a versioned context, of the length-prefixed tool
// name, canonical arguments with the secret (Redact) parts removed, and the
// idempotency key. Before the call the ledger makes an Intent durable
// through a Journal (the engine's log); after it, a Certificate with the
// result. Ledger.Do is that state machine; its in-memory index answers
// "was this fingerprint certified?" without touching disk.
//
//	in, err := ledger.NewIntent(ledger.Action{Tool: "s3.CreateBucket",
//		Args: []byte(`{"name":"logs","token":"s3cr3t"}`), Redact: []string{"/token"},
//		Idempotent: true}, runID, seq, 0)
//	if err != nil { ... }
//	res, err := l.Do(ctx, journal, in, func(ctx context.Context, key string) ([]byte, error) {
//		return s3.CreateBucket(ctx, "logs", key) // key: the idempotency key
//	})
//	var doubt *ledger.InDoubtError
//	if errors.As(err, &doubt) {
//		// ask the downstream with doubt.Key, then:
//		err = l.Resolve(ctx, journal, in, resultFound)
//	}
//
// # Guarantees
//
//   - A fingerprint whose certificate (done or resolved) is durable never
//     has its exec called again, in this process or after any crash.
//   - Exec is called only after its intent is durable, so a crash during
//     exec leaves an intent without certificate: the action is in doubt.
//     An in-doubt action is run again only if declared Idempotent, with the
//     same key; otherwise Do returns an *InDoubtError (ErrInDoubt) that
//     carries the key, and the agent reconciles and calls Resolve (the
//     effect happened, with this result) or ResolveFailed (it did not).
//   - Concurrent Do calls of one fingerprint run exec once; the others wait
//     and get its outcome.
//   - An exec error is recorded (a failed certificate) and returned wrapped;
//     a failed action may be run again by a later Do.
//   - Secrets listed in Redact never reach an Intent, so never the log.
//     Where exec echoes one of them in its error message or its result,
//     the certificate stores Redacted ("[redacted]") in its place; the
//     values of the result that Action.RedactResult points at are stored
//     as Redacted too (the whole result, if it is not JSON). The Do that
//     ran exec returns exec's own result and error; every later Do of the
//     action, in this process or after a restart, returns the certificate's
//     scrubbed result (DoRecorded returns both). Resolve and ResolveFailed
//     are scrubbed alike. Scrubbing replaces every occurrence of a secret's
//     text, so a very short secret ("1") also blanks unrelated text. A JSON
//     result or error message is decoded and scrubbed value by value, then
//     stored re-encoded, so a secret is found whatever escapes the exec's
//     encoder used (Go's json.Marshal writes < as \u003c, Python's
//     json.dumps writes ä as \u00e4); in other error text, every JSON string
//     literal is decoded and scrubbed so too. A secret that is an object
//     or an array is found as a subtree equal to it.
//   - An action with a retry policy (Action.Retry: attempts, exponential
//     backoff, a deadline from the first attempt) is retried by Do itself,
//     with the same key, on its errors (all but ErrPermanent, or those
//     RetryPolicy.Retryable accepts). Each attempt writes its intent, with
//     the attempt's number and start, before exec; each failure a failed
//     certificate (version 2) with the attempt, its time and the next
//     attempt's earliest start, before the wait (a ctx-cancellable Sleep
//     of the ledger's Clock). So a crash resets neither the count nor the
//     schedule: the next Do, in any process, reads them back (from memory,
//     or from the log by IntentReader and ReadCertificate) and goes on.
//     An attempt left in doubt counts; an idempotent action goes on with
//     the next, a non-idempotent one is in doubt as ever (ResolveFailed
//     counts its attempt). An action out of attempts, past its deadline or
//     failing permanently is given up once: one failed certificate that
//     says so, and every later Do returns its *GaveUpError (ErrGaveUp)
//     without calling exec. A wall clock moved back never shortens or
//     resets a wait, nor stretches it beyond one backoff: "now" is never
//     earlier than the latest time recorded for the action.
//   - Bad input never panics: malformed JSON, pointers, records and tables
//     give errors that say what and where (byte offsets).
//
// Crash safety per operation: the commit point of an action's dispatch is
// the return of Journal.WriteIntent; that of its outcome, the return of
// Journal.WriteCertificate. Recovery is the engine's replay: LoadTable with
// the last persisted table (Checkpoint), then ApplyIntent and
// ApplyCertificate for every ledger record of the log after the table's
// mark, in log order. The cost is one verification pass over the table
// (no per-entry allocation) plus the tail; history before the table is
// never scanned. A certified result that is not in memory is read back
// from the log by Journal.ReadCertificate when a Do needs it.
//
// Checkpoint is how the engine persists the index: it calls mark (where the
// engine notes its log position) while no journal write is in progress, so
// the table holds exactly the records before the mark, and replay from the
// mark misses none. CheckpointAt writes a table of version 3 (version 2's
// in 48-byte entries; version 2 itself when a location does not fit them),
// which names its origin (the checkpoint generation and log position mark
// returns):
// ReadTableOrigin tells a table written for another checkpoint (an older
// copy swapped in) from the one wanted, before it is loaded; the engine
// then rebuilds the table from the log instead.
//
// # Canonical JSON
//
// Args are canonicalised before fingerprinting and storing:
//
//   - No insignificant whitespace.
//   - Object members sorted by the bytes of their UTF-8 keys (RFC 8785
//     sorts by UTF-16 code units; the orders differ only between
//     supplementary-plane characters and U+E000..U+FFFF). Duplicate keys,
//     after unescaping, are an error.
//   - Strings escaped as RFC 8785 does: \" \\ \b \f \n \r \t, \u00xx
//     (lower-case) for other control characters, every other character as
//     itself in UTF-8. Invalid UTF-8 and lone surrogates are errors.
//   - Numbers as exact decimals (not IEEE doubles, unlike RFC 8785, so that
//     integers beyond 2^53 stay exact): the value ±D×10^E, with D free of
//     leading and trailing zeros, is written as the digits followed by E
//     zeros when 0 ≤ E ≤ 20 (100, 12345678901234567890123), as a plain
//     decimal when it has fewer than six zeros after the point (0.1,
//     0.000015), and otherwise with an exponent and no + sign (1e21,
//     1.25e23, 1.5e-7); zero, negative zero included, is 0. So 1, 1.0, 1e0
//     and 10e-1 are all 1.
//   - Nesting deeper than 512 and exponents beyond ±10^9 are errors.
//   - Empty args stand for null.
//
// Redact pointers follow RFC 6901 ("/a/b~1c/0"; ~0 is ~, ~1 is /). All are
// resolved against the original document, then removed, so their order does
// not matter. A removed array element shifts the later ones. A pointer that
// matches nothing is ignored; "" removes the whole document (args become
// null); a malformed pointer is an error. RedactResult pointers follow the
// same rules against the result.
//
// # Caveats
//
//   - Exec must return an error only when the effect did not happen (or may
//     safely happen again): an error is recorded as failed, and a later Do
//     runs the action again.
//   - If WriteCertificate fails after exec returned, Do returns the error
//     and the action is in doubt in this process too, as after a crash.
//   - Results of actions run or replayed with keepResult stay in memory
//     until the next Checkpoint; certified results not in memory are read
//     back with Journal.ReadCertificate.
//   - Do trusts Intent.Fingerprint (build intents with NewIntent; check a
//     decoded one with Intent.CheckFingerprint).
//   - AppendTable is a consistent snapshot only when no Do or Resolve runs;
//     Checkpoint is the variant that orders itself against the journal.
//   - LoadTable verifies the table in one linear pass (checksums, statuses,
//     order) but allocates nothing per entry (only a fence of 8 bytes per
//     64 entries): 48 bytes of table per entry to checksum (72 in
//     versions 1 and 2), which is also what the engine had to read from
//     disk.
//   - Checkpoint holds back journal writes (not execs) while it builds the
//     table; a Journal method must never call Checkpoint (it would wait for
//     itself), and an exec must never call Do for its own fingerprint.
//   - Len and Stats cost O(entries recorded since the last table).
//   - A retry policy's schedule has no jitter (it must be recomputed
//     after a crash); its Retryable func is not recorded. A given-up
//     action's effect may still have happened when its last attempt was
//     left in doubt (idempotent): Resolve can still certify it.
//   - Two actions whose args differ only in redacted values share a
//     fingerprint: the secrets are not part of the action's identity.
package ledger
