// Package webview serves a read-only web view of a store: its runs, a
// run's timeline, the frame at any seq with a diff between two states, the
// lineage of forks and the branch DAG, the ledger, a run's waits with
// their events and outcomes, its streams out chunk by chunk with each
// attempt's status, and verify's result.
//
// It reads the store with package offline (Inspect, Verify), so it takes
// no lock and runs beside a live agent: it never writes a byte of the
// store. When the log changes it reads it again (at most once per
// Options.Refresh) and each open page updates in place, through
// server-sent events and a fetch of itself, without a reload.
//
// Usage:
//
//	v, err := webview.New(webview.Options{Dir: dir, Keyring: ring})
//	if err != nil { ... }
//	defer v.Close()
//	srv := &http.Server{Handler: v}
//	fmt.Println(v.LoginURL("http://" + l.Addr().String()))
//	srv.Serve(l)
//
// continuumctl view serves it on loopback; continuumd serves it under
// /view/ beside its API, on the same listener and with the same token.
//
// # What it guarantees
//
//   - Every byte of the store it shows goes through html/template, so an
//     agent's content (messages, tool names, run ids, values) is text,
//     never markup; every answer carries a Content-Security-Policy that
//     allows only the view's own embedded script and style (no inline
//     script, no other origin), and the view loads nothing from the
//     network: its assets are embedded in the binary.
//   - Values of erasable memory keys are shown only as the keyring opened
//     them, an erased one only as "erased"; sealed bytes are never shown.
//     An encrypted store read without its keyring shows no page but
//     verify, and says why.
//   - A page reads and shows a bounded amount: runs 100 a page, atoms 50
//     a page (200 in the branch DAG, 100 in the ledger, whose page lists
//     500 actions), 200 ops of an atom and 100 of its actions, messages
//     sent and received and branch reads; at most 300 messages, 1000
//     memory keys and 1000 subgoals, pending actions and erased keys of a
//     frame, 1000 changes of a diff, 2000 runs of the lineage tree, 100
//     forks in a run's header, 500 intact runs on the verify page, 200
//     waits, 200 pending events and 1000 streams of a run, 100 chunks
//     (1 MiB) of a stream a page (each page says what it left out).
//     Values are folded past 240 bytes and cut at 16 KiB; the store's
//     names, ids and keys (tool names, idempotency keys, memory keys,
//     call ids, subgoal ids: the engine bounds them only by the 63 MiB
//     record) are cut at 256 bytes, and errors and warnings that quote
//     the store at 2 KiB, each cut marked "…" with its whole size; and no
//     page is larger than 32 MiB of HTML (one that would be, with values
//     of 16 KiB on each of its rows, says so instead). The reader's
//     decompression budget (offline.InspectOptions.Budget) bounds what a
//     hostile store makes it decompress; Options.RequestTimeout stops a
//     page between the atoms it reads (see Caveats).
//   - A right-to-left override in a name or value of the store (U+202E)
//     cannot reorder the rest of the page: each is shown as a
//     bidirectional isolate (app.css; FSI and PDI in the page's title).
//   - Access: a View with a Token accepts it as a bearer token or once in
//     the URL; otherwise only its one-time login URL (LoginURL) opens a
//     session (an HttpOnly, SameSite=Strict cookie). The view answers GET
//     and HEAD only.
//
// # Caveats
//
//   - The view of a live store is as of its last read: a re-read costs
//     one pass over the log (offline.Inspect), so on a long log the view
//     re-reads no more often than four times what the last read took.
//   - The frame at a seq is rebuilt from the log (Inspector.StateAt): on a
//     run of a hundred thousand atoms, the first frame asked for near its
//     end replays them all. The view keeps a few frames it built (8 of a
//     run, of the 8 runs last looked at, 64 MiB in all) and steps from
//     them (framecache.go), so the slider's next steps, forward or back
//     within 256 seqs, read a few atoms each.
//   - Options.RequestTimeout is checked between the atoms a page reads
//     (and inside Inspector.StateAt's replay and Verify), not within one
//     step: decoding one atom's record or diffing two frames (each at most
//     63 MiB) and rendering the page (at most 32 MiB) run to their end,
//     and the answer's write is the server's to bound (http.Server's
//     WriteTimeout).
//   - Sessions live as long as the process: restart the view to end them.
package webview
