package tamper

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/wal"
)

// Outcomes of a Do of a past action (Action.Outcome).
const (
	outcomeResult  = "result"
	outcomeInDoubt = "in-doubt"
)

// errPrefix starts every answer that is an error rather than a value.
const errPrefix = "error: "

// oracleSpec is the oracle child's task: read the store in Dir.
type oracleSpec struct {
	Dir       string   `json:"dir"`
	KeySeed   []byte   `json:"key_seed"`
	Sealed    bool     `json:"sealed,omitempty"`
	NonceSeed uint64   `json:"nonce_seed"`
	Runs      []string `json:"runs"`
	Actions   []Action `json:"actions"`
	Out       string   `json:"out"`
}

// Answers are everything the oracle read from one store.
type Answers struct {
	// VerifyPlain and VerifyDeep are what Verify said of the store as it
	// was handed over (before anything opened it).
	VerifyPlain VerifyAnswer `json:"verify_plain"`
	VerifyDeep  VerifyAnswer `json:"verify_deep"`
	// Tools is what the read-only tools (Inspect) read, before the engine
	// opened the store.
	Tools ToolAnswers `json:"tools"`
	// CLI is what continuumctl said of the store (see cliCommands), run by
	// the parent before the oracle child.
	CLI []CLIAnswer `json:"cli,omitempty"`
	// Rounds are three Opens of the store, one after the other, each read
	// in full and closed; at the end of the second, the agent goes on (see
	// EngineAnswers.Continue).
	Rounds [3]EngineAnswers `json:"rounds"`
	// Log holds the engine's warnings and errors (the first few).
	Log []string `json:"log,omitempty"`
	// missing: the oracle child wrote no answer; only CLI is set.
	missing bool
}

// VerifyAnswer is the verdict of one Verify.
type VerifyAnswer struct {
	// Err is set when Verify could not check at all; Corrupt when that
	// error says the store is corrupt (continuumctl verify exits 1 for
	// it, 2 otherwise).
	Err     string `json:"err,omitempty"`
	Corrupt bool   `json:"corrupt,omitempty"`
	// OK is the report's verdict; Failures and Warnings its findings.
	OK       bool            `json:"ok"`
	Failures []chain.Failure `json:"failures,omitempty"`
	Warnings []chain.Failure `json:"warnings,omitempty"`
}

// Detected reports whether continuumctl verify would exit 1 (tampered or
// corrupt) on this verdict.
func (v VerifyAnswer) Detected() bool {
	if v.Err != "" {
		return v.Corrupt
	}
	return !v.OK
}

// Text is everything the verdict says, for searching names in.
func (v VerifyAnswer) Text() string {
	var b strings.Builder
	b.WriteString(v.Err)
	for _, f := range v.Failures {
		b.WriteString("\n")
		b.WriteString(f.String())
	}
	return b.String()
}

// EngineAnswers are the answers of one Open of the store.
type EngineAnswers struct {
	Open string `json:"open"` // "ok" or an error
	// Wrote lists what a refused Open changed in the store.
	Wrote []string `json:"wrote,omitempty"`
	Runs  string   `json:"runs"`  // DB.Runs: the ids, or an error
	Stats string   `json:"stats"` // DB.Stats().Runs
	// Run is per expected run id.
	Run map[string]*RunAnswers `json:"run,omitempty"`
	// Continue is what an agent that goes on gets: a new atom of run
	// continueRun with a new action, committed (second round only).
	Continue string `json:"continue,omitempty"`
	// Close and Background (Stats().Background at the end) are reported,
	// not compared: the engine may say there that it rebuilt something.
	Close      string `json:"close,omitempty"`
	Background string `json:"background,omitempty"`
}

// RunAnswers are what an agent resuming one run reads.
type RunAnswers struct {
	LastSeq     string   `json:"last_seq"`
	Head        string   `json:"head"`
	Info        string   `json:"info"`        // Run.Info, less what derived files may change
	Interrupted string   `json:"interrupted"` // Run.Interrupted
	State       string   `json:"state"`       // State()
	StateE      string   `json:"state_e"`
	StateAt     []string `json:"state_at"` // StateAt(0..LastSeq)
	Atoms       []string `json:"atoms"`    // Run.Atom(1..LastSeq)
	Begin       string   `json:"begin"`    // the seq Begin gives, resumed or not
	// Do is, per past action of the run (in Store.Actions order), what a Do
	// of it returned.
	Do []string `json:"do"`
}

// ToolAnswers are what the read-only tools read (continuumctl inspect,
// stats and export go through Inspect).
type ToolAnswers struct {
	Inspect string `json:"inspect"` // "ok" or an error
	// Runs is per run id: its summary, and per seq the atom and the frame.
	Runs  map[string]*ToolRun `json:"runs,omitempty"`
	Stats string              `json:"stats,omitempty"` // runs, atoms, records
	Scan  string              `json:"scan"`            // Scan's record count, or an error
}

// ToolRun is what Inspect says of one run.
type ToolRun struct {
	Summary string   `json:"summary"`
	Atoms   []string `json:"atoms"`    // Atom(1..LastSeq)
	StateAt []string `json:"state_at"` // StateAt(0..LastSeq)
}

// oracleMain reads the store and writes its Answers.
func oracleMain(s *oracleSpec) int {
	ans := readStore(context.Background(), s)
	if err := writeAnswer(s.Out, ans, s.Dir); err != nil {
		fmt.Fprintf(os.Stderr, "tamper oracle: %v\n", err)
		return 1
	}
	return 0
}

func readStore(ctx context.Context, s *oracleSpec) *Answers {
	ans := &Answers{}
	pub := ed25519.NewKeyFromSeed(s.KeySeed).Public().(ed25519.PublicKey)
	ring := keyring(s.KeySeed, s.Sealed)
	ans.VerifyPlain = verify(ctx, s.Dir, pub, false, ring)
	ans.VerifyDeep = verify(ctx, s.Dir, pub, true, ring)
	ans.Tools = readTools(ctx, s)
	log := &logLines{}
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	wrote := "" // the head of the atom the oracle's agent committed (sealed store)
	for i := range ans.Rounds {
		ans.Rounds[i] = readEngine(ctx, s, logger, uint64(i))
		if s.Sealed {
			wrote = maskWrittenHead(&ans.Rounds[i], wrote)
		}
	}
	ans.Log = log.lines
	return ans
}

func verify(ctx context.Context, dir string, pub ed25519.PublicKey, deep bool, ring seal.Keyring) VerifyAnswer {
	rep, err := engine.Verify(ctx, dir, &engine.VerifyOptions{PublicKey: pub, Deep: deep, Keyring: ring})
	if err != nil {
		return VerifyAnswer{Err: err.Error(), Corrupt: errors.Is(err, engine.ErrCorrupt) || errors.Is(err, wal.ErrCorrupt)}
	}
	return VerifyAnswer{OK: rep.OK, Failures: rep.Failures, Warnings: rep.Warnings}
}

// readEngine opens the store as the agent does and reads every answer.
func readEngine(ctx context.Context, s *oracleSpec, logger *slog.Logger, round uint64) EngineAnswers {
	var ea EngineAnswers
	before, _ := treeDigest(s.Dir)
	db, err := engine.Open(s.Dir, options(s.KeySeed, s.NonceSeed+round, logger, s.Sealed))
	if err != nil {
		ea.Open = errPrefix + err.Error()
		after, _ := treeDigest(s.Dir)
		ea.Wrote = diffTrees(before, after)
		return ea
	}
	ea.Open = "ok"
	infos, err := db.Runs()
	present := map[string]bool{}
	if err != nil {
		ea.Runs = errPrefix + err.Error()
	} else {
		var ids []string
		for _, ri := range infos {
			ids = append(ids, ri.ID)
			present[ri.ID] = true
		}
		sort.Strings(ids)
		ea.Runs = strings.Join(ids, ",")
	}
	ea.Stats = fmt.Sprintf("%d runs", db.Stats().Runs)
	ea.Run = map[string]*RunAnswers{}
	for _, id := range s.Runs {
		if !present[id] {
			continue // Run would create it: the difference is in Runs
		}
		ea.Run[id] = readRun(ctx, db, id, s.Actions)
	}
	if round == 1 && present[continueRun] {
		ea.Continue = continueAgent(ctx, db, continueRun)
	}
	ea.Background = errString(db.Stats().Background)
	ea.Close = errString(db.Close())
	return ea
}

func readRun(ctx context.Context, db *engine.DB, id string, actions []Action) *RunAnswers {
	ra := &RunAnswers{}
	r, err := db.Run(ctx, id)
	if err != nil {
		ra.LastSeq = errPrefix + err.Error()
		return ra
	}
	last := r.LastSeq()
	ra.LastSeq = fmt.Sprint(last)
	ra.Head = r.Head().String()
	info := r.Info()
	ra.Info = fmt.Sprintf("created %d, last seq %d, head %s, chain checkpoint %d, interrupted %d",
		info.Created.UnixNano(), info.LastSeq, info.Head, info.CheckpointSeq, info.Interrupted)
	ra.Interrupted = interrupted(ctx, r)
	ra.State = frameAnswer(r.State(), nil)
	ra.StateE = frameAnswer(r.StateE())
	for seq := uint64(0); seq <= last; seq++ {
		ra.StateAt = append(ra.StateAt, frameAnswer(r.StateAt(ctx, seq)))
	}
	for seq := uint64(1); seq <= last; seq++ {
		ra.Atoms = append(ra.Atoms, atomAnswer(r.Atom(ctx, seq)))
	}
	atom, err := r.Begin(ctx)
	if err != nil {
		ra.Begin = errPrefix + err.Error()
		return ra
	}
	ra.Begin = fmt.Sprintf("seq %d resumed %v", atom.Seq(), atom.Resumed())
	for _, a := range actions {
		if a.Run == id {
			ra.Do = append(ra.Do, doAnswer(ctx, atom, a))
		}
	}
	if err := atom.Fail(ctx, "tamper oracle: read only"); err != nil {
		ra.Begin += "; " + errPrefix + "fail: " + err.Error()
	}
	return ra
}

// maskWrittenHead stands a fixed name for the head of the atom the
// oracle's agent commits (ea.Continue) in an encrypted store, in ea and in
// the rounds after it (wrote, the head found so far): the atom's sealed
// body has a random nonce, so its head differs from the pristine store's
// even when nothing was damaged. Only that exact head is masked: a run
// that reads back another head after the restart still differs.
func maskWrittenHead(ea *EngineAnswers, wrote string) string {
	if _, rest, ok := strings.Cut(ea.Continue, " head "); ok && wrote == "" {
		wrote, _, _ = strings.Cut(rest, " ")
	}
	if wrote == "" {
		return ""
	}
	b, err := json.Marshal(ea)
	if err != nil {
		return wrote
	}
	// Whole, and as the atom answers shorten it (its first 8 bytes).
	b = bytes.ReplaceAll(b, []byte(wrote), []byte("(the head of the atom the oracle committed)"))
	if len(wrote) > 16 {
		b = bytes.ReplaceAll(b, []byte(wrote[:16]), []byte("(its short head)"))
	}
	var masked EngineAnswers
	if json.Unmarshal(b, &masked) == nil {
		*ea = masked
	}
	return wrote
}

// continueRun is the run the oracle's agent goes on with.
const continueRun = "alpha"

// continueAgent commits a new atom of run with a new action, as an agent
// that resumes does, and describes what it got.
func continueAgent(ctx context.Context, db *engine.DB, id string) string {
	r, err := db.Run(ctx, id)
	if err != nil {
		return errPrefix + "run: " + err.Error()
	}
	atom, err := r.Begin(ctx)
	if err != nil {
		return errPrefix + "begin: " + err.Error()
	}
	act := ledger.Action{Tool: "report.publish", Args: []byte(`{"channel":"ops","after":"tamper"}`),
		Key: fmt.Sprintf("tamper-continue-%s-%d", id, atom.Seq())}
	out, err := atom.Do(ctx, act, func(_ context.Context, key string) ([]byte, error) {
		return []byte(`{"published":"` + key + `"}`), nil
	})
	if err != nil {
		atom.Fail(ctx, "tamper oracle: do failed")
		return errPrefix + "do: " + err.Error()
	}
	d := new(frame.Delta).Set("published", out).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: "published the report"})
	if err := atom.Commit(ctx, d); err != nil {
		return errPrefix + "commit: " + err.Error()
	}
	st, err := r.StateE()
	return fmt.Sprintf("seq %d head %s result %s state %s", atom.Seq(), r.Head(), digest(out), frameAnswer(st, err))
}

func interrupted(ctx context.Context, r *engine.Run) string {
	seq, acts, err := r.Interrupted(ctx)
	if err != nil {
		return errPrefix + err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seq %d", seq)
	for _, a := range acts {
		fmt.Fprintf(&b, "; %d %s %s key %q %s", a.Index, a.Fingerprint.String()[:16], a.Tool, a.Key, a.Status)
	}
	return b.String()
}

// errExec is what the oracle's exec returns: it never performs an action.
var errExec = errors.New("tamper oracle: exec called")

func doAnswer(ctx context.Context, atom *engine.Atom, a Action) string {
	called := false
	out, err := atom.Do(ctx, ledger.Action{Tool: a.Tool, Args: a.Args, Key: a.Key, Idempotent: a.Idempotent},
		func(context.Context, string) ([]byte, error) {
			called = true
			return nil, errExec
		})
	var doubt *ledger.InDoubtError
	switch {
	case called:
		return "exec called (" + errString(err) + ")"
	case errors.As(err, &doubt):
		return outcomeInDoubt
	case err != nil:
		return errPrefix + err.Error()
	}
	return "result " + digest(out)
}

// readTools reads the store with the read-only tools.
func readTools(ctx context.Context, s *oracleSpec) ToolAnswers {
	var ta ToolAnswers
	n := 0
	err := engine.Scan(ctx, s.Dir, nil, func(*engine.LogRecord) error { n++; return nil })
	ta.Scan = fmt.Sprintf("%d records", n)
	if err != nil {
		ta.Scan = errPrefix + err.Error()
	}
	in, err := engine.Inspect(ctx, s.Dir, &engine.InspectOptions{Keyring: keyring(s.KeySeed, s.Sealed)})
	if err != nil {
		ta.Inspect = errPrefix + err.Error()
		return ta
	}
	defer in.Close()
	ta.Inspect = "ok"
	st := in.Stats()
	ta.Stats = fmt.Sprintf("%d runs, %d atoms, %d records", st.Runs, st.Atoms, st.Records)
	ta.Runs = map[string]*ToolRun{}
	for _, rs := range in.Runs() {
		tr := &ToolRun{Summary: fmt.Sprintf("atoms %d last %d head %s fails %d in-flight %d (%d actions) in-doubt %d",
			rs.Atoms, rs.LastSeq, rs.Head, rs.Fails, rs.InFlight, len(rs.InFlightActions), len(rs.InDoubt))}
		for seq := uint64(1); seq <= rs.LastSeq; seq++ {
			tr.Atoms = append(tr.Atoms, atomAnswer(in.Atom(ctx, rs.ID, seq)))
		}
		for seq := uint64(0); seq <= rs.LastSeq; seq++ {
			tr.StateAt = append(tr.StateAt, frameAnswer(in.StateAt(ctx, rs.ID, seq)))
		}
		ta.Runs[rs.ID] = tr
	}
	return ta
}

func atomAnswer(a *engine.AtomInfo, err error) string {
	if err != nil {
		return errPrefix + err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "head %s delta %s", a.Head.String()[:16], digest(frame.AppendDelta(nil, a.Delta)))
	for _, act := range a.Actions {
		fmt.Fprintf(&b, "; %s %s key %q %s result %s", act.Fingerprint.String()[:16], act.Tool, act.Key, act.Status, digest(act.Result))
	}
	return b.String()
}

// frameAnswer describes a frame: a digest of its encoding, which two equal
// frames share, and a summary that shows how two frames differ.
func frameAnswer(f *frame.Frame, err error) string {
	if err != nil {
		return errPrefix + err.Error()
	}
	if f == nil {
		return errPrefix + "nil frame"
	}
	return fmt.Sprintf("frame %s (%d subgoals, %d memory keys, %d scratch bytes, %d messages, %d pending)",
		digest(frame.AppendFrame(nil, f)), len(f.Subgoals), len(f.Memory), len(f.Scratchpad), len(f.Messages), len(f.Pending))
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// treeDigest maps each file under dir to a digest of its content.
func treeDigest(dir string) (map[string]string, error) {
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		m[filepath.ToSlash(rel)] = digest(b)
		return nil
	})
	return m, err
}

// diffTrees lists the files created, changed or removed from a to b.
func diffTrees(a, b map[string]string) []string {
	var out []string
	for name, h := range b {
		switch ha, ok := a[name]; {
		case !ok:
			out = append(out, "created "+name)
		case ha != h:
			out = append(out, "changed "+name)
		}
	}
	for name := range a {
		if _, ok := b[name]; !ok {
			out = append(out, "removed "+name)
		}
	}
	slices.Sort(out)
	return out
}

// logLines keeps the first lines of the engine's log.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

const logKeep = 20

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		if len(l.lines) < logKeep {
			l.lines = append(l.lines, string(line))
		}
	}
	return len(p), nil
}
