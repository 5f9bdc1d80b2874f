package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
)

// The derived files (CHECKPOINT, frame files, the ledger table, INBOX) and the
// files the log needs (segments, STORE, dictionaries), damaged one way at a
// time on a copy of a store: each damage is either harmless (the engine
// reads exactly what the pristine store gives) or detected by Verify
// (naming the file), and a derived file is always harmless while the log
// is whole.

var derivedRuns = []string{"alpha", "beta", "gamma"}

// derivedAction is the action atom seq of run performs. Its key is
// explicit, so that its fingerprint is known without the engine.
func derivedAction(run string, seq uint64) ledger.Action {
	return ledger.Action{Tool: "tool." + run, Args: []byte(fmt.Sprintf(`{"run":%q,"seq":%d}`, run, seq)),
		Key: fmt.Sprintf("%s-%d", run, seq)}
}

// buildDerivedStore writes phase 1 (n1 atoms per run, a clean close), takes
// a copy of every file, then phase 2 (n2 more atoms per run, a clean
// close). It returns the store and the copy of phase 1.
func buildDerivedStore(t *testing.T, n1, n2 int) (vfs.FS, map[string][]byte) {
	t.Helper()
	fs := vfs.NewMem()
	write := func(n int) {
		o := testOptions(fs)
		o.SegmentSize = 16 << 10 // several segments
		db, err := Open("store", o)
		if err != nil {
			t.Fatal(err)
		}
		for ri, id := range derivedRuns {
			run, err := db.Run(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				a, err := run.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				seq := a.Seq()
				// Messages around the runs, some left in the inboxes (INBOX).
				if seq%2 == 0 {
					if _, _, err := a.TryReceive(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if err := a.Send(ctx, derivedRuns[(ri+1)%len(derivedRuns)], []byte(fmt.Sprint(id, " says ", seq))); err != nil {
					t.Fatal(err)
				}
				if _, err := a.Do(ctx, derivedAction(id, seq), func(_ context.Context, key string) ([]byte, error) {
					return []byte("result of " + key), nil
				}); err != nil {
					t.Fatal(err)
				}
				d := new(frame.Delta).Set(fmt.Sprint("k", seq%7), []byte(fmt.Sprint(id, seq))).
					AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: fmt.Sprint("thought ", seq)})
				if err := a.Commit(ctx, d); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	write(n1)
	old := copyFiles(t, fs, "store")
	write(n2)
	return fs, old
}

// copyFiles returns every regular file under dir (recursively), by path.
func copyFiles(t *testing.T, fs vfs.FS, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	var walk func(string)
	walk = func(d string) {
		names, err := fs.List(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			p := fs.PathJoin(d, n)
			st, err := fs.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if st.IsDir() {
				walk(p)
				continue
			}
			b, err := layout.ReadFile(fs, p)
			if err != nil {
				t.Fatal(err)
			}
			m[p] = b
		}
	}
	walk(dir)
	return m
}

// cloneStore makes a new in-memory filesystem holding files.
func cloneStore(t *testing.T, files map[string][]byte) vfs.FS {
	t.Helper()
	fs := vfs.NewMem()
	for p, b := range files {
		if err := fs.MkdirAll(fs.PathDir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		f, err := fs.Create(p, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		// A copy: MemFS may scribble over what it is given (race builds).
		if _, err := f.Write(bytes.Clone(b)); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return fs
}

// storeAnswers is everything the engine says about a store: per run its
// last seq, head, frame, frame at every seq, and the cached result of
// every action.
type storeAnswers struct {
	runs    map[string]*runAnswers
	rebuilt Stats
}

type runAnswers struct {
	last    uint64
	head    chain.Hash
	state   []byte   // frame.AppendFrame of State
	at      [][]byte // at[i]: StateAt(i+1)
	results []string // results[i]: the certified result of the action of seq i+1
	inbox   string   // the run's inbox
}

// readAnswers opens the store, reads every answer, and closes it. Any
// failure (a refused Open, a read error) is returned.
func readAnswers(fs vfs.FS) (*storeAnswers, error) {
	o := testOptions(fs)
	o.Logger = slog.New(slog.DiscardHandler)
	db, err := Open("store", o)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ans := &storeAnswers{runs: map[string]*runAnswers{}}
	infos, err := db.Runs()
	if err != nil {
		return nil, err
	}
	for _, info := range infos {
		run, err := db.Run(ctx, info.ID)
		if err != nil {
			return nil, err
		}
		ra := &runAnswers{last: run.LastSeq(), head: run.Head()}
		in, err := run.Inbox(ctx)
		if err != nil {
			return nil, err
		}
		ra.inbox = fmt.Sprint(in)
		f, err := run.StateE()
		if err != nil {
			return nil, err
		}
		if g := run.State(); g == nil || !bytes.Equal(frame.AppendFrame(nil, g), frame.AppendFrame(nil, f)) {
			return nil, fmt.Errorf("run %q: State differs from StateE", info.ID)
		}
		ra.state = frame.AppendFrame(nil, f)
		for s := uint64(1); s <= ra.last; s++ {
			f, err := run.StateAt(ctx, s)
			if err != nil {
				return nil, err
			}
			ra.at = append(ra.at, frame.AppendFrame(nil, f))
		}
		if err := db.waitLedger(ctx); err != nil {
			return nil, err
		}
		for s := uint64(1); s <= ra.last; s++ {
			fp, err := derivedAction(info.ID, s).Fingerprint()
			if err != nil {
				return nil, err
			}
			e, ok := db.ledger.Lookup(fp)
			if !ok {
				ra.results = append(ra.results, "<none>")
				continue
			}
			res := string(e.Result)
			if e.Result == nil && e.CertLoc != (ledger.Loc{}) {
				c, err := db.readCertificate(e.CertLoc)
				if err != nil {
					return nil, err
				}
				res = string(c.Result)
			}
			ra.results = append(ra.results, fmt.Sprintf("%v:%s", e.Status, res))
		}
		// The run is not bricked: an atom begins, and Do of a past action
		// returns its certified result without calling exec.
		a, err := run.Begin(ctx)
		if err != nil {
			return nil, err
		}
		if ra.last > 0 {
			res, err := a.Do(ctx, derivedAction(info.ID, 1), func(context.Context, string) ([]byte, error) {
				return []byte("executed again"), nil
			})
			if err != nil {
				return nil, err
			}
			ra.results = append(ra.results, "Do:"+string(res))
		}
		ans.runs[info.ID] = ra
	}
	ans.rebuilt = db.Stats()
	return ans, nil
}

// diff describes how a differs from b, or "".
func (a *storeAnswers) diff(b *storeAnswers) string {
	ids := func(m map[string]*runAnswers) []string {
		var s []string
		for id := range m {
			s = append(s, id)
		}
		sort.Strings(s)
		return s
	}
	if fmt.Sprint(ids(a.runs)) != fmt.Sprint(ids(b.runs)) {
		return fmt.Sprintf("runs %v, want %v", ids(a.runs), ids(b.runs))
	}
	for id, x := range a.runs {
		y := b.runs[id]
		switch {
		case x.last != y.last:
			return fmt.Sprintf("run %q: last seq %d, want %d", id, x.last, y.last)
		case x.head != y.head:
			return fmt.Sprintf("run %q: head differs", id)
		case !bytes.Equal(x.state, y.state):
			return fmt.Sprintf("run %q: State differs", id)
		case x.inbox != y.inbox:
			return fmt.Sprintf("run %q: inbox %s, want %s", id, x.inbox, y.inbox)
		}
		for i := range x.at {
			if !bytes.Equal(x.at[i], y.at[i]) {
				return fmt.Sprintf("run %q: StateAt(%d) differs", id, i+1)
			}
		}
		for i := range x.results {
			if x.results[i] != y.results[i] {
				return fmt.Sprintf("run %q: cached result of seq %d is %q, want %q", id, i+1, x.results[i], y.results[i])
			}
		}
	}
	return ""
}

// damage is one way of damaging one file of a store.
type damage struct {
	name  string
	apply func(files map[string][]byte) // edits a copy of the store's files
}

// damagesOf lists, for the file at path: byte flips at seeded offsets,
// truncations at several lengths, its deletion, and (if old holds one) an
// older copy swapped in.
func damagesOf(rng *rand.Rand, path string, b []byte, old []byte) []damage {
	var ds []damage
	size := len(b)
	used := size // a segment is zero-filled past its data: damage the data
	for used > 1 && b[used-1] == 0 {
		used--
	}
	offsets := []int{0, used / 2, size - 1}
	for i := 0; i < 8; i++ {
		offsets = append(offsets, rng.Intn(used))
	}
	for _, off := range offsets {
		bit := byte(1) << rng.Intn(8)
		ds = append(ds, damage{fmt.Sprintf("flip byte %d bit %#x", off, bit), func(m map[string][]byte) {
			b := bytes.Clone(m[path])
			b[off] ^= bit
			m[path] = b
		}})
	}
	for _, n := range []int{0, used / 3, used - 1} {
		ds = append(ds, damage{fmt.Sprintf("truncate to %d", n), func(m map[string][]byte) { m[path] = m[path][:n] }})
	}
	ds = append(ds, damage{"delete", func(m map[string][]byte) { delete(m, path) }})
	if old != nil {
		ds = append(ds, damage{"older copy", func(m map[string][]byte) { m[path] = old }})
	}
	return ds
}

// fileKind names the kind of a store file.
func fileKind(path string) string {
	base := path[strings.LastIndex(path, "/")+1:]
	switch {
	case base == layout.CheckpointName:
		return "CHECKPOINT"
	case base == layout.StoreName:
		return "STORE"
	case base == layout.InboxName:
		return "INBOX"
	case strings.HasSuffix(base, ".frame"):
		return "frame"
	case strings.HasPrefix(base, "ledger-"):
		return "ledger table"
	case strings.HasSuffix(base, layout.DictSuffix):
		return "dictionary"
	case strings.HasSuffix(base, ".wal"):
		return "segment"
	}
	return ""
}

// TestDerivedFilesDetectedOrHarmless is requirement 1 for every kind of
// file outside the snapshot store: each damage is harmless or detected by
// a deep Verify naming the file, the engine never serves an answer that
// differs from the pristine store's, and damage to a derived file is
// always harmless (rebuilt from the log).
func TestDerivedFilesDetectedOrHarmless(t *testing.T) {
	seed := int64(20261201)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	pristineFS, old := buildDerivedStore(t, 12, 8)
	files := copyFiles(t, pristineFS, "store")
	want, err := readAnswers(cloneStore(t, files))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for p := range files {
		if fileKind(p) != "" {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	counts := map[string][3]int{} // kind: harmless, detected, scenarios
	for _, p := range paths {
		kind := fileKind(p)
		derived := kind == "CHECKPOINT" || kind == "frame" || kind == "ledger table" || kind == "INBOX"
		var prev []byte
		if o, ok := old[p]; ok && !bytes.Equal(o, files[p]) {
			prev = o
		}
		for _, d := range damagesOf(rng, p, files[p], prev) {
			m := map[string][]byte{}
			for k, v := range files {
				m[k] = v
			}
			d.apply(m)
			got, err := readAnswers(cloneStore(t, m))
			harmless := err == nil && got.diff(want) == ""
			c := counts[kind]
			c[2]++
			if harmless {
				c[0]++
				counts[kind] = c
				continue
			}
			if derived {
				if err != nil {
					t.Errorf("%s: %s: the engine failed on a damaged derived file: %v", p, d.name, err)
				} else {
					t.Errorf("%s: %s: the engine read it differently: %s", p, d.name, got.diff(want))
				}
				continue
			}
			if err == nil {
				t.Errorf("%s: %s: the engine served different answers: %s", p, d.name, got.diff(want))
			}
			rep, verr := Verify(ctx, "store", &VerifyOptions{FS: cloneStore(t, m), Deep: true})
			if verr == nil && rep.OK {
				t.Errorf("%s: %s: not harmless (%v) and Verify passes it", p, d.name, err)
				continue
			}
			named := verr != nil && strings.Contains(verr.Error(), p[strings.LastIndex(p, "/")+1:]) ||
				verr != nil && errors.Is(verr, ErrNotAStore)
			if verr == nil {
				named = strings.Contains(fmt.Sprint(rep.Failures), p[strings.LastIndex(p, "/")+1:]) ||
					strings.Contains(fmt.Sprint(rep.Failures), "wal")
			}
			if !named {
				t.Errorf("%s: %s: Verify does not name the file: %v %v", p, d.name, verr, rep)
			}
			c[1]++
			counts[kind] = c
		}
	}
	for kind, c := range counts {
		t.Logf("%-13s %3d scenarios: %3d harmless, %3d detected", kind, c[2], c[0], c[1])
	}
}
