package tamper

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/workload"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/seal"
	"github.com/zeebo/blake3"
)

// Store is a store made by Build and what a reader must find in it.
type Store struct {
	Dir string // the pristine store
	// Older are copies of Dir taken at its earlier Closes, newest first.
	Older []string
	// KeySeed derives the signing key (see signingKey); PublicKey is its
	// public half, which verify is given.
	KeySeed   []byte
	PublicKey ed25519.PublicKey
	// Actions are every action the store holds, in the order they were
	// made, with what a Do of each must return.
	Actions []Action
	// Runs are the ids of the store's runs.
	Runs []string
	// Sealed: the store is encrypted at rest (Options.Keyring), with the
	// keyring KeySeed derives (keyring).
	Sealed bool `json:",omitempty"`
}

// Action is one action of the store: the arguments of a Do that repeats it
// (with the key it was made with, explicit or default) and its outcome.
type Action struct {
	Run        string `json:"run"`
	Seq        uint64 `json:"seq"`
	Tool       string `json:"tool"`
	Args       []byte `json:"args"`
	Key        string `json:"key"`
	Idempotent bool   `json:"idempotent,omitempty"`
	// Outcome is what a Do of it gets: "result" (the certified Result,
	// without exec), "in-doubt" (ledger.ErrInDoubt) or "exec" (exec is
	// called: the action was resolved as failed and not retried).
	Outcome string `json:"outcome"`
	Result  []byte `json:"result,omitempty"`
}

// Shape of the store: small segments and frequent snapshots so that a small
// store has several log segments, snapshots in Pebble (flushed to tables),
// chain checkpoints and a trained dictionary.
const (
	segmentSize     = 32 << 10
	snapshotEvery   = 3
	checkpointEvery = 4
	dictSamples     = 48
	dictSize        = 4 << 10
)

// options are the engine options of every Open of a suite's store: the
// builder's, the crash child's and the oracle's, as one agent would use.
func options(keySeed []byte, nonceSeed uint64, logger *slog.Logger, sealed bool) *engine.Options {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var erasable []string
	if sealed {
		// Some memory keys erasable (the workload's personal data): their
		// values are sealed with keys of their own and carried sealed in
		// deltas, frame files and snapshots, which the suite damages too.
		erasable = []string{"customer", "owner", "user_preference", "n*"}
	}
	return &engine.Options{
		Keyring:         keyring(keySeed, sealed),
		ErasableKeys:    erasable,
		SnapshotEvery:   snapshotEvery,
		SegmentSize:     segmentSize,
		SigningKey:      ed25519.NewKeyFromSeed(keySeed),
		CheckpointEvery: checkpointEvery,
		DictSamples:     dictSamples,
		DictSize:        dictSize,
		Logger:          logger,
		Nonces:          &nonces{rand.New(rand.NewPCG(nonceSeed, 0x7a6d706572))},
	}
}

// keyring is the keyring of an encrypted suite store (nil if not
// sealed): one key, derived from keySeed.
func keyring(keySeed []byte, sealed bool) seal.Keyring {
	if !sealed {
		return nil
	}
	k := blake3.Sum256(append([]byte("tamper keyring "), keySeed...))
	ring, err := seal.NewKeyring(map[string][]byte{"tamper": k[:]}, "tamper")
	if err != nil {
		panic(err) // a 32-byte key and its id: cannot fail
	}
	return ring
}

// keyringFile is keyring's keyring file (continuumctl --keyring).
func keyringFile(keySeed []byte) []byte {
	k := blake3.Sum256(append([]byte("tamper keyring "), keySeed...))
	return seal.AppendKeyringFile(nil, map[string][]byte{"tamper": k[:]}, "tamper")
}

// nonces is a deterministic source of run nonces.
type nonces struct{ r *rand.Rand }

func (n *nonces) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(n.r.Uint32())
	}
	return len(p), nil
}

// builder drives the store as an agent would and records its actions.
type builder struct {
	dir, work string
	seed      int64
	keySeed   []byte
	opens     uint64
	db        *engine.DB
	st        *Store
	// crashed holds, per run, the action a crash child left in doubt and
	// the key exec was called with; settle removes it.
	crashed map[string]crashed
}

type crashed struct {
	seq uint64
	act ledger.Action
	key string
}

// Build makes a store in root/store through the public API, keeping a copy
// at each earlier Close in root/older-N. It runs crash children (this
// binary, see IsChild), so a process that calls it must let them in.
func Build(ctx context.Context, root string, seed int64) (*Store, error) {
	return buildStore(ctx, root, seed, false)
}

// BuildSealed is Build of an encrypted store (Options.Keyring).
func BuildSealed(ctx context.Context, root string, seed int64) (*Store, error) {
	return buildStore(ctx, root, seed, true)
}

func buildStore(ctx context.Context, root string, seed int64, sealed bool) (*Store, error) {
	r := rand.New(rand.NewPCG(uint64(seed), 1))
	keySeed := make([]byte, ed25519.SeedSize)
	for i := range keySeed {
		keySeed[i] = byte(r.Uint32())
	}
	b := &builder{dir: filepath.Join(root, "store"), work: root, seed: seed, keySeed: keySeed, crashed: map[string]crashed{}}
	b.st = &Store{Dir: b.dir, KeySeed: keySeed, PublicKey: ed25519.NewKeyFromSeed(keySeed).Public().(ed25519.PublicKey), Sealed: sealed}
	if err := b.build(ctx); err != nil {
		if b.db != nil {
			b.db.Close()
		}
		return nil, err
	}
	return b.st, nil
}

func (b *builder) build(ctx context.Context) error {
	// Generation 1: two runs, certified actions with explicit and default
	// keys.
	if err := b.open(); err != nil {
		return err
	}
	for range 10 {
		for _, id := range []string{"alpha", "beta"} {
			if err := b.atom(ctx, id); err != nil {
				return err
			}
		}
	}
	if err := b.close(); err != nil {
		return err
	}

	// A crash inside exec: run delta's fourth action (default key) is in
	// doubt.
	if err := b.crash(ctx, "delta", 3, false); err != nil {
		return err
	}

	// Generation 2: delta settles its in-doubt action with the downstream's
	// result, by Resolve with the same action (contract v1); beta fails an atom (its certified action stays certified) and
	// retries the seq with another action; gamma starts.
	if err := b.open(); err != nil {
		return err
	}
	if err := b.settle(ctx, "delta", false); err != nil {
		return err
	}
	for range 4 {
		if err := b.atom(ctx, "delta"); err != nil {
			return err
		}
	}
	if err := b.failedAtom(ctx, "beta"); err != nil {
		return err
	}
	for range 5 {
		for _, id := range []string{"alpha", "gamma"} {
			if err := b.atom(ctx, id); err != nil {
				return err
			}
		}
	}
	if err := b.close(); err != nil {
		return err
	}

	// Two more crashes: gamma's next action, which the downstream reports
	// not done, and epsilon's third, which stays in doubt.
	if err := b.crash(ctx, "gamma", 0, false); err != nil {
		return err
	}
	if err := b.crash(ctx, "epsilon", 2, false); err != nil {
		return err
	}

	// Generation 3: gamma resolves its action as failed and makes it again
	// with the same key; alpha and beta go on.
	if err := b.open(); err != nil {
		return err
	}
	if err := b.settle(ctx, "gamma", true); err != nil {
		return err
	}
	for range 4 {
		for _, id := range []string{"alpha", "beta", "gamma"} {
			if err := b.atom(ctx, id); err != nil {
				return err
			}
		}
	}
	if err := b.closeLast(); err != nil {
		return err
	}
	for _, id := range []string{"alpha", "beta", "delta", "epsilon", "gamma"} {
		b.st.Runs = append(b.st.Runs, id)
		if c, ok := b.crashed[id]; ok {
			b.st.Actions = append(b.st.Actions, Action{Run: id, Seq: c.seq, Tool: c.act.Tool, Args: c.act.Args,
				Key: c.key, Idempotent: c.act.Idempotent, Outcome: outcomeInDoubt})
		}
	}
	return nil
}

func (b *builder) open() error {
	b.opens++
	db, err := engine.Open(b.dir, options(b.keySeed, uint64(b.seed)+b.opens, nil, b.st.Sealed))
	if err != nil {
		return fmt.Errorf("tamper: build: open %s: %w", b.dir, err)
	}
	b.db = db
	return nil
}

// close closes the store and keeps a copy of it as the newest older one.
func (b *builder) close() error {
	if err := b.closeLast(); err != nil {
		return err
	}
	older := filepath.Join(b.work, fmt.Sprintf("older-%d", b.opens))
	if err := copyTree(b.dir, older); err != nil {
		return err
	}
	b.st.Older = append([]string{older}, b.st.Older...)
	return nil
}

func (b *builder) closeLast() error {
	err := b.db.Close()
	b.db = nil
	if err != nil {
		return fmt.Errorf("tamper: build: close %s: %w", b.dir, err)
	}
	return nil
}

// script is what the scripted agent does at seq of run.
func (b *builder) script(run string, seq uint64) workload.Atom {
	return workload.Script(run, seq, b.seed)
}

// action is the ledger action of a scripted atom: an explicit key at even
// seqs, the engine's default key at odd ones.
func action(a workload.Atom) ledger.Action {
	act := ledger.Action{Tool: a.Tool, Args: a.Args, Idempotent: a.Idempotent}
	if a.Seq%2 == 0 {
		act.Key = a.Key
	}
	return act
}

// delta is the change a scripted atom makes to the frame.
func delta(a workload.Atom, result []byte) *frame.Delta {
	d := new(frame.Delta)
	if a.Objective != "" {
		d.SetObjective(a.Objective)
	}
	if a.Subgoal != "" {
		d.AddSubgoal(fmt.Sprintf("sg-%d", a.Seq), a.Subgoal)
	}
	if a.Seq > workload.SubgoalEvery && a.Seq%workload.SubgoalEvery == 3 {
		d.SetSubgoalStatus(fmt.Sprintf("sg-%d", a.Seq-3-workload.SubgoalEvery+1), frame.SubgoalDone)
	}
	call := fmt.Sprintf("call-%d", a.Seq)
	d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: a.Thought, Tool: a.Tool, CallID: call})
	d.AppendMessage(frame.Message{Role: frame.RoleTool, Content: string(result), Tool: a.Tool, CallID: call})
	d.Set(a.MemKey, a.MemVal)
	if a.Seq%5 == 0 {
		d.AppendScratch([]byte(fmt.Sprintf("checked %s at seq %d; ", a.Tool, a.Seq)))
	}
	if a.Seq%7 == 0 {
		d.Delete(a.MemKey)
	}
	return d
}

// do runs one scripted action in atom and records it as certified.
func (b *builder) do(ctx context.Context, atom *engine.Atom, run string, a workload.Atom, act ledger.Action) ([]byte, error) {
	key := act.Key
	out, err := atom.Do(ctx, act, func(_ context.Context, k string) ([]byte, error) {
		key = k
		return workload.Downstream(a.Tool, a.Args, k), nil
	})
	if err != nil {
		return nil, fmt.Errorf("tamper: build: run %s seq %d: do %s: %w", run, atom.Seq(), act.Tool, err)
	}
	b.st.Actions = append(b.st.Actions, Action{Run: run, Seq: atom.Seq(), Tool: act.Tool, Args: act.Args,
		Key: key, Idempotent: act.Idempotent, Outcome: outcomeResult, Result: out})
	return out, nil
}

// atom commits the next scripted atom of run.
func (b *builder) atom(ctx context.Context, run string) error {
	r, err := b.db.Run(ctx, run)
	if err != nil {
		return fmt.Errorf("tamper: build: run %s: %w", run, err)
	}
	atom, err := r.Begin(ctx)
	if err != nil {
		return fmt.Errorf("tamper: build: run %s: begin: %w", run, err)
	}
	a := b.script(run, atom.Seq())
	out, err := b.do(ctx, atom, run, a, action(a))
	if err != nil {
		return err
	}
	if err := atom.Commit(ctx, delta(a, out)); err != nil {
		return fmt.Errorf("tamper: build: run %s seq %d: commit: %w", run, atom.Seq(), err)
	}
	return nil
}

// failedAtom makes run's next seq fail once after a certified action, then
// retries the seq: the same action must come back from the ledger without
// exec, and the atom goes on with a second action before it commits.
func (b *builder) failedAtom(ctx context.Context, run string) error {
	r, err := b.db.Run(ctx, run)
	if err != nil {
		return err
	}
	atom, err := r.Begin(ctx)
	if err != nil {
		return err
	}
	seq := atom.Seq()
	a := b.script(run, seq)
	act := action(a)
	act.Key = a.Key + "-first" // explicit: the retry must find it by key
	first, err := b.do(ctx, atom, run, a, act)
	if err != nil {
		return err
	}
	if err := atom.Fail(ctx, "the deploy window closed; retrying the step"); err != nil {
		return fmt.Errorf("tamper: build: run %s seq %d: fail: %w", run, seq, err)
	}
	atom, err = r.Begin(ctx)
	if err != nil {
		return err
	}
	if atom.Seq() != seq {
		return fmt.Errorf("tamper: build: run %s: a failed seq %d is retried at seq %d", run, seq, atom.Seq())
	}
	again, err := atom.Do(ctx, act, func(context.Context, string) ([]byte, error) {
		return nil, errors.New("exec called for a certified action")
	})
	if err != nil || string(again) != string(first) {
		return fmt.Errorf("tamper: build: run %s seq %d: Do of a certified action after Fail: %q, %v", run, seq, again, err)
	}
	second := b.script(run, seq+1000)
	out, err := b.do(ctx, atom, run, second, ledger.Action{Tool: second.Tool, Args: second.Args})
	if err != nil {
		return err
	}
	if err := atom.Commit(ctx, delta(a, append(first, out...))); err != nil {
		return fmt.Errorf("tamper: build: run %s seq %d: commit: %w", run, seq, err)
	}
	return nil
}

// crash commits atoms of run up to seq `upTo` (if it has fewer), then, in a
// child process, begins the next atom and dies inside exec of its action:
// its intent is durable, its certificate never written.
func (b *builder) crash(ctx context.Context, run string, upTo uint64, explicitKey bool) error {
	if err := b.open(); err != nil {
		return err
	}
	r, err := b.db.Run(ctx, run)
	if err != nil {
		return err
	}
	for r.LastSeq() < upTo {
		if err := b.atom(ctx, run); err != nil {
			return err
		}
	}
	seq := r.LastSeq() + 1
	if err := b.closeLast(); err != nil {
		return err
	}
	b.opens++
	a := b.script(run, seq)
	act := action(a)
	act.Idempotent = false // else a Do after the crash would simply call exec again
	if explicitKey {
		act.Key = a.Key
	} else {
		act.Key = ""
	}
	keyFile := filepath.Join(b.work, "crash.key")
	spec := crashSpec{Dir: b.dir, KeySeed: b.keySeed, Sealed: b.st.Sealed, NonceSeed: uint64(b.seed) + b.opens, Run: run,
		Tool: act.Tool, Args: act.Args, Key: act.Key, Idempotent: act.Idempotent, KeyOut: keyFile}
	cr, err := runChild(ctx, modeCrash, filepath.Join(b.work, "crash.json"), &spec, 2*time.Minute)
	if err != nil {
		return err
	}
	if cr.ExitCode != crashExit {
		return fmt.Errorf("tamper: build: crash child of run %s seq %d: exit status %d, want %d:\n%s",
			run, seq, cr.ExitCode, crashExit, cr.Stderr)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return fmt.Errorf("tamper: build: crash child of run %s seq %d: %w", run, seq, err)
	}
	b.crashed[run] = crashed{seq: seq, act: act, key: string(key)}
	return nil
}

// settle begins the interrupted atom of run, whose action Do reports in
// doubt, and settles it: with the downstream's result, by Resolve of the
// same action, or (failed) by ResolveInDoubtFailed as not done, after
// which the action is made again with the key of the InDoubtError.
func (b *builder) settle(ctx context.Context, run string, failed bool) error {
	r, err := b.db.Run(ctx, run)
	if err != nil {
		return err
	}
	atom, err := r.Begin(ctx)
	if err != nil {
		return err
	}
	if !atom.Resumed() {
		return fmt.Errorf("tamper: build: run %s seq %d: not resumed after the crash", run, atom.Seq())
	}
	c, ok := b.crashed[run]
	if !ok || c.seq != atom.Seq() {
		return fmt.Errorf("tamper: build: run %s seq %d: no crash to settle", run, atom.Seq())
	}
	delete(b.crashed, run)
	a, act := b.script(run, atom.Seq()), c.act
	_, err = atom.Do(ctx, act, func(context.Context, string) ([]byte, error) {
		return nil, errors.New("exec called for an in-doubt action")
	})
	var doubt *ledger.InDoubtError
	if !errors.As(err, &doubt) {
		return fmt.Errorf("tamper: build: run %s seq %d: Do after the crash: %v, want in doubt", run, atom.Seq(), err)
	}
	var out []byte
	if failed {
		if err := atom.ResolveInDoubtFailed(ctx, doubt, "the downstream has no trace of it"); err != nil {
			return err
		}
		act.Key = doubt.Key
		if out, err = b.do(ctx, atom, run, a, act); err != nil {
			return err
		}
	} else {
		out = workload.Downstream(a.Tool, a.Args, doubt.Key)
		if err := atom.Resolve(ctx, act, out); err != nil {
			return fmt.Errorf("tamper: build: run %s seq %d: Resolve of the in-doubt action: %w", run, atom.Seq(), err)
		}
		b.st.Actions = append(b.st.Actions, Action{Run: run, Seq: atom.Seq(), Tool: act.Tool, Args: act.Args,
			Key: doubt.Key, Idempotent: act.Idempotent, Outcome: outcomeResult, Result: out})
	}
	if err := atom.Commit(ctx, delta(a, out)); err != nil {
		return err
	}
	return nil
}

// crashSpec is the crash child's task.
type crashSpec struct {
	Dir        string `json:"dir"`
	KeySeed    []byte `json:"key_seed"`
	Sealed     bool   `json:"sealed,omitempty"`
	NonceSeed  uint64 `json:"nonce_seed"`
	Run        string `json:"run"`
	Tool       string `json:"tool"`
	Args       []byte `json:"args"`
	Key        string `json:"key"`
	Idempotent bool   `json:"idempotent"`
	KeyOut     string `json:"key_out"` // where exec writes the key it was called with
}

// crashMain opens the store, begins the run's next atom and exits inside
// exec of the action: the process stops between dispatch and certificate.
func crashMain(s *crashSpec) int {
	ctx := context.Background()
	db, err := engine.Open(s.Dir, options(s.KeySeed, s.NonceSeed, nil, s.Sealed))
	if err != nil {
		fmt.Fprintf(os.Stderr, "tamper crash child: %v\n", err)
		return 1
	}
	r, err := db.Run(ctx, s.Run)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tamper crash child: %v\n", err)
		return 1
	}
	atom, err := r.Begin(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tamper crash child: %v\n", err)
		return 1
	}
	_, err = atom.Do(ctx, ledger.Action{Tool: s.Tool, Args: s.Args, Key: s.Key, Idempotent: s.Idempotent},
		func(_ context.Context, key string) ([]byte, error) {
			if err := os.WriteFile(s.KeyOut, []byte(key), 0o600); err != nil {
				fmt.Fprintf(os.Stderr, "tamper crash child: %v\n", err)
				os.Exit(1)
			}
			os.Exit(crashExit)
			return nil, nil
		})
	fmt.Fprintf(os.Stderr, "tamper crash child: exec was not called: %v\n", err)
	return 1
}
