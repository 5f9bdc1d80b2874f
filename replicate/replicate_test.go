package replicate

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var ctx = context.Background()

// downstream is a fake external system: it counts the effects of each
// idempotency key, so that a duplicate effect is seen.
type downstream struct {
	mu      sync.Mutex
	effects map[string]int
	report  func(key string) // if set, told of each effect before exec returns
}

func (d *downstream) exec(tool string) ledger.Exec {
	return func(_ context.Context, key string) ([]byte, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.effects == nil {
			d.effects = map[string]int{}
		}
		d.effects[key]++
		if d.report != nil {
			d.report(key)
		}
		return []byte(tool + " done for " + key), nil
	}
}

func (d *downstream) duplicates() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var dup []string
	for k, n := range d.effects {
		if n > 1 {
			dup = append(dup, fmt.Sprintf("%s x%d", k, n))
		}
	}
	return dup
}

// step runs atom seq of a deterministic agent: one action, then a commit
// whose delta depends only on the run and the seq.
func step(run *engine.Run, d *downstream) (uint64, error) {
	a, err := run.Begin(ctx)
	if err != nil {
		return 0, err
	}
	seq := a.Seq()
	act := ledger.Action{Tool: "charge", Args: fmt.Appendf(nil, `{"run":%q,"seq":%d}`, run.ID(), seq)}
	out, err := a.Do(ctx, act, d.exec("charge"))
	if errors.Is(err, ledger.ErrInDoubt) {
		// The previous writer stopped between the intent and the
		// certificate. The fake downstream says whether the effect
		// happened; if not, the agent has it done now, with the same key,
		// and records the result either way.
		var e *ledger.InDoubtError
		errors.As(err, &e)
		d.mu.Lock()
		done := d.effects[e.Key] > 0
		d.mu.Unlock()
		out = []byte("charge done for " + e.Key)
		if !done {
			if out, err = d.exec("charge")(ctx, e.Key); err != nil {
				return 0, err
			}
		}
		if err := a.ResolveInDoubt(ctx, e, out); err != nil {
			return 0, err
		}
	} else if err != nil {
		return 0, err
	}
	delta := new(frame.Delta).
		AppendMessage(frame.Message{Role: frame.RoleTool, Content: string(out)}).
		Set(fmt.Sprintf("step-%d", seq), fmt.Appendf(nil, "%s at %d", run.ID(), seq))
	if err := a.Commit(ctx, delta); err != nil {
		return 0, err
	}
	return seq, nil
}

// engineOptions are the options of every store of a test: nonces from a
// seeded source, so that stores given the same runs have the same heads.
func engineOptions(r engine.Replicator) *engine.Options {
	return &engine.Options{Replicator: r, Nonces: rand.New(rand.NewSource(1)), SnapshotEvery: 20, DictSamples: 64}
}

// acked is what a writer had acknowledged: per run, the last seq whose
// Commit returned nil and its head.
type acked struct {
	mu    sync.Mutex
	seq   map[string]uint64
	heads map[string]map[uint64]string
}

func (k *acked) add(run *engine.Run, seq uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.seq == nil {
		k.seq, k.heads = map[string]uint64{}, map[string]map[uint64]string{}
	}
	k.seq[run.ID()] = max(k.seq[run.ID()], seq)
	if k.heads[run.ID()] == nil {
		k.heads[run.ID()] = map[uint64]string{}
	}
	k.heads[run.ID()][seq] = run.Head().String()
}

// checkAcked fails t unless db holds every acknowledged atom with its head.
func (k *acked) check(t *testing.T, db *engine.DB) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	for id, seq := range k.seq {
		run, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if run.LastSeq() < seq {
			t.Errorf("run %s: %d atoms acknowledged, the new writer has %d: acknowledged atoms lost", id, seq, run.LastSeq())
			continue
		}
		for s, h := range k.heads[id] {
			if s == run.LastSeq() && run.Head().String() != h {
				t.Errorf("run %s seq %d: acknowledged head %s, now %s", id, s, h, run.Head())
			}
		}
		st, err := run.StateAt(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := st.Memory[fmt.Sprintf("step-%d", seq)]; !ok {
			t.Errorf("run %s: acknowledged atom %d missing from the frame", id, seq)
		}
	}
}

// reference runs the same agent on a local store that never failed, n
// atoms per run, and returns its frames and heads.
func reference(t *testing.T, runs []string, n map[string]uint64) map[string]*engine.Run {
	t.Helper()
	db, err := engine.Open(filepath.Join(t.TempDir(), "ref"), engineOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var d downstream
	out := map[string]*engine.Run{}
	for _, id := range runs {
		run, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for run.LastSeq() < n[id] {
			if _, err := step(run, &d); err != nil {
				t.Fatal(err)
			}
		}
		out[id] = run
	}
	return out
}

// converged fails t unless every run of db has the reference's frame and
// head at its last seq.
func converged(t *testing.T, db *engine.DB, ref map[string]*engine.Run) {
	t.Helper()
	for id, want := range ref {
		run, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if run.LastSeq() != want.LastSeq() || run.Head() != want.Head() {
			t.Errorf("run %s: seq %d head %s, the run that never failed: %d %s", id, run.LastSeq(), run.Head(), want.LastSeq(), want.Head())
		}
		if diff := cmp.Diff(want.State(), run.State()); diff != "" {
			t.Errorf("run %s: frame differs from the run that never failed (-want +got):\n%s", id, diff)
		}
	}
}

// TestRefusesUnsafeStream checks that Open refuses a stream that could lose
// acknowledged appends, saying why: servers without sync_interval: always,
// too few replicas, durability unchecked.
func TestRefusesUnsafeStream(t *testing.T) {
	loose := newCluster(t, false)
	cfg := loose.config("loose", "a", 0)
	_, err := Open(ctx, filepath.Join(t.TempDir(), "s"), cfg)
	if !errors.Is(err, ErrUnsafeStream) || !strings.Contains(err.Error(), "not always") {
		t.Fatalf("Open on servers without sync always: %v, want ErrUnsafeStream naming the servers", err)
	}
	t.Log(err)

	c := newCluster(t, true)
	cfg = c.config("r1", "a", 0)
	js, _ := jetstream.New(cfg.Conn)
	sc := cfg.streamConfig()
	sc.Replicas = 1
	if _, err := js.CreateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, filepath.Join(t.TempDir(), "s"), cfg)
	if !errors.Is(err, ErrUnsafeStream) || !strings.Contains(err.Error(), "1 replicas") {
		t.Fatalf("Open of an R1 stream: %v, want ErrUnsafeStream naming its replicas", err)
	}
	t.Log(err)

	sc = cfg.streamConfig()
	sc.Name, sc.Subjects, sc.DenyPurge, sc.MaxAge = streamName("purge"), []string{subject("purge", ">")}, false, time.Hour
	sc.Replicas = 3
	if _, err := js.CreateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	cfg.Store = "purge"
	_, err = Open(ctx, filepath.Join(t.TempDir(), "s"), cfg)
	if !errors.Is(err, ErrUnsafeStream) || !strings.Contains(err.Error(), "purges allowed") || !strings.Contains(err.Error(), "max msgs, bytes, age") {
		t.Fatalf("Open of a purgeable stream with a max age: %v, want ErrUnsafeStream naming both", err)
	}

	cfg = c.config("unchecked", "a", 0)
	cfg.SystemConn = nil
	if _, err = Open(ctx, filepath.Join(t.TempDir(), "s"), cfg); !errors.Is(err, ErrUnsafeStream) {
		t.Fatalf("Open without a way to check the servers' sync: %v, want ErrUnsafeStream", err)
	}
	cfg.Replicas = 1
	if _, err = Open(ctx, filepath.Join(t.TempDir(), "s"), cfg); !errors.Is(err, ErrUnsafeStream) {
		t.Fatalf("Open with Config.Replicas 1: %v, want ErrUnsafeStream", err)
	}
}

// open opens a replicated store for node in a new directory.
// closeAndVerify closes db and its replicator r, then verifies dir's store
// deeply: what is the check of a store a test ends with.
func closeAndVerify(t *testing.T, db *engine.DB, r *Replicator, dir, what string) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := engine.Verify(context.Background(), dir, &engine.VerifyOptions{Deep: true})
	if err != nil || !rep.OK {
		t.Fatalf("%s: %v %+v", what, err, rep)
	}
}

func open(t *testing.T, c *cluster, store, node string, i int, takeover bool) (*Replicator, *engine.DB, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), node)
	r, db := openAt(t, c, store, node, i, takeover, dir)
	return r, db, dir
}

// openAt opens a replicated store for node in dir.
func openAt(t *testing.T, c *cluster, store, node string, i int, takeover bool, dir string) (*Replicator, *engine.DB) {
	t.Helper()
	cfg := c.config(store, node, i)
	cfg.Takeover = takeover
	r, err := Open(ctx, dir, cfg)
	if err != nil {
		t.Fatalf("replicate.Open for %s: %v", node, err)
	}
	db, err := engine.Open(dir, engineOptions(r))
	if err != nil {
		t.Fatalf("engine.Open for %s: %v", node, err)
	}
	return r, db
}

// TestFailover: a writer runs an agent, dies without a word (its lease
// left to expire), and a second node takes the store after the lease
// expires: it resumes with the same frame, head and certificates, the
// dead writer's next commit fails with ErrFenced, and the store converges
// with a run that never failed. Then an explicit takeover, and a clean
// handover (Close releases the lease).
func TestFailover(t *testing.T) {
	c := newCluster(t, true)
	runs := []string{"alpha", "beta"}
	var d downstream
	var k acked

	ra, dba, _ := open(t, c, "fo", "a", 0, false)
	for _, id := range runs {
		run, err := dba.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for range 40 {
			seq, err := step(run, &d)
			if err != nil {
				t.Fatal(err)
			}
			k.add(run, seq)
		}
	}
	// Node a stops renewing (its process hangs, or its machine is gone).
	ra.Abandon()
	t0 := time.Now()
	rb, dbb, _ := open(t, c, "fo", "b", 1, false)
	t.Logf("failover after lease expiry: %v (lease %v, restore %v, %+v)", time.Since(t0), rb.Restored().Lease, rb.Restored().Read, rb.Restored())
	if rb.Epoch() != ra.Epoch()+1 {
		t.Errorf("new writer's epoch %d, the old one's %d", rb.Epoch(), ra.Epoch())
	}
	k.check(t, dbb)

	// The stale writer comes back: its commit is refused, never applied.
	run, _ := dba.Run(ctx, "alpha")
	if _, err := step(run, &d); !errors.Is(err, ErrFenced) {
		t.Fatalf("stale writer's step: %v, want ErrFenced", err)
	}
	dba.Close()

	// The new writer resumes: certificates came along (no duplicate effect).
	for _, id := range runs {
		run, err := dbb.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			seq, err := step(run, &d)
			if err != nil {
				t.Fatal(err)
			}
			k.add(run, seq)
		}
	}
	// An explicit takeover by c, while b still holds the lease.
	rc, dbc, _ := open(t, c, "fo", "c", 2, true)
	k.check(t, dbc)
	run, _ = dbb.Run(ctx, "beta")
	if _, err := step(run, &d); !errors.Is(err, ErrFenced) {
		t.Fatalf("step of the writer taken over: %v, want ErrFenced", err)
	}
	if err := dbb.Close(); err == nil {
		t.Error("Close of a fenced writer's DB succeeded: its final records cannot have been acknowledged")
	}
	rb.Close()

	// A clean handover: c closes, d takes over at once.
	for _, id := range runs {
		run, _ := dbc.Run(ctx, id)
		seq, err := step(run, &d)
		if err != nil {
			t.Fatal(err)
		}
		k.add(run, seq)
	}
	if err := dbc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	rd, dbd, dird := open(t, c, "fo", "d", 0, false)
	t.Logf("handover after a release: %v", time.Since(t1))
	k.check(t, dbd)
	if dup := d.duplicates(); len(dup) > 0 {
		t.Errorf("duplicate effects: %v", dup)
	}
	n := map[string]uint64{}
	for _, id := range runs {
		run, _ := dbd.Run(ctx, id)
		n[id] = run.LastSeq()
	}
	converged(t, dbd, reference(t, runs, n))
	closeAndVerify(t, dbd, rd, dird, "verify of the store rebuilt from the stream")
}

// TestFencedWriterUnderLoad: sixteen runs commit concurrently on node a
// while node b takes the store over. Every atom a had acknowledged is in
// b's store, every write of a that was refused matches ErrFenced, and a
// acknowledges nothing once refused; b resumes every run (in-doubt
// actions settled against the downstream, no effect twice) and the store
// converges with runs that never failed.
func TestFencedWriterUnderLoad(t *testing.T) {
	c := newCluster(t, true)
	const runs = 16
	var ids []string
	for i := range runs {
		ids = append(ids, fmt.Sprintf("run-%02d", i))
	}
	var d downstream
	var k acked
	ra, dba, _ := open(t, c, "load", "a", 0, false)
	defer ra.Abandon()
	var handles []*engine.Run
	for _, id := range ids { // created in order: the nonces, so the heads, are the reference's
		run, err := dba.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, run)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var committed int
	refused := make([]error, runs)
	for i, run := range handles {
		wg.Go(func() {
			for {
				seq, err := step(run, &d)
				if err != nil {
					refused[i] = err
					// Refused once, refused for ever: the log's error is final.
					if _, err2 := step(run, &d); err2 == nil {
						t.Errorf("run %s: a write succeeded after a refusal", run.ID())
					}
					return
				}
				k.add(run, seq)
				mu.Lock()
				committed++
				mu.Unlock()
			}
		})
	}
	for {
		mu.Lock()
		n := committed
		mu.Unlock()
		if n >= 5*runs {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	rb, dbb, dirb := open(t, c, "load", "b", 1, true)
	wg.Wait()
	for i, err := range refused {
		if !errors.Is(err, ErrFenced) {
			t.Errorf("run %s of the stale writer stopped with %v, want ErrFenced", ids[i], err)
		}
	}
	dba.Close()
	k.check(t, dbb)
	t.Logf("%d atoms acknowledged by the stale writer before its fence; restore %+v", committed, rb.Restored())

	// b resumes every run; those a was in the middle of come back interrupted.
	n := map[string]uint64{}
	for _, id := range ids {
		run, err := dbb.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := step(run, &d); err != nil {
				t.Fatalf("run %s after failover: %v", id, err)
			}
		}
		n[id] = run.LastSeq()
	}
	if dup := d.duplicates(); len(dup) > 0 {
		t.Errorf("duplicate effects: %v", dup)
	}
	converged(t, dbb, reference(t, ids, n))
	closeAndVerify(t, dbb, rb, dirb, "verify of the new writer's store")
}

// TestJetStreamNodeKilled: the node leading the stream is killed while
// four runs commit; commits wait for the new leader and go on, nothing
// acknowledged is lost, and a takeover after the node came back restores
// every acknowledged atom and converges.
func TestJetStreamNodeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("a leader election takes seconds")
	}
	c := newCluster(t, true)
	var ids []string
	for i := range 4 {
		ids = append(ids, fmt.Sprintf("run-%d", i))
	}
	var d downstream
	var k acked
	ra, dba, _ := open(t, c, "kill", "a", 0, false)
	var handles []*engine.Run
	for _, id := range ids {
		run, err := dba.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, run)
	}
	js, _ := jetstream.New(c.connect("app", 0))
	var wg sync.WaitGroup
	killed := make(chan struct{})
	for _, run := range handles {
		wg.Go(func() {
			for i := 0; i < 60; i++ {
				if i == 20 {
					<-killed
				}
				seq, err := step(run, &d)
				if err != nil {
					t.Errorf("run %s with a JetStream node down: %v", run.ID(), err)
					return
				}
				k.add(run, seq)
			}
		})
	}
	s, err := js.Stream(ctx, streamName("kill"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader := int(info.Cluster.Leader[1] - '1') // "n1".."n3"
	t0 := time.Now()
	c.stop(leader)
	close(killed)
	wg.Wait()
	t.Logf("40 atoms per run committed with the stream's leader n%d down, in %v", leader+1, time.Since(t0))
	c.start(leader)
	rb, dbb, _ := open(t, c, "kill", "b", 1, true)
	defer rb.Close()
	defer dbb.Close()
	dba.Close()
	ra.Abandon()
	k.check(t, dbb)
	n := map[string]uint64{}
	for _, id := range ids {
		run, _ := dbb.Run(ctx, id)
		n[id] = run.LastSeq()
	}
	if dup := d.duplicates(); len(dup) > 0 {
		t.Errorf("duplicate effects: %v", dup)
	}
	converged(t, dbb, reference(t, ids, n))
}

// TestRestoreRefusesDamagedStream: a message no writer of the store could
// have published (a stale epoch after a fence, a group that does not
// decode, a part out of order, a file outside the store) makes the restore
// fail with a *CorruptStreamError naming the message, and writes nothing
// into the target directory.
func TestRestoreRefusesDamagedStream(t *testing.T) {
	c := newCluster(t, true)
	cases := []struct {
		name   string
		kind   string
		epoch  string
		hdr    map[string]string
		body   []byte
		reason string
	}{
		{"stale epoch", kindLog, "1", map[string]string{hdrPart: "1/1"}, encodeGroup([][][]byte{{[]byte("x")}}), "epoch 1 in epoch 2"},
		{"bad group", kindLog, "2", map[string]string{hdrPart: "1/1"}, []byte("not a group"), "group of messages"},
		{"part out of order", kindLog, "2", map[string]string{hdrPart: "2/2"}, []byte("x"), "part 2/2"},
		{"file outside the store", kindFile, "2", map[string]string{hdrFile: "../../etc/x.dict"}, sealFile([]byte("x")), "not a store file"},
		{"unknown kind", "snapshot", "2", nil, nil, "unknown"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := fmt.Sprintf("damaged%d", i)
			// Two writers in turn, so that the stream holds epochs 1 and 2.
			ra, dba, _ := open(t, c, store, "a", 0, false)
			run, _ := dba.Run(ctx, "r")
			var d downstream
			if _, err := step(run, &d); err != nil {
				t.Fatal(err)
			}
			dba.Close()
			ra.Close()
			rb, dbb, _ := open(t, c, store, "b", 1, false)
			dbb.Close()
			rb.Close()

			cfg := c.config(store, "rogue", 2)
			js, _ := jetstream.New(cfg.Conn)
			m := nats.NewMsg(subject(store, subjLog))
			m.Header.Set(hdrKind, tc.kind)
			m.Header.Set(hdrEpoch, tc.epoch)
			for k, v := range tc.hdr {
				m.Header.Set(k, v)
			}
			m.Data = tc.body
			ack, err := js.PublishMsg(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "c")
			_, err = Open(ctx, dir, c.config(store, "c", 2))
			var ce *CorruptStreamError
			if !errors.As(err, &ce) || ce.Seq != ack.Sequence || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("restore of a stream with %s at message %d: %v, want a CorruptStreamError naming it (%q)", tc.name, ack.Sequence, err, tc.reason)
			}
			for _, p := range []string{dir, dir + ".restore"} {
				if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a refused restore left %s: %v", p, err)
				}
			}
		})
	}
}

// TestPartitionedWriter: the writer's network to the cluster is cut while
// it commits. Its commit waits; its lease expires and a node on the other
// side takes the store; when the network comes back, the waiting commit
// fails with ErrFenced, never acknowledged. Nothing the writer had
// acknowledged is lost, and the store converges.
func TestPartitionedWriter(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a lease to expire and a reconnection")
	}
	c := newCluster(t, true)
	p := newProxy(t, c.urls[0][len("nats://"):])
	// Only through the proxy: the servers' gossip of their other URLs would
	// let the client reconnect around the partition.
	nc, err := nats.Connect(p.url(), nats.UserInfo("app", "app"), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond), nats.IgnoreDiscoveredServers())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cfg := c.config("part", "a", 0)
	cfg.Conn = nc
	cfg.Timeout = 8 * time.Second
	dira := filepath.Join(t.TempDir(), "a")
	ra, err := Open(ctx, dira, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Abandon()
	dba, err := engine.Open(dira, engineOptions(ra))
	if err != nil {
		t.Fatal(err)
	}
	defer dba.Close()
	var d downstream
	var k acked
	runa, err := dba.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		seq, err := step(runa, &d)
		if err != nil {
			t.Fatal(err)
		}
		k.add(runa, seq)
	}

	p.cut()
	done := make(chan error, 1)
	go func() {
		seq, err := step(runa, &d)
		if err == nil {
			k.add(runa, seq)
		}
		done <- err
	}()
	rb, dbb, _ := open(t, c, "part", "b", 1, false) // waits for a's lease to expire
	defer rb.Close()
	defer dbb.Close()
	p.heal()
	err = <-done
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("the partitioned writer's commit after the takeover: %v, want ErrFenced", err)
	}
	t.Logf("the partitioned writer's commit: %v", err)
	k.check(t, dbb)
	runb, err := dbb.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := step(runb, &d); err != nil {
			t.Fatal(err)
		}
	}
	if dup := d.duplicates(); len(dup) > 0 {
		t.Errorf("duplicate effects: %v", dup)
	}
	converged(t, dbb, reference(t, []string{"r"}, map[string]uint64{"r": runb.LastSeq()}))
}

// TestGroupsInParts: groups larger than a message go out in parts, and a
// restore joins them: atoms of 3 KiB deltas through messages of at most
// 1 KiB come back whole on the next writer.
func TestGroupsInParts(t *testing.T) {
	c := newCluster(t, true)
	cfg := c.config("parts", "a", 0)
	cfg.maxPart = 1 << 10
	dir := filepath.Join(t.TempDir(), "a")
	ra, err := Open(ctx, dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	dba, err := engine.Open(dir, &engine.Options{Replicator: ra, DictSamples: -1})
	if err != nil {
		t.Fatal(err)
	}
	run, err := dba.Run(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(7))
	for i := range 8 {
		a, err := run.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v := make([]byte, 3<<10)
		rng.Read(v) // incompressible: the record stays about 3 KiB
		if err := a.Commit(ctx, new(frame.Delta).Set(fmt.Sprint("k", i), v)); err != nil {
			t.Fatal(err)
		}
	}
	want, head := run.State(), run.Head()
	if err := dba.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ra.Close(); err != nil {
		t.Fatal(err)
	}
	rb, dbb, _ := open(t, c, "parts", "b", 1, false)
	defer rb.Close()
	defer dbb.Close()
	t.Logf("%+v", rb.Restored())
	if info := rb.Restored(); info.Messages < 3*8 {
		t.Errorf("restore read %d messages for 8 atoms of 3 KiB in parts of 1 KiB: %+v", info.Messages, info)
	}
	got, err := dbb.Run(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if got.Head() != head {
		t.Errorf("head %s after the restore, %s before", got.Head(), head)
	}
	if diff := cmp.Diff(want, got.State()); diff != "" {
		t.Errorf("frame after the restore (-want +got):\n%s", diff)
	}
}
