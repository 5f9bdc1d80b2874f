// Command continuumd serves one CONTINUUM store to agents written in any
// language: the engine's contract (runs and their forks, atoms,
// exactly-once actions, in-doubt reconciliation, state, verify) over
// HTTP/JSON, or the same in binary frames (continuum-frames/1, below), on
// a Unix socket by default. The Python and TypeScript clients in clients/ speak it;
// curl does too:
//
//	continuumd --store ./agent-store            # serves ./agent-store.sock, mode 0600
//	curl --unix-socket ./agent-store.sock -X PUT http://localhost/v1/runs/deploy-42
//	curl --unix-socket ./agent-store.sock -X POST http://localhost/v1/runs/deploy-42/attempts -d '{}'
//
// openapi.json (OpenAPI 3.1, next to this file) is the protocol's
// reference: every endpoint, field and error code, and the rules below.
// TestOpenAPIRoutes, TestOpenAPISchemas and TestOpenAPIErrorCodes keep it
// equal to the code.
//
// # Actions split across the wire
//
// The agent runs its tools; the server keeps the ledger. An atom is an
// attempt (the engine's Atom, held by the server for its client under a
// lease), and each action a numbered call of it:
//
//	POST .../attempts/A/calls/0 {"tool": "billing.charge", "args": {...}}
//	  -> {"status": "execute", "key": K}    the intent is durable: run the tool with K
//	POST .../attempts/A/calls/0/outcome {"result": "..."}
//	  -> {"status": "done", "result": ...}  the certificate is durable
//
// Requests ride on each other to save round trips: a begin carries call 0
// or the commit, an outcome the next call or the commit (made once the
// outcome is certified). An atom without actions is one request; one with
// k actions is k + 1.
//
// The server calls the engine's Atom.Do with an exec that answers execute
// and waits for the client's outcome. A call of an action already
// certified answers done with its result (the engine does not call exec);
// one whose earlier execution's outcome is unknown answers in_doubt with
// its key, and the client reconciles with the downstream and resolves
// (Atom.ResolveInDoubt, ResolveInDoubtFailed).
//
// # Guarantees across the wire
//
//   - An action whose outcome was acknowledged (done) is never executed
//     again: every later call of it, in any attempt, after any crash of the
//     client or the server, answers done (the engine's I3).
//   - A client that vanishes after execute never has its action executed
//     again silently. When its lease runs out (or another client takes
//     the run over) the server ends the waiting exec by a panic, which the
//     ledger lands as a durable intent without a certificate: in doubt. It
//     is executed again only if declared idempotent.
//   - A request repeated after a lost answer has the effect of one: begin
//     carries a request id; a call is named by its number (the same number
//     and action answers the call's state, another action under it is
//     call_mismatch); an outcome, a resolution, a commit or a fail of what
//     was already done answers what was done (a commit repeated with
//     another delta is commit_mismatch); a fork whose id names the
//     same fork (source and at) answers it; the rest is naturally
//     idempotent.
//   - Forks (POST /v1/runs/{run}/fork {"at", "id"}, engine DB.Fork): the
//     fork's state at at is the source's, its seqs up to at answer from
//     the source's history, and across a lineage no effect happens twice:
//     a fork's call that repeats its parent's action at the same position
//     answers done with the parent's certified result, or in_doubt under
//     the parent's key (an idempotent one executes under that key); any
//     other call gets a key of the fork's own.
//   - A client that disappears does not hold its run: a lease (renewed by
//     every request; heartbeats during long executions) or an explicit
//     takeover (begin with takeover) abandons its attempt: its waiting
//     calls become in doubt, its atom is failed (Atom.Fail: the seq is
//     begun again, with default keys from 0, as after a crash), and the
//     next begin of the seq lists the actions it had started with their
//     states. The old client may still be inside such a call: its late
//     outcome answers lease_lost and is never certified, and a later
//     call of the action answers in_doubt, never execute, even for an
//     idempotent action, until a client resolves it (with retry to
//     execute it again under its key). The server cannot bound a
//     client's execution: the new client reconciles with the downstream
//     once its own bound on a call has passed.
//   - The server restarts as the library does: what was acknowledged is
//     in the store, and the atom that was running is interrupted
//     (Run.Interrupted), reported by the next begin.
//
// # Encrypted stores and erasure
//
// With --keyring FILE (the keyring file of continuumctl --keyring and
// seal.ParseKeyringFile; mode 0600, like every secret file the server
// reads) the store is encrypted (engine Options.Keyring): a new one is
// created so, and an encrypted one opens only with it. --erasable KEY,
// repeatable, names the memory keys whose values are sealed with keys of
// their own (Options.ErasableKeys); it needs --keyring. Two endpoints then
// crypto-shred:
//
//	POST /v1/runs/{run}/erase {"reason": "..."}             engine DB.Erase: an ended run, gone for good
//	POST /v1/runs/{run}/memory/{key}/erase {"reason": "..."} engine DB.EraseKey: one memory key of a run
//
// Messages between runs (engine Atom.Send, Receive; Run.Inbox): an
// attempt sends as part of its atom (the message exists if and only if
// the atom commits) and receives from its run's inbox (consumed with the
// atom's commit; a fail, a lost lease or a crash gives it back):
//
//	POST .../attempts/A/send {"to", "payload"}          part of the atom
//	POST .../attempts/A/receive {"from", "wait_ms"}     {"message": ... or null}
//	GET  /v1/runs/{run}/inbox                           the messages not consumed yet
//
// Branches (engine Run.Branch; docs/DESIGN.md "The engine's API", Branches): several
// attempts of one run in flight at once, each reading the state at its
// base and taking its seq at its commit. A branch is begun by name, and is
// an attempt like any other from then on (calls, outcomes, commit, fail):
//
//	POST /v1/runs/{run}/branches {"name", "reads", "call" | "commit"}  -> an attempt with branch, base (seq 0)
//	POST .../attempts/A/commit -> 409 conflict {"details": {"seq", "key", "base", "lost"}}, nothing written
//
// after which branching again under the same name is the retry: its
// default keys derive from the run and the name (ledger.BranchKey), so
// each call of an action an earlier attempt certified answers done, after
// a conflict, a lost lease or a restart of the server alike. A branch
// whose lease runs out (or taken over, "takeover": true) is failed: it
// writes nothing. handlers_branch.go.
//
// Rollback with compensations (engine Run.Rollback; handlers_rollback.go):
// a call declares what undoes it ("compensate": {"tool", "args", "key",
// "idempotent"}), and a rollback hands each compensation to the client to
// run, newest first, exactly as a call's action:
//
//	POST /v1/runs/{run}/rollback {"to", "allow_not_undone"}  -> {"status": "execute", "step": {"n", "key", "tool", "args", "undoes"}}
//	POST /v1/runs/{run}/rollback/outcome {"step", "result"}  -> the next step, or {"status": "done", "seq", "undone", ...}
//	POST /v1/runs/{run}/rollback/resolve {"key", "result" | "failed"}
//	GET  /v1/runs/{run}/rollback                             engine PendingRollback
//
// A SIGKILL between leaves the rollback pending as a crash does in Go:
// POST .../rollback with the same to resumes it (certified compensations
// are not run again, one in doubt answers in_doubt until resolved unless
// idempotent). A client that vanishes leaves its compensation waiting in
// the server; the next request attaches and gets it in doubt.
//
// Durable retries (ledger.RetryPolicy): a call carries "retry":
// {"max_attempts", "initial_ms", "multiplier", "max_ms", "deadline_ms"};
// each answer execute names its "attempt", and the outcome names it back
// ("attempt": n; a repeat of an earlier attempt's outcome is answered with
// the call's state). After a failed outcome the server answers pending
// while it waits the backoff, then execute with the next attempt (same
// key), or failed with "gave_up" ("attempts exhausted", "deadline
// passed", "permanent error"). The attempts are the ledger's: a SIGKILL
// between attempts or during one resets nothing (call.go, wire.go).
//
// Verify and inspect of one run (the read right on it is enough):
//
//	POST /v1/runs/{run}/verify {"deep", "public_key", "unsigned_tail"}  the store verified, the run's part answered
//	GET  /v1/runs/{run}/inspect                                         continuumctl inspect's summary of the run
//	GET  /v1/runs/{run}/diff?a=SEQ&b=SEQ[&run_b=RUN]                   continuumctl diff (read right on both runs)
//
// Blobs (large values outside the log; --blob-threshold moves every value
// of a commit and result of a call above it into one) stream both ways,
// the server holding about two 1 MiB chunks per transfer:
//
//	POST /v1/runs/{run}/attempts/{attempt}/blobs  (body: the bytes, chunked; Content-Type: the media type)  -> {"ref", "value", "hash", "size"}
//	GET  /v1/runs/{run}/blobs/{hash}/{size}[?media_type=M]  the bytes, each chunk checked before it is sent
//
// Put the upload's value in the attempt's commit (a memory value, a tool
// output, a message text) to reference the blob; GC sweeps a blob no
// record references.
// Waits, events and timers (handlers_waits.go; engine Run.Wait,
// DB.SendEvent, DB.Ready): a run waits, durably, after its last atom, and
// the host learns which runs to resume by a long poll:
//
//	POST /v1/runs/{run}/wait {"name", "deadline" | "timeout_ms", "seq"}  the run waits for an event (idempotent after the same atom)
//	POST /v1/runs/{run}/sleep {"until" | "duration_ms", "seq"}          a timer
//	GET  /v1/runs/{run}/wait[?wait_ms=N]                                its wait after its last atom, or null; wait_ms: until it ends
//	POST /v1/runs/{run}/wait/cancel {}                                  the open wait ends as cancelled
//	POST /v1/runs/{run}/events {"name", "sender", "payload"}            an event, idempotent by sender (duplicate; event_mismatch)
//	GET  /v1/runs/{run}/attempts/{attempt}/wait                         the ended wait the attempt's atom follows, with its event
//	GET  /v1/ready[?wait_ms=N&max=M]                                    the runs whose wait ended and no atom took (long poll)
//
// An event is taken from a token with the write or the event right on the
// run (an approver's token holds event alone); the ready list shows a
// token its runs only. The outcome is the run's until an atom commits
// after it: an attempt that fails or is abandoned, or a server killed
// before that commit, leaves the next attempt the same outcome.
//
// Deletion and garbage collection need no keyring:
//
//	POST /v1/runs/{run}/delete {"reason": "..."}  engine DB.DeleteRuns: an ended run, gone (a repeat answers the deletion)
//	POST /v1/gc {}                                engine DB.GC: the space of dead records reclaimed (admin)
//
// The key is a path segment, percent-encoded as the run id is. An erased
// run answers 410 run_deleted from then on (as does any deleted run);
// repeating its erase answers the erasure. A plaintext store answers both
// 409 keyring; a run still active, with a fork not erased, a key never
// sealed with keys of its own, or one with nothing left to erase answer
// 409 run_not_ended, run_has_forks, not_erasable and nothing_to_erase.
//
// # Security
//
// The Unix socket is created 0600 (under a narrowed umask, never more
// open) and needs no token unless --token-file or --tokens is given. TCP
// (--listen) is served only with bearer tokens: the one of --token-file
// (mode 0600, compared in constant time; it may do everything), or the
// scoped ones of --tokens (tokens.go: a file of their SHA-256 hashes, made
// by `continuumd token`), each with rights (read, write, erase, admin,
// event) on
// the runs whose id starts with its prefix. A request outside its token's
// scope is 403 forbidden, whether the run exists or not, and the runs'
// list shows only its runs. One exception, in a store not encrypted at
// rest: blobs are addressed by their content's hash alone, so a read
// token reads through its own runs' path any blob whose hash and size it
// knows, and a write token may reference one in its runs' commits (which
// keeps it from GC); in an encrypted store (--keyring) a run reads only
// the blobs sealed under its own keys or its ancestors'. Failed authentication is rate-limited per
// client address, on the API and the web view (/view/) alike (429
// auth_rate_limited; docs/THREATS.md). TCP is served
// over TLS with --tls-cert and --tls-key; plain TCP is
// allowed on loopback addresses only, unless --insecure-plaintext. Bodies
// are limited by --max-body (413 beyond) and must arrive within
// --body-timeout (408 request_timeout beyond), headers to 64 KiB (431
// header_too_large); each listener serves at most --max-conns connections
// at once (one more is answered 503 too_many_connections and closed).
// Verify, inspect and diff read the whole store: two such passes run at
// once, and more wait for one to end. A body is UTF-8 JSON: invalid
// bytes in any field, and escaped lone surrogates (\uD800 without its
// pair), are 400 bad_request
// naming the field (bytes that are not text travel as NAME_base64). Every
// error is answered with a status and {"error": {"code", "message",
// "field"}}, those net/http writes by itself too (httpserver.go rewrites
// them; a path that is not canonical is 400, never a redirect); a panic in
// a handler is answered 500, never a dead server (FuzzRequests fuzzes
// every endpoint's body through the handler).
//
// --h2c serves HTTP/2 without TLS (prior knowledge) beside HTTP/1.1 on
// the listeners without TLS, for clients that multiplex their requests
// on one connection (Go's http.Transport with Protocols'
// SetUnencryptedHTTP2); the protocol is the same. --cpu-profile FILE
// writes a CPU profile of the server's whole life (runtime/pprof), for
// measuring it under load (bench/continuumd -profile); --block-profile
// FILE and --mutex-profile FILE write where its goroutines waited and
// which mutexes they contended, at shutdown (bench/continuumd -profile
// -contention).
//
// # continuum-frames/1
//
// The same listeners serve a binary framing of the same protocol
// (frames.go, internal/wireframe; docs/DESIGN.md "continuum-frames/1"):
// a connection whose first byte is 0x00 sends the 20-byte preface
// "\x00continuum-frames/1\n", gets it back, and then carries requests
// and answers in frames (u32 n, u32 id, u32 hlen, a head of HTTP's
// request line or status and headers, the body), many at once, answered
// in any order under the request's id. Each frame is served through the
// same handler as HTTP (tokens, scopes, the rate limit on failed
// authentication, every route, the JSON errors): only the carriage
// differs. A connection reads at most 128 requests ahead of its answers;
// answers ready together go out in one write; an answer past 64 KiB is
// built only while no other of the connection's is held (built, or
// written and not yet read by the client), so a client that does not
// read holds one large answer, not 128. A frames connection counts
// against --max-conns, a frame must arrive whole within --body-timeout
// (408, then the connection closes), its head within 64 KiB (431) and its
// body within --max-body (413); a frame whose lengths do not add up, or
// that repeats the id of a request in flight, closes the connection. Blob
// transfers are answered over frames only when they fit one frame (256
// MiB): clients send them over HTTP.
//
// SIGTERM or SIGINT stops it gracefully: no new connection or attempt;
// requests in progress are answered, commits included (up to
// --drain-timeout); then open attempts are abandoned without failing their
// atoms (their waiting calls are in doubt, and the next server reports the
// atoms interrupted); then the store is closed. A second signal closes
// busy connections at once.
//
// # Caveats
//
//   - Leases live in the server's memory: after a restart no run is held,
//     and the first client to begin gets it.
//   - After a graceful shutdown the engine's report of an interrupted atom
//     lists only its actions that completed (their certificates); an
//     action left in doubt is not listed, though calling it answers
//     in_doubt as it must. After a crash (SIGKILL) both are listed.
//   - A call whose action is the same as one still executing in the attempt
//     (same tool, args and explicit key) waits for that one's outcome, as
//     concurrent Do calls of one fingerprint do; calls after it wait too
//     (the server keeps default keys in call order). Such a call answers
//     pending after 20 s.
//   - The engine does not say under which key Do answered a certified
//     result without calling exec. In a fork, a default-key call that
//     repeats its parent's action has the parent's key (I10); the server
//     reads it back from the parent's atom (fork.go). When the parent's
//     atom at that seq is still in flight and changes meanwhile, the key
//     the answer shows may be the parent's action's of a moment later;
//     the result is the certificate's either way. Keys to execute or
//     reconcile under are always the engine's own.
//   - A delta over the wire takes every op but references to certified
//     results (frame's refs and tool_output_ref, which Go agents write):
//     a client puts the result itself in the message.
//   - A request body is decoded whole: memory per request is a few times
//     --max-body. Authenticated clients are trusted not to send thousands
//     at once.
package main
