package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
	"github.com/google/go-cmp/cmp"
)

// memReplica is a Replicator that keeps what it is given in memory, and
// refuses with fail once set.
type memReplica struct {
	mu      sync.Mutex
	appends [][][]byte        // copied, in order
	files   map[string][]byte // by name
	order   []string          // "file NAME" or "append N" (N = len(appends) after it)
	fail    error
}

func (m *memReplica) Replicate(appends [][][]byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	for _, a := range appends {
		c := make([][]byte, len(a))
		for i, r := range a {
			c[i] = bytes.Clone(r)
		}
		m.appends = append(m.appends, c)
	}
	m.order = append(m.order, fmt.Sprintf("append %d", len(m.appends)))
	return nil
}

func (m *memReplica) ReplicateFile(name string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	if old, ok := m.files[name]; ok && !bytes.Equal(old, data) {
		return fmt.Errorf("%s given again with other content", name)
	}
	if m.files == nil {
		m.files = map[string][]byte{}
	}
	m.files[name] = bytes.Clone(data)
	m.order = append(m.order, "file "+name)
	return nil
}

// rebuild writes what m holds into a new store directory on fs: its files,
// then its appends into a new log, batch by batch, as the replicate
// package's restore does from a stream.
func (m *memReplica) rebuild(t *testing.T, fs vfs.FS, dir string) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := fs.MkdirAll(fs.PathJoin(dir, layout.DictsDir), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, b := range m.files {
		if err := layout.WriteFileAtomic(fs, fs.PathJoin(append([]string{dir}, strings.Split(name, "/")...)...), bytes.Clone(b), false); err != nil {
			t.Fatal(err)
		}
	}
	l, err := wal.Open(fs.PathJoin(dir, layout.WALDir), &wal.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range m.appends {
		if _, err := l.AppendBatch(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReplicatorShipsTheStore checks that a replicated store gives its
// Replicator everything a store is (STORE, every dictionary before a
// record uses it, every log record as one append per batch), so that a
// store rebuilt from that alone opens with the same runs, frames, heads
// and certificates.
func TestReplicatorShipsTheStore(t *testing.T) {
	fs := vfs.NewMem()
	rep := &memReplica{}
	opts := testOptions(fs)
	opts.Replicator = rep
	db := openTest(t, fs, opts)
	if _, ok := rep.files[layout.StoreName]; !ok || rep.order[0] != "file "+layout.StoreName {
		t.Fatalf("Open of a new store shipped %v first, want STORE", rep.order)
	}
	calls := 0
	for _, id := range []string{"r1", "r2"} {
		run, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 30 { // past DictSamples: a dictionary is trained
			a, err := run.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			act := ledger.Action{Tool: "charge", Args: fmt.Appendf(nil, `{"run":%q,"i":%d}`, id, i)}
			if _, err := a.Do(ctx, act, func(context.Context, string) ([]byte, error) {
				calls++
				return fmt.Appendf(nil, "receipt %s %d", id, i), nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := a.Commit(ctx, msg(fmt.Sprintf("step %d of %s, a message much like the others", i, id))); err != nil {
				t.Fatal(err)
			}
		}
		// The samples are in after the first run: the second one's
		// records are compressed with the dictionary.
		if !db.dict.Started() {
			t.Fatal("dictionary training did not start")
		}
		db.dict.Wait()
	}
	want := map[string]*runWant{}
	for _, id := range []string{"r1", "r2"} {
		run, _ := db.Run(ctx, id)
		want[id] = &runWant{seq: run.LastSeq(), head: run.Head().String(), state: run.State()}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	dicts := 0
	for name := range rep.files {
		if strings.HasPrefix(name, layout.DictsDir+"/") {
			dicts++
		}
	}
	if dicts == 0 {
		t.Fatalf("no dictionary shipped (files %v)", rep.order)
	}

	fs2 := vfs.NewMem()
	rep.rebuild(t, fs2, "store")
	db2 := openTest(t, fs2, testOptions(fs2))
	for id, w := range want {
		run, err := db2.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if run.LastSeq() != w.seq || run.Head().String() != w.head {
			t.Errorf("%s rebuilt at seq %d head %s, want %d %s", id, run.LastSeq(), run.Head(), w.seq, w.head)
		}
		if diff := cmp.Diff(w.state, run.State()); diff != "" {
			t.Errorf("%s rebuilt frame (-want +got):\n%s", id, diff)
		}
		// The certificates came along: a repeated action is not re-run.
		a, err := run.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		act := ledger.Action{Tool: "charge", Args: fmt.Appendf(nil, `{"run":%q,"i":%d}`, id, 3), Key: ledger.DefaultKey(id, 4, 0)}
		got, err := a.Do(ctx, act, func(context.Context, string) ([]byte, error) {
			calls++
			return nil, errors.New("re-run")
		})
		if err != nil || string(got) != fmt.Sprintf("receipt %s 3", id) {
			t.Errorf("%s: repeated action after rebuild: %q, %v", id, got, err)
		}
		if err := a.Fail(ctx, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 60 {
		t.Errorf("exec called %d times, want 60", calls)
	}
}

type runWant struct {
	seq   uint64
	head  string
	state any
}

// TestReplicatorFenced checks that a Replicator's refusal fails the write
// it was given, matching ErrFenced, that nothing of it is applied, and
// that every write after it fails too.
func TestReplicatorFenced(t *testing.T) {
	fs := vfs.NewMem()
	rep := &memReplica{}
	opts := testOptions(fs)
	opts.Replicator = rep
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := run.Begin(ctx)
	if err := a.Commit(ctx, msg("one")); err != nil {
		t.Fatal(err)
	}
	head := run.Head()
	rep.mu.Lock()
	rep.fail = fmt.Errorf("lease of store taken by node b: %w", ErrFenced)
	rep.mu.Unlock()

	a, err = run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, msg("two")); !errors.Is(err, ErrFenced) {
		t.Fatalf("Commit of a fenced writer: %v, want ErrFenced", err)
	}
	if run.LastSeq() != 1 || run.Head() != head || len(run.State().Messages) != 1 {
		t.Fatalf("a refused commit was applied: seq %d", run.LastSeq())
	}
	// Every later write fails, whatever the Replicator would now say.
	rep.mu.Lock()
	rep.fail = nil
	rep.mu.Unlock()
	a, err = run.Begin(ctx)
	if err == nil {
		ran := false
		_, err = a.Do(ctx, ledger.Action{Tool: "t", Args: []byte(`{}`)}, func(context.Context, string) ([]byte, error) {
			ran = true
			return nil, nil
		})
		if ran {
			t.Error("exec ran after the log failed: its intent cannot have been made durable")
		}
	}
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("write after a fenced one: %v, want ErrFenced", err)
	}
	if len(rep.appends) != 2 { // the run record and atom 1
		t.Fatalf("%d appends acknowledged, want 2", len(rep.appends))
	}
}
