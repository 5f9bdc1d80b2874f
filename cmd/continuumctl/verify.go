package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
)

const verifyUsage = "verify DIR [--pubkey FILE [--allow-unsigned-tail N]] [--state FILE] [--save-state FILE] [--json] [--strict] [--deep] [--chain-key FILE] [--keyring FILE]"

const verifyAbout = `Verify checks that the store in DIR is intact: every record's framing, every
run's hash chain, the chain checkpoints and store heads (their signatures with
--pubkey), rollback against a state saved earlier (--state), and that the
restart files agree with the chain. It opens the store read-only and never
changes it, not even a torn tail. A public key file names the origin it
signs as (continuumctl keygen writes it); a key of another store's origin is a
key-origin failure.

With --pubkey, signatures are required: a run whose head is not covered by
a checkpoint signed with that key fails, unless --allow-unsigned-tail N
allows N atoms past its last signed checkpoint (a writer still running, or
one that stopped before its next checkpoint). Each run's line says how many
atoms it has past its last signed checkpoint, and "ended" when a final
checkpoint signed with the key covers the run's end record (its last seq is
then the end's link). Without --pubkey an end's link is checked like an
atom's, but nothing vouches that the run ended there: inspect shows every
run's status as its end record says it.

An encrypted store (engine.Options.Keyring) is checked without any key: every
record, link, checkpoint and signature covers the sealed bytes as stored, and
the report says that no payload was opened. With --keyring its payloads are
opened too, and --deep checks frames, fingerprints, certificates and
references as in a plaintext store. A keyring lacking a key the store needs,
or holding a wrong one, is an error (exit 2).

Verify reads the store within a budget: 256 MiB plus 256 times the bytes of
its records decompressed, one record at a time; records past it are
reported, not decompressed. See docs/THREATS.md for what verify proves.

Exit 0: intact. Exit 1: tampered or corrupt (with --strict, warnings too).
Exit 2: usage or I/O error. Exit 3: with --pubkey, the store was never
signed (it has checkpoint records and none carries a signature: it was
written without a signing key) and is intact otherwise: "result: NOT SIGNED".
A store with no checkpoint record yet fails as unsigned-tail (exit 1). Nothing vouches for such a store (whoever
can write its files can rewrite it unsigned), so it is not 0; nothing in it
shows tampering either, so it is not 1.

--json prints one object:
  ok                    intact (false on any failure; with --strict, on any warning)
  not_signed            with --pubkey: the store carries no signature and is intact
                        otherwise (exit 3; failures then lists no signature failure)
  store, dir            the store id and the directory checked
  runs_checked          runs found
  records_checked       atom records checked
  checkpoints_verified  checkpoints and store heads whose signature verified
  checkpoints           checkpoints and store heads read
  checkpoints_signed    those of them that carry a signature, checked or not
  signing               when signatures keep the store from --strict: why, and
                        what to do (the store was never signed, or no --pubkey)
  failures, warnings    [{kind, run, seq, expected, actual, location, detail}]
  runs                  per run: run, records, last_seq, head, checkpoints,
                        signed, signed_seq, unsigned_tail, ended (a final
                        checkpoint verified with --pubkey covers its end),
                        ok, failure, warnings
  deleted               runs deleted by policy (continuumctl gc), each named
                        by a delete record that verified: run, seq, final,
                        head, at, reason, signed, reclaimed (its records are
                        partly or wholly gone; it is then not in runs),
                        erasure (continuumctl erase: seq, head, at, reason,
                        signed, unfinished; its payloads sealed with the
                        destroyed key are no failure)
  erased_keys           memory keys erased by policy (continuumctl erase
                        --memory-key), each named by an erase-key record that
                        verified: run, key, seq (the run's last when erased),
                        head (the erasure's link), key_nos (the data keys
                        destroyed), at, reason, signed, location; the values
                        those keys sealed are no failure
  rollbacks             the rollbacks in the log: run, seq (the atom that
                        completes it), to, at, undone, not_undone (certified
                        actions without a compensation, left done),
                        completed (false: pending, the run's next Rollback
                        finishes it)
  waits                 the records of runs' waits checked (absent: none):
                        waits, events, wakes
  strict                whether --strict was given
  state_saved           the --save-state file written, if any
  duration_ms           wall time of the check`

const verifyExamples = `  continuumctl verify ./agent-store
  continuumctl verify --strict --pubkey ./agent.key.pub ./agent-store
  continuumctl verify --pubkey ./agent.key.pub --state ./verified.json --save-state ./verified.json ./agent-store`

// progressMin is the log size above which verify draws a progress bar on a
// terminal.
const progressMin = 64 << 20

// verifyJSON is the object verify --json prints. Its fields are documented
// in verifyAbout; they are a stable interface.
type verifyJSON struct {
	OK                  bool               `json:"ok"`
	NotSigned           bool               `json:"not_signed,omitempty"`
	Store               string             `json:"store"`
	Dir                 string             `json:"dir"`
	RunsChecked         int                `json:"runs_checked"`
	RecordsChecked      uint64             `json:"records_checked"`
	CheckpointsVerified int                `json:"checkpoints_verified"`
	Checkpoints         int                `json:"checkpoints"`
	CheckpointsSigned   int                `json:"checkpoints_signed"`
	Signing             string             `json:"signing,omitempty"`
	Failures            []chain.Failure    `json:"failures"`
	Warnings            []chain.Failure    `json:"warnings"`
	Unchecked           []string           `json:"unchecked,omitempty"`
	Runs                []chain.RunReport  `json:"runs"`
	Deleted             []chain.DeletedRun `json:"deleted,omitempty"`     // runs deleted by policy
	ErasedKeys          []chain.ErasedKey  `json:"erased_keys,omitempty"` // memory keys erased by policy
	Rollbacks           []chain.Rollback   `json:"rollbacks,omitempty"`
	Waits               *chain.WaitCounts  `json:"waits,omitempty"` // wait, event and wake records checked
	Strict              bool               `json:"strict"`
	StateSaved          string             `json:"state_saved,omitempty"`
	DurationMS          float64            `json:"duration_ms"`
}

func runVerify(args []string, stdout, stderr io.Writer) int {
	fs := ctl.Flags("verify", verifyUsage, verifyAbout, verifyExamples, stderr)
	pubkey := fs.String("pubkey", "", "public key `file` that checks the signatures of checkpoints (keygen's FILE.pub, from the store's owner, never from the store);\nthe origin it names must be the store's")
	state := fs.String("state", "", "state `file` saved by an earlier --save-state: a store behind it or diverging from it is a rollback")
	saveState := fs.String("save-state", "", "write the verified state to `file` (atomically), for a later --state; only when the store is intact")
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	strict := fs.Bool("strict", false, "treat warnings (signatures unchecked, an unanchored tail) as failures: exit 1")
	deep := fs.Bool("deep", false, "also rebuild every run's frame from its deltas and compare it with the run's frame file")
	unsignedTail := fs.Uint64("allow-unsigned-tail", 0, "with --pubkey, accept `N` atoms per run past its last signed checkpoint (default 0: every head must be signed)")
	keyring := keyringFlag(fs)
	chainKey := fs.String("chain-key", "", "`file` holding the keyed-mode chain secret the store was written with (32 bytes, raw or 64 hex digits)")
	pos, code, ok := cli.ParseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return cli.UsageErr(fs, stderr, "want one store directory, got %d arguments", len(pos))
	}
	dir := pos[0]
	opts := &engine.VerifyOptions{Deep: *deep, UnsignedTail: *unsignedTail}
	if *unsignedTail != 0 && *pubkey == "" {
		return cli.UsageErr(fs, stderr, "--allow-unsigned-tail needs --pubkey")
	}
	if *pubkey != "" {
		b, err := os.ReadFile(*pubkey)
		if err != nil {
			return ctl.Fail(stderr, "verify", fmt.Errorf("public key: %w", err))
		}
		name, k, err := chain.ParsePublicKeyFile(b)
		if err != nil {
			return ctl.Fail(stderr, "verify", fmt.Errorf("public key %s: %w", *pubkey, err))
		}
		opts.PublicKey, opts.Origin = ed25519.PublicKey(k), name
	}
	if *state != "" {
		f, err := os.Open(*state)
		if err != nil {
			return ctl.Fail(stderr, "verify", fmt.Errorf("state: %w", err))
		}
		s, err := chain.ReadState(f)
		f.Close()
		if err != nil {
			return ctl.Fail(stderr, "verify", fmt.Errorf("state %s: %w", *state, err))
		}
		opts.Trusted = &s
	}
	if *chainKey != "" {
		k, err := readChainKey(*chainKey)
		if err != nil {
			return ctl.Fail(stderr, "verify", err)
		}
		opts.ChainKey = k
	}
	ring, err := readKeyring(*keyring)
	if err != nil {
		return ctl.Fail(stderr, "verify", err)
	}
	opts.Keyring = ring
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		opts.Progress = progressBar(f)
	}

	rep, err := engine.Verify(context.Background(), dir, opts)
	if opts.Progress != nil {
		opts.Progress(-1, -1) // clear the bar
	}
	if err != nil {
		// Verify fails only when it cannot check at all: an I/O error, not a
		// store, or a STORE file too damaged to say whose store it is.
		fmt.Fprintf(stderr, "continuumctl verify: cannot check %s: %v\n", dir, err)
		if cli.IsCorrupt(err) {
			return cli.ExitCorrupt
		}
		return cli.ExitUsage
	}
	// A store that carries no signature fails every run under --pubkey,
	// and the restart files past the unanchored chains with them. Whether
	// anything else is wrong is what a check without the key says: if
	// nothing is, the store is not signed, not tampered with.
	notSigned := false
	if opts.PublicKey != nil && !rep.OK && rep.Checkpoints > 0 && rep.CheckpointsSigned == 0 {
		plain := *opts
		plain.PublicKey, plain.Origin, plain.UnsignedTail, plain.Progress = nil, "", 0, nil
		if prep, err := engine.Verify(context.Background(), dir, &plain); err == nil {
			rep, notSigned = prep, prep.OK
		}
	}
	intact := rep.OK && !notSigned && (!*strict || len(rep.Warnings) == 0)

	saved := ""
	if *saveState != "" {
		if !rep.OK || notSigned {
			fmt.Fprintf(stderr, "continuumctl verify: not saving the state to %s: the store failed verification\n", *saveState)
		} else if err := writeStateFile(*saveState, rep.State()); err != nil {
			fmt.Fprintf(stderr, "continuumctl verify: %v\n", err)
			return cli.ExitUsage
		} else {
			saved = *saveState
		}
	}

	if *asJSON {
		out := verifyJSON{
			OK: intact, NotSigned: notSigned, Store: rep.StoreID, Dir: dir, RunsChecked: len(rep.Runs), RecordsChecked: rep.Records,
			CheckpointsVerified: rep.CheckpointsVerified, Checkpoints: rep.Checkpoints, CheckpointsSigned: rep.CheckpointsSigned,
			Signing: signingAdvice(rep, *pubkey != ""), Failures: rep.Failures, Warnings: rep.Warnings, Unchecked: rep.Unchecked,
			Runs: rep.Runs, Deleted: rep.Deleted, ErasedKeys: rep.ErasedKeys, Rollbacks: rep.Rollbacks, Waits: rep.Waits, Strict: *strict, StateSaved: saved, DurationMS: float64(rep.Duration.Microseconds()) / 1000,
		}
		if out.Failures == nil {
			out.Failures = []chain.Failure{}
		}
		if out.Warnings == nil {
			out.Warnings = []chain.Failure{}
		}
		if out.Runs == nil {
			out.Runs = []chain.RunReport{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return ctl.Fail(stderr, "verify", err)
		}
	} else {
		printVerify(stdout, dir, rep, *strict, *pubkey != "", notSigned, saved)
	}
	if notSigned {
		return cli.ExitNotSigned
	}
	if !intact {
		return cli.ExitCorrupt
	}
	return cli.ExitOK
}

func printVerify(w io.Writer, dir string, rep *chain.Report, strict, pubkey, notSigned bool, saved string) {
	fmt.Fprintf(w, "store %s at %s\n", rep.StoreID, dir)
	fmt.Fprintf(w, "checked %s, %s, %s verified, in %v\n", plural(len(rep.Runs), "run"), plural(int(rep.Records), "record"),
		plural(rep.CheckpointsVerified, "signed checkpoint"), rep.Duration.Round(time.Microsecond))
	for _, r := range rep.Runs {
		signed := ""
		if pubkey {
			signed = fmt.Sprintf(", %d atoms past its last signed checkpoint (seq %d)", r.UnsignedTail, r.SignedSeq)
		}
		if r.Ended {
			signed = ", ended" + signed
		}
		if r.OK {
			fmt.Fprintf(w, "  run %q: ok, %s, last seq %d, head %s%s\n", r.RunID, plural(int(r.Records), "record"), r.LastSeq, short(r.Head), signed)
			continue
		}
		fmt.Fprintf(w, "  run %q: FAILED after seq %d (%s%s)\n", r.RunID, r.LastSeq, plural(int(r.Records), "record"), signed)
	}
	for _, d := range rep.Deleted {
		how := "its records still in the log"
		if d.Reclaimed {
			how = "its records reclaimed"
		}
		if d.Signed {
			how += ", the deletion signed"
		}
		fmt.Fprintf(w, "  run %q: deleted by policy at %s (%s), %s\n", d.RunID,
			time.Unix(0, d.At).UTC().Format(time.RFC3339), d.Reason, how)
		if e := d.Erasure; e != nil {
			state := "its data key destroyed: what it sealed cannot be opened"
			if e.Unfinished {
				state = "unfinished: KEYS still holds its data key, marked erasing (the next Open of the store finishes the erasure)"
			}
			fmt.Fprintf(w, "  run %q: erased by policy at %s (%s), %s\n", d.RunID,
				time.Unix(0, e.At).UTC().Format(time.RFC3339), e.Reason, state)
		}
	}
	for _, e := range rep.ErasedKeys {
		how := ""
		if e.Signed {
			how = ", the erasure signed"
		}
		fmt.Fprintf(w, "  run %q memory key %q: erased by policy at %s (%s), after seq %d, %s destroyed: its values cannot be opened%s\n",
			e.RunID, e.Key, time.Unix(0, e.At).UTC().Format(time.RFC3339), e.Reason, e.Seq, dataKeys(e.KeyNos), how)
	}
	for _, rb := range rep.Rollbacks {
		state := fmt.Sprintf("completed by seq %d, chained", rb.Seq)
		if !rb.Completed {
			state = fmt.Sprintf("pending: seq %d will complete it", rb.Seq)
		}
		fmt.Fprintf(w, "  run %q: rolled back to seq %d at %s, %s undone, %d not undone (no compensation), %s\n", rb.RunID, rb.To,
			time.Unix(0, rb.At).UTC().Format(time.RFC3339), plural(rb.Undone, "action"), rb.NotUndone, state)
	}
	if c := rep.Waits; c != nil {
		fmt.Fprintf(w, "  waits: %s, %s and %s checked\n", plural(c.Waits, "wait record"), plural(c.Events, "event record"), plural(c.Wakes, "wake record"))
	}
	if len(rep.Failures) > 0 {
		fmt.Fprintf(w, "failures:\n")
		for _, f := range rep.Failures {
			cli.PrintFinding(w, f)
		}
	}
	if len(rep.Warnings) > 0 {
		fmt.Fprintf(w, "warnings:\n")
		for _, f := range rep.Warnings {
			cli.PrintFinding(w, f)
		}
	}
	if len(rep.Unchecked) > 0 {
		fmt.Fprintf(w, "not compared with the log (--deep does): %s\n", strings.Join(rep.Unchecked, ", "))
	}
	if a := signingAdvice(rep, pubkey); a != "" {
		fmt.Fprintf(w, "signing: %s\n", a)
	}
	if saved != "" {
		fmt.Fprintf(w, "state saved to %s\n", saved)
	}
	switch {
	case notSigned:
		fmt.Fprintf(w, "result: NOT SIGNED (--pubkey: the store carries no signature; checked without it, it is intact)\n")
	case !rep.OK:
		fmt.Fprintf(w, "result: TAMPERED OR CORRUPT (%s)\n", plural(len(rep.Failures), "failure"))
	case strict && len(rep.Warnings) > 0:
		fmt.Fprintf(w, "result: NOT VERIFIED (--strict: %s counted as failures)\n", plural(len(rep.Warnings), "warning"))
	case len(rep.Warnings) > 0:
		fmt.Fprintf(w, "result: INTACT (%s; --strict would fail)\n", plural(len(rep.Warnings), "warning"))
	default:
		fmt.Fprintf(w, "result: INTACT\n")
	}
}

// dataKeys names data keys by number: "data key 4", "data keys 4, 9".
func dataKeys(nos []uint64) string {
	names := make([]string, len(nos))
	for i, no := range nos {
		names[i] = strconv.FormatUint(no, 10)
	}
	if len(nos) == 1 {
		return "data key " + names[0]
	}
	return "data keys " + strings.Join(names, ", ")
}

// signingAdvice says, when signatures are why a store cannot pass
// --strict, what the store's checkpoints are and what to do; "" otherwise.
func signingAdvice(rep *chain.Report, hasKey bool) string {
	switch {
	case rep.Checkpoints > 0 && rep.CheckpointsSigned == 0:
		return fmt.Sprintf("the store was never signed: none of its %s (checkpoints and store heads) carries a signature (it was written without "+
			"engine.Options.SigningKey), so no checkpoint can anchor its chains and --strict cannot pass. "+
			"A store is signed from its creation: make the key first (continuumctl keygen), "+
			"then open the store with it from its first run on", plural(rep.Checkpoints, "checkpoint record"))
	case !hasKey && rep.CheckpointsSigned > 0:
		return fmt.Sprintf("%d of the store's %s carry a signature; give --pubkey FILE (the .pub file keygen wrote) to check them",
			rep.CheckpointsSigned, plural(rep.Checkpoints, "checkpoint"))
	}
	return ""
}

// short abbreviates a hash for tables; full hashes are in --json.
func short(h chain.Hash) string { return h.String()[:16] }

// writeStateFile writes s to name atomically (writeFileAtomic).
func writeStateFile(name string, s chain.State) error {
	var buf bytes.Buffer
	if err := chain.WriteState(&buf, s); err != nil {
		return err
	}
	if err := writeFileAtomic(name, buf.Bytes(), false); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressBar returns a VerifyOptions.Progress that draws a bar on w once
// the log is larger than progressMin. Called with (-1, -1) it clears it.
func progressBar(w io.Writer) func(done, total int64) {
	drawn := false
	last := time.Time{}
	return func(done, total int64) {
		if done < 0 {
			if drawn {
				fmt.Fprintf(w, "\r%s\r", strings.Repeat(" ", 60))
			}
			return
		}
		if total < progressMin || time.Since(last) < 100*time.Millisecond && done < total {
			return
		}
		last = time.Now()
		const width = 30
		n := int(float64(width) * float64(done) / float64(total))
		n = min(max(n, 0), width)
		fmt.Fprintf(w, "\rverify [%s%s] %3d%% of %s", strings.Repeat("#", n), strings.Repeat(".", width-n),
			done*100/total, size(total))
		drawn = true
	}
}

// readChainKey reads a keyed-mode chain secret: 32 raw bytes, or 64 hex
// digits (surrounding white space ignored).
func readChainKey(name string) ([]byte, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("chain key: %w", err)
	}
	if len(b) == 32 {
		return b, nil
	}
	h := strings.TrimSpace(string(b))
	k, err := hex.DecodeString(h)
	if err != nil || len(k) != 32 {
		return nil, fmt.Errorf("chain key %s: want 32 raw bytes or 64 hex digits, found %d bytes", name, len(b))
	}
	return k, nil
}
