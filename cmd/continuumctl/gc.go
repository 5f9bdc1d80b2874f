package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
)

const gcUsage = "gc DIR [--run ID]... [--status S] [--ended-before T] [--reason TEXT] [--compact-dead F] [--key FILE] [--chain-key FILE] [--keyring FILE] [--json]"

const gcAbout = `Gc deletes ended runs of a store and reclaims the space their records hold in
the log. With --run (repeated), the runs named: each must have ended, and a run
forked from one must be named too. With --status or --ended-before, every ended
run that matches, except one whose fork does not; gc then lists every run it
kept and why (active, another status, ended since the cutoff, a fork that
lives). With neither, nothing is deleted: the space of runs deleted earlier is
reclaimed.

The space is reclaimed below the engine's last checkpoint: the segments at the
start of the log that hold only dead records are removed, and a later segment
that is wholly dead, or whose dead records take at least --compact-dead of its
bytes (default 0.5), is rewritten with its live records only, each where it
was (a compaction: the segment keeps a note of every record it removed, which
verify checks against the deletions).

Each deletion is a record of the log that stays: verify lists the run as
deleted by policy, with its time and reason, and reports a run whose records
vanished without one. In a signed store, pass the signing key (--key): gc
writes deletions, checkpoints and store heads, and verify --pubkey reports
unsigned ones as bad signatures.

Gc opens the store, so it takes the store's lock: it fails while another
process has the store open (a running agent). From that process, call
DB.DeleteRuns and DB.GC instead.

Exit 0: done. Exit 1: the store is damaged. Exit 2: usage or I/O error (the
store is open elsewhere, a run named is active or has a fork not named).`

const gcExamples = `  continuumctl gc ./agent-store --status completed --ended-before 720h
  continuumctl gc ./agent-store --run deploy-41 --run deploy-41-retry --reason "user request"
  continuumctl gc ./agent-store --key ./agent.key --ended-before 2026-01-01T00:00:00Z`

// gcJSON is what gc --json prints.
type gcJSON struct {
	Deleted []gcDeleted `json:"deleted"`
	// Kept lists, when a policy selected the runs, every run of the store
	// it did not delete, with why (absent with --run, or no selection).
	Kept []gcKept `json:"kept,omitempty"`
	// What the collection removed: segment files, their bytes, and the
	// first segment the log keeps.
	Segments int    `json:"segments_removed"`
	Bytes    int64  `json:"bytes_reclaimed"`
	Floor    uint64 `json:"first_segment"`
	// What compaction rewrote: segments (those of them wholly dead), and
	// the bytes that freed.
	Compacted      int   `json:"segments_compacted"`
	Emptied        int   `json:"segments_emptied"`
	CompactedBytes int64 `json:"bytes_compacted"`
}

type gcDeleted struct {
	Run    string `json:"run"`
	Seq    uint64 `json:"seq"`
	Reason string `json:"reason"`
}

// gcKept is a run that a policy (--status, --ended-before) did not delete,
// and why.
type gcKept struct {
	Run string `json:"run"`
	Why string `json:"why"`
}

// runList is a repeatable --run flag.
type runList []string

func (l *runList) String() string     { return strings.Join(*l, ",") }
func (l *runList) Set(s string) error { *l = append(*l, s); return nil }

func runGC(args []string, stdout, stderr io.Writer) int {
	fs := ctl.Flags("gc", gcUsage, gcAbout, gcExamples, stderr)
	var ids runList
	fs.Var(&ids, "run", "delete run `ID` (repeat for more)")
	status := fs.String("status", "", "delete the ended runs with `STATUS` completed, failed or cancelled (comma-separated)")
	before := fs.String("ended-before", "", "delete the ended runs that ended before `T`: an RFC 3339 time, or a duration ago (720h)")
	reason := fs.String("reason", "", "the `TEXT` each deletion records (default: what selected the run)")
	keyFile := fs.String("key", "", "sign the deletions with the signing key `FILE` (continuumctl keygen)")
	chainKey := fs.String("chain-key", "", "`file` holding the keyed-mode chain secret the store was written with")
	keyring := keyringFlag(fs)
	compactDead := fs.Float64("compact-dead", 0, "compact a segment whose dead records take at least fraction `F` of it (0: the default, 0.5; negative: only wholly dead ones)")
	asJSON := fs.Bool("json", false, "print what was deleted and reclaimed as JSON")
	pos, code, ok := cli.ParseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return cli.UsageErr(fs, stderr, "want exactly one store directory")
	}
	dir := pos[0]
	sel := engine.DeleteOptions{IDs: ids, Reason: *reason}
	if len(ids) > 0 && (*status != "" || *before != "") {
		return cli.UsageErr(fs, stderr, "--run names runs; --status and --ended-before select them: use one or the other")
	}
	if *status != "" {
		for _, s := range strings.Split(*status, ",") {
			st, ok := parseFinalStatus(strings.TrimSpace(s))
			if !ok {
				return cli.UsageErr(fs, stderr, "--status %q: want completed, failed or cancelled", s)
			}
			sel.Status = append(sel.Status, st)
		}
	}
	if *before != "" {
		t, err := parseEndedBefore(*before, time.Now())
		if err != nil {
			return cli.UsageErr(fs, stderr, "--ended-before: %v", err)
		}
		sel.EndedBefore = t
	}
	// The engine's warnings (a torn tail trimmed, a derived file rebuilt)
	// go to stderr; its routine reports do not.
	opts := &engine.Options{Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), CompactDead: *compactDead}
	if *compactDead > 1 {
		return cli.UsageErr(fs, stderr, "--compact-dead %v: want a fraction at most 1", *compactDead)
	}
	if *keyFile != "" {
		key, err := readSigningKey(*keyFile, dir)
		if err != nil {
			return ctl.Fail(stderr, "gc", err)
		}
		opts.SigningKey = key
	}
	if *chainKey != "" {
		k, err := readChainKey(*chainKey)
		if err != nil {
			return ctl.Fail(stderr, "gc", err)
		}
		opts.ChainKey = k
	}
	ring, err := readKeyring(*keyring)
	if err != nil {
		return ctl.Fail(stderr, "gc", err)
	}
	opts.Keyring = ring
	if _, err := os.Stat(dir); err != nil {
		return ctl.Fail(stderr, "gc", fmt.Errorf("%w: %v", engine.ErrNotAStore, err))
	}
	if _, err := engine.StoreOrigin(dir, nil); err != nil {
		return ctl.Fail(stderr, "gc", err) // not a store: Open would create one
	}
	db, err := engine.Open(dir, opts)
	if err != nil {
		if errors.Is(err, engine.ErrLocked) {
			err = fmt.Errorf("%w\n(another process has the store open: stop it, or delete and collect from it with DB.DeleteRuns and DB.GC)", err)
		}
		return ctl.Fail(stderr, "gc", err)
	}
	out, code := collectStore(db, sel)
	if err := db.Close(); err != nil && code == cli.ExitOK {
		return ctl.Fail(stderr, "gc", err)
	}
	if code != cli.ExitOK {
		return ctl.Fail(stderr, "gc", out.err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out.json); err != nil {
			return ctl.Fail(stderr, "gc", err)
		}
		return cli.ExitOK
	}
	if len(out.json.Deleted) == 0 {
		fmt.Fprintln(stdout, "deleted no run")
	} else {
		fmt.Fprintf(stdout, "deleted %s:\n", plural(len(out.json.Deleted), "run"))
		for _, d := range out.json.Deleted {
			fmt.Fprintf(stdout, "  %q at seq %d: %s\n", d.Run, d.Seq, d.Reason)
		}
	}
	if len(out.json.Kept) > 0 {
		fmt.Fprintf(stdout, "kept %s:\n", plural(len(out.json.Kept), "run"))
		for _, k := range out.json.Kept {
			fmt.Fprintf(stdout, "  %q: %s\n", k.Run, k.Why)
		}
	}
	j := out.json
	if j.Segments == 0 && j.Compacted == 0 {
		fmt.Fprintln(stdout, "reclaimed nothing: no dead segment at the start of the log, none to compact")
	}
	if j.Segments > 0 {
		fmt.Fprintf(stdout, "reclaimed %s: %s removed; the log starts at segment %d\n",
			size(j.Bytes), plural(j.Segments, "segment"), j.Floor)
	}
	if j.Compacted > 0 {
		fmt.Fprintf(stdout, "reclaimed %s: %s compacted (%d of them wholly dead)\n",
			size(j.CompactedBytes), plural(j.Compacted, "segment"), j.Emptied)
	}
	return cli.ExitOK
}

type gcOutcome struct {
	json gcJSON
	err  error
}

// collectStore deletes what sel selects (if anything) and collects.
func collectStore(db *engine.DB, sel engine.DeleteOptions) (gcOutcome, int) {
	ctx := context.Background()
	out := gcOutcome{json: gcJSON{Deleted: []gcDeleted{}}}
	if len(sel.IDs) > 0 || len(sel.Status) > 0 || !sel.EndedBefore.IsZero() {
		var runs []engine.RunInfo
		if len(sel.IDs) == 0 {
			var err error
			if runs, err = db.Runs(); err != nil {
				out.err = err
				return out, cli.ExitUsage
			}
		}
		ds, err := db.DeleteRuns(ctx, sel)
		if err != nil {
			out.err = err
			return out, cli.ExitUsage
		}
		deleted := map[string]bool{}
		for _, d := range ds {
			out.json.Deleted = append(out.json.Deleted, gcDeleted{Run: d.ID, Seq: d.Seq, Reason: d.Reason})
			deleted[d.ID] = true
		}
		out.json.Kept = keptRuns(runs, deleted, sel)
	}
	st, err := db.GC(ctx)
	if err != nil {
		out.err = err
		return out, cli.ExitUsage
	}
	out.json.Segments, out.json.Bytes, out.json.Floor = st.Segments, st.Bytes, st.Floor
	out.json.Compacted, out.json.Emptied, out.json.CompactedBytes = st.Compacted, st.Emptied, st.CompactedBytes
	return out, cli.ExitOK
}

// keptRuns says, for each of runs (the store's runs before a deletion by
// policy sel) that is not in deleted, why the policy kept it: it is
// active, its status or end time does not match, or a fork of it that
// the policy does not select lives (engine.DB.DeleteRuns keeps a run
// with a living fork).
func keptRuns(runs []engine.RunInfo, deleted map[string]bool, sel engine.DeleteOptions) []gcKept {
	var kept []gcKept
	for _, r := range runs {
		if deleted[r.ID] {
			continue
		}
		var why string
		switch {
		case r.Status == engine.StatusActive:
			why = "active: only an ended run is deleted"
		case len(sel.Status) > 0 && !slices.Contains(sel.Status, r.Status):
			why = fmt.Sprintf("%s, not a status --status selects", r.Status)
		case !sel.EndedBefore.IsZero() && !r.Ended.Before(sel.EndedBefore):
			why = fmt.Sprintf("ended at %s, not before %s", r.Ended.UTC().Format(time.RFC3339), sel.EndedBefore.UTC().Format(time.RFC3339))
		default:
			var forks []string
			for _, f := range runs {
				if f.Parent == r.ID && !deleted[f.ID] {
					forks = append(forks, strconv.Quote(f.ID))
				}
			}
			why = "selected, but kept while its forks live: " + strings.Join(forks, ", ")
			if len(forks) == 0 {
				why = "selected, but not deleted" // ended or forked since the runs were listed
			}
		}
		kept = append(kept, gcKept{Run: r.ID, Why: why})
	}
	slices.SortFunc(kept, func(a, b gcKept) int { return strings.Compare(a.Run, b.Run) })
	return kept
}

func parseFinalStatus(s string) (engine.Status, bool) {
	for _, st := range []engine.Status{engine.StatusCompleted, engine.StatusFailed, engine.StatusCancelled} {
		if s == st.String() {
			return st, true
		}
	}
	return 0, false
}

// parseEndedBefore reads an RFC 3339 time, or a duration before now.
func parseEndedBefore(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a duration ago (such as 720h)", s)
	}
	return now.Add(-d), nil
}

// readSigningKey reads a signing key file for the store in dir, refusing
// a key of another store's origin.
func readSigningKey(name, dir string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	origin, key, err := chain.ParseSigningKey(b)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", name, err)
	}
	want, err := engine.StoreOrigin(dir, nil)
	if err != nil {
		return nil, err
	}
	if origin != want {
		return nil, fmt.Errorf("signing key %s is for origin %s, not this store's %s", name, origin, want)
	}
	return key, nil
}
