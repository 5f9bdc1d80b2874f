package engine

// The disk-full suite (issue: faults never lose, crash or hang). Two
// filesystems:
//
//   - an errorfs over MemFS that returns ENOSPC (or EIO) from a chosen write
//     onward, until "space is freed";
//   - a real small filesystem (a size-limited tmpfs; root only, skipped with
//     a message where mounting is not permitted).
//
// Each trial runs an agent until the disk is full, then checks: no panic,
// no hang (every operation has a deadline), a clear error naming the real
// file, Begin naming the log's error, a bounded Close, no temporary file
// left once the store is reopened, and, after space is freed, a reopen
// that finds every acknowledged atom and goes on.
//
// Pebble's files (snapshots/) get the faults too: the snapshot store
// fences itself off after its first failed write or sync (package
// snapshot), so a full disk under Pebble is one more failure the engine
// survives. -diskfull.snapshots=false leaves them out.
//
// Reproduce a trial with the seed it prints:
//
//	go test ./engine -run TestDiskFullErrorFS -diskfull.seed 123 -v

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
)

var (
	diskFullSnapshots = flag.Bool("diskfull.snapshots", true, "inject disk-full faults into the snapshot store's (Pebble's) files too")
	diskFullSeed      = flag.Uint64("diskfull.seed", 0, "seed of the disk-full trials (0: from the clock)")
	diskFullTrials    = flag.Int("diskfull.trials", 0, "disk-full trials per errno (0: 40 with -long, 10 without)")
)

// opDeadline bounds every engine call of the suite: a call that takes
// longer is a hang.
const opDeadline = 2 * time.Minute

// within runs fn and fails the test if it does not return within
// opDeadline.
func within[T any](t *testing.T, what string, fn func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(opDeadline):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("hang: %s did not return within %v; goroutines:\n%s", what, opDeadline, buf)
		panic("unreachable")
	}
}

func within0(t *testing.T, what string, fn func() error) error {
	t.Helper()
	_, err := within(t, what, func() (struct{}, error) { return struct{}{}, fn() })
	return err
}

// fullDisk fails every write (and file creation) from the after-th write
// on, with errno, until freed. Pebble's files are spared with
// -diskfull.snapshots=false.
type fullDisk struct {
	errno  syscall.Errno
	after  int64
	writes atomic.Int64
	freed  atomic.Bool
	hit    atomic.Pointer[string] // the first path failed
}

func (d *fullDisk) String() string { return fmt.Sprintf("%v from write %d", d.errno, d.after) }

func (d *fullDisk) MaybeError(op errorfs.Op) error {
	switch op.Kind {
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpCreate:
	default:
		return nil
	}
	if d.freed.Load() || (!*diskFullSnapshots && strings.Contains(op.Path, "/"+layout.SnapshotsDir)) {
		return nil
	}
	n := d.writes.Load()
	if op.Kind != errorfs.OpCreate {
		n = d.writes.Add(1)
	}
	if n < d.after {
		return nil
	}
	p := op.Path
	d.hit.CompareAndSwap(nil, &p)
	// As the operating system's files report it: the path, then the errno.
	return &os.PathError{Op: "write", Path: op.Path, Err: d.errno}
}

// diskAgent is the suite's workload: runs that commit one Do and one delta
// per atom, each delta a message that compresses poorly, so that the log
// grows fast. acked records the last seq whose Commit returned nil.
type diskAgent struct {
	runs  []string
	acked map[string]uint64
	msg   int // message size
}

func newDiskAgent(runs, msg int) *diskAgent {
	a := &diskAgent{acked: map[string]uint64{}, msg: msg}
	for i := range runs {
		a.runs = append(a.runs, fmt.Sprintf("run-%d", i))
	}
	return a
}

// delta is the delta of run's atom seq: the same in every trial.
func (a *diskAgent) delta(run string, seq uint64) *frame.Delta {
	rng := rand.New(rand.NewPCG(seq, uint64(len(run))+uint64(run[len(run)-1])))
	b := make([]byte, a.msg)
	for i := range b {
		b[i] = 'a' + byte(rng.IntN(26))
	}
	return new(frame.Delta).
		AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: string(b)}).
		Set(fmt.Sprintf("k%d", seq%7), []byte(fmt.Sprint(seq)))
}

// step runs one atom of run; it returns the first error.
func (a *diskAgent) step(t *testing.T, db *DB, run string) error {
	r, err := within(t, "Run", func() (*Run, error) { return db.Run(ctx, run) })
	if err != nil {
		return err
	}
	at, err := within(t, "Begin", func() (*Atom, error) { return r.Begin(ctx) })
	if err != nil {
		return err
	}
	seq := at.Seq()
	_, err = within(t, "Do", func() ([]byte, error) {
		return at.Do(ctx, ledger.Action{Tool: "tool", Args: []byte(fmt.Sprintf(`{"run":%q,"seq":%d}`, run, seq))},
			func(context.Context, string) ([]byte, error) { return []byte("ok"), nil })
	})
	var doubt *ledger.InDoubtError
	if errors.As(err, &doubt) {
		// The disk filled between the intent and the certificate: the
		// downstream (this test) knows the call went through.
		err = within0(t, "ResolveInDoubt", func() error { return at.ResolveInDoubt(ctx, doubt, []byte("ok")) })
	}
	if err == nil {
		err = within0(t, "Commit", func() error { return at.Commit(ctx, a.delta(run, seq)) })
	}
	if err != nil {
		return err
	}
	a.acked[run] = seq
	return nil
}

// check opens nothing: it checks db's runs against what was acknowledged:
// every acknowledged atom is there, and each run's frame is the one its
// deltas build.
func (a *diskAgent) check(t *testing.T, db *DB) {
	t.Helper()
	for _, id := range a.runs {
		if a.acked[id] == 0 {
			continue
		}
		r, err := within(t, "Run", func() (*Run, error) { return db.Run(ctx, id) })
		if err != nil {
			t.Fatalf("run %s after reopen: %v", id, err)
		}
		if r.LastSeq() < a.acked[id] {
			t.Fatalf("run %s: last seq %d after reopen, but seq %d was acknowledged", id, r.LastSeq(), a.acked[id])
		}
		want := newFrame()
		for seq := uint64(1); seq <= r.LastSeq(); seq++ {
			if err := want.Apply(a.delta(id, seq)); err != nil {
				t.Fatal(err)
			}
		}
		got, err := within(t, "StateE", r.StateE)
		if err != nil {
			t.Fatalf("run %s: StateE after reopen: %v", id, err)
		}
		if !bytes.Equal(frame.AppendFrame(nil, got), frame.AppendFrame(nil, want)) {
			t.Fatalf("run %s: frame at seq %d differs from the one its deltas build", id, r.LastSeq())
		}
		a.acked[id] = r.LastSeq()
	}
}

// rePath finds the store's file paths in an error message.
var rePath = regexp.MustCompile(`(?:store|/)[^\s:()"]*`)

// checkDiskError checks an error met on a full disk: it matches the errno,
// names a file of the store, names no path twice, and says what to do.
func checkDiskError(t *testing.T, err error, errno syscall.Errno, store string) {
	t.Helper()
	if !errors.Is(err, errno) {
		t.Errorf("error on a full disk does not match %v: %v", errno, err)
		return
	}
	msg := err.Error()
	if !strings.Contains(msg, store) {
		t.Errorf("error does not name a file of the store: %v", err)
	}
	counts := map[string]int{}
	for _, p := range rePath.FindAllString(msg, -1) {
		if counts[p]++; counts[p] >= 2 && len(p) > 1 {
			t.Errorf("error names %s %d times: %v", p, counts[p], err)
		}
	}
	if !strings.Contains(msg, "open it again") {
		t.Errorf("error does not say what to do: %v", err)
	}
}

// leftovers lists the temporary files in the store, outside Pebble's
// directory (Pebble manages its own).
func leftovers(t *testing.T, fsys vfs.FS, dir string) []string {
	t.Helper()
	var out []string
	var walk func(d string)
	walk = func(d string) {
		names, err := fsys.List(d)
		if err != nil {
			return
		}
		for _, n := range names {
			p := fsys.PathJoin(d, n)
			if n == layout.SnapshotsDir && d == dir {
				continue
			}
			if strings.HasSuffix(n, ".tmp") {
				out = append(out, p)
			}
			if fi, err := fsys.Stat(p); err == nil && fi.IsDir() {
				walk(p)
			}
		}
	}
	walk(dir)
	return out
}

// diskFullTrial runs the agent on a disk that fills at the after-th
// write, then frees the space and checks the store.
func diskFullTrial(t *testing.T, mem *vfs.MemFS, errno syscall.Errno, after int64) {
	disk := &fullDisk{errno: errno, after: after}
	fsys := errorfs.Wrap(mem, disk)
	opts := &Options{
		FS: fsys, SegmentSize: 64 << 10, RestartTail: 24 << 10, SnapshotEvery: 3,
		DictSamples: 16, DictSize: 2 << 10, Logger: quiet(),
	}
	agent := newDiskAgent(3, 3000)
	db, err := within(t, "Open", func() (*DB, error) { return Open("store", opts) })
	var failed error
	if err != nil {
		failed = err
	} else {
		for i := 0; i < 400 && failed == nil; i++ {
			failed = agent.step(t, db, agent.runs[i%len(agent.runs)])
		}
	}
	if failed == nil {
		t.Fatalf("the disk never filled (after %d writes)", after)
	}
	checkDiskError(t, failed, errno, "store")
	if db != nil {
		// The log failed (or a checkpoint did): Begin says why, not that an
		// atom is running; reads of what is committed go on.
		for _, id := range agent.runs {
			r, err := within(t, "Run", func() (*Run, error) { return db.Run(ctx, id) })
			if err != nil {
				continue
			}
			if db.logFailed() != nil {
				_, err := within(t, "Begin", func() (*Atom, error) { return r.Begin(ctx) })
				if err == nil || errors.Is(err, ErrAtomInProgress) {
					t.Errorf("Begin after the log failed: %v, want the log's error", err)
				}
			}
			if s := r.LastSeq(); s > 0 {
				if _, err := within(t, "StateE", r.StateE); err != nil {
					t.Errorf("StateE after the disk filled: %v", err)
				}
				if _, err := within(t, "StateAt", func() (*frame.Frame, error) { return r.StateAt(ctx, 1) }); err != nil {
					t.Errorf("StateAt(1) after the disk filled: %v", err)
				}
			}
		}
		closeErr := within0(t, "Close", db.Close)
		if closeErr != nil && !errors.Is(closeErr, errno) {
			t.Errorf("Close on a full disk: %v, want nil or %v", closeErr, errno)
		}
	}

	// Free the space: the store reopens, finds every acknowledged atom,
	// has no temporary file left, and goes on.
	disk.freed.Store(true)
	db, err = within(t, "Open after freeing space", func() (*DB, error) { return Open("store", opts) })
	if err != nil {
		t.Fatalf("reopen after freeing space: %v", err)
	}
	if left := leftovers(t, mem, "store"); len(left) > 0 {
		t.Errorf("temporary files left after the reopen: %v", left)
	}
	agent.check(t, db)
	for i := range 2 * len(agent.runs) {
		if err := agent.step(t, db, agent.runs[i%len(agent.runs)]); err != nil {
			t.Fatalf("commit after freeing space: %v", err)
		}
	}
	if err := within0(t, "Close", db.Close); err != nil {
		t.Fatalf("Close after freeing space: %v", err)
	}
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: true})
	if err != nil || !rep.OK {
		t.Fatalf("verify after freeing space: %v %v", err, rep.Failures)
	}
}

// TestDiskFullErrorFS fills the disk at a seeded random write of the
// workload (ENOSPC, then EIO for a failing device), every file of the
// engine included.
func TestDiskFullErrorFS(t *testing.T) {
	seed := *diskFullSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	trials := *diskFullTrials
	if trials == 0 {
		trials = 40
		if reduced() {
			trials = 10
		}
	}
	t.Logf("seed %d (-diskfull.seed), %d trials, snapshot store's files included: %v (-diskfull.snapshots)",
		seed, trials, *diskFullSnapshots)
	// How many writes the workload makes before it would stop on its own.
	probe := &fullDisk{errno: syscall.ENOSPC, after: 1 << 62}
	{
		mem := vfs.NewMem()
		opts := &Options{FS: errorfs.Wrap(mem, probe), SegmentSize: 64 << 10, RestartTail: 24 << 10,
			SnapshotEvery: 3, DictSamples: 16, DictSize: 2 << 10, Logger: quiet()}
		db, err := Open("store", opts)
		if err != nil {
			t.Fatal(err)
		}
		agent := newDiskAgent(3, 3000)
		for i := range 150 {
			if err := agent.step(t, db, agent.runs[i%3]); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
	}
	total := probe.writes.Load()
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EIO} {
		for i := range trials {
			after := 1 + rng.Int64N(total)
			t.Run(fmt.Sprintf("%v/write-%d", errno, after), func(t *testing.T) {
				diskFullTrial(t, vfs.NewMem(), errno, after)
			})
			_ = i
		}
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory, or skips.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v; needs root, not permitted in most CI): the real-filesystem disk-full tests are not run", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// snapshotsElsewhere mounts a roomy tmpfs on store/snapshots, so that the
// snapshot store (Pebble) does not share the small filesystem, when
// -diskfull.snapshots=false.
func snapshotsElsewhere(t *testing.T, store string) {
	t.Helper()
	t.Logf("snapshot store on the small filesystem: %v (-diskfull.snapshots)", *diskFullSnapshots)
	if *diskFullSnapshots {
		return
	}
	dir := filepath.Join(store, layout.SnapshotsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256m"); err != nil {
		t.Fatalf("mount a tmpfs for the snapshot store: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

func resizeTmpfs(t *testing.T, dir string, size int64) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("resize the tmpfs to %d bytes: %v", size, err)
	}
}

// fill writes a file that takes all the free space of dir's filesystem
// but keep bytes.
func fill(t *testing.T, dir string, keep int64) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	name := filepath.Join(dir, "filler")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for n := free - keep; n > 0; {
		k := min(n, int64(len(chunk)))
		if _, err := f.Write(chunk[:k]); err != nil {
			break // the filesystem rounds; what fits is enough
		}
		n -= k
	}
	return name
}

// TestDiskFullTmpfs runs the default options (64 MiB segments, snapshots,
// the operating system's filesystem) on a small tmpfs until it is full,
// then grows the filesystem and checks the store.
func TestDiskFullTmpfs(t *testing.T) {
	dir := mountTmpfs(t, 24<<20)
	store := filepath.Join(dir, "store")
	snapshotsElsewhere(t, store)
	opts := &Options{Logger: quiet()}
	agent := newDiskAgent(2, 100<<10) // 100 KB messages
	db, err := within(t, "Open", func() (*DB, error) { return Open(store, opts) })
	if err != nil {
		t.Fatalf("a new store on a 24 MiB filesystem: %v", err)
	}
	var failed error
	for i := 0; i < 1000 && failed == nil; i++ {
		failed = agent.step(t, db, agent.runs[i%2])
	}
	if failed == nil {
		t.Fatal("the filesystem never filled")
	}
	t.Logf("full after %v atoms: %v", agent.acked, failed)
	checkDiskError(t, failed, syscall.ENOSPC, store)
	if err := within0(t, "Close", db.Close); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Close on a full disk: %v", err)
	}
	// A reopen on the full disk: it needs no new space when the newest
	// segment has room; either way it must not hang or panic, and leaves no
	// temporary file behind.
	if db, err := within(t, "Open on a full disk", func() (*DB, error) { return Open(store, opts) }); err == nil {
		agent.check(t, db)
		within0(t, "Close", db.Close)
	} else {
		t.Logf("reopen on the full disk: %v", err)
	}
	if left := leftovers(t, vfs.Default, store); len(left) > 0 {
		t.Errorf("temporary files left on the full disk: %v", left)
	}
	// Room for the final checkpoint: frame files of both runs and, on the
	// same filesystem, the snapshot store's copies of those frames.
	resizeTmpfs(t, dir, 256<<20)
	db, err = within(t, "Open after freeing space", func() (*DB, error) { return Open(store, opts) })
	if err != nil {
		t.Fatalf("reopen after freeing space: %v", err)
	}
	agent.check(t, db)
	for i := range 4 {
		if err := agent.step(t, db, agent.runs[i%2]); err != nil {
			t.Fatalf("commit after freeing space: %v", err)
		}
	}
	if err := within0(t, "Close", db.Close); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(ctx, store, &VerifyOptions{Deep: true})
	if err != nil || !rep.OK {
		t.Fatalf("verify after freeing space: %v %v", err, rep.Failures)
	}
}

// TestOpenNeedsLittleSpace: a new store opens on a filesystem with 4 MiB
// free (it used to need a whole 64 MiB segment), and a closed store
// reopens with MinPrealloc plus 64 KiB free.
func TestOpenNeedsLittleSpace(t *testing.T) {
	dir := mountTmpfs(t, 8<<20)
	store := filepath.Join(dir, "store")
	snapshotsElsewhere(t, store)
	opts := &Options{Logger: quiet()}
	db, err := Open(store, opts)
	if err != nil {
		t.Fatalf("a new store on an 8 MiB filesystem: %v", err)
	}
	agent := newDiskAgent(1, 4<<10)
	for range 20 {
		if err := agent.step(t, db, agent.runs[0]); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	filler := fill(t, dir, 64<<10)
	db, err = Open(store, opts)
	if err != nil {
		t.Fatalf("reopen with 64 KiB free: %v", err)
	}
	agent.check(t, db)
	// The newest segment had room: nothing new was needed. Close writes
	// its checkpoint only if something changed, which nothing did.
	if err := db.Close(); err != nil {
		t.Fatalf("Close with 64 KiB free: %v", err)
	}
	if err := os.Remove(filler); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
}
