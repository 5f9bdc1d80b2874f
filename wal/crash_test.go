package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// crashModel tracks every record ever appended during a crash test. A
// record's payload starts with its 8-byte id; the rest is derived from it.
type crashModel struct {
	mu      sync.Mutex
	nextID  uint64
	payload map[uint64][]byte
	writer  map[uint64]int      // id -> writer that appended it
	batch   map[uint64][]uint64 // id -> ids of its whole batch, in order
	acked   []uint64            // acknowledged ids, in acknowledgement order
}

func newCrashModel() *crashModel {
	return &crashModel{payload: map[uint64][]byte{}, writer: map[uint64]int{}, batch: map[uint64][]uint64{}}
}

func crashPayload(rng *rand.Rand, id uint64) []byte {
	n := 8 + rng.IntN(3)*rng.IntN(700)
	b := make([]byte, n)
	binary.LittleEndian.PutUint64(b, id)
	for i := 8; i < n; i++ {
		b[i] = byte(id) ^ byte(i*7)
	}
	return b
}

// newBatch registers a batch of k records for writer w.
func (m *crashModel) newBatch(rng *rand.Rand, w, k int) [][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]uint64, k)
	recs := make([][]byte, k)
	for i := range k {
		m.nextID++
		ids[i] = m.nextID
		recs[i] = crashPayload(rng, ids[i])
		m.payload[ids[i]] = recs[i]
		m.writer[ids[i]] = w
	}
	for _, id := range ids {
		m.batch[id] = ids
	}
	return recs
}

func (m *crashModel) ack(recs [][]byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range recs {
		m.acked = append(m.acked, binary.LittleEndian.Uint64(r))
	}
}

func (m *crashModel) ackedSnapshot() []uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]uint64(nil), m.acked...)
}

// check verifies what a recovered log holds: only appended records,
// byte-identical, each once, every batch whole, each writer's records in
// the order it appended them, and every id in must present. It returns the
// ids read, in log order.
func (m *crashModel) check(t *testing.T, l *Log, must []uint64) []uint64 {
	t.Helper()
	r, err := l.NewReader(Pos{})
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	defer r.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []uint64
	seen := map[uint64]bool{}
	lastOfWriter := map[int]uint64{}
	for r.Next() {
		b := r.Record()
		if len(b) < 8 {
			t.Fatalf("record at %v is %d bytes: never appended", r.Pos(), len(b))
		}
		id := binary.LittleEndian.Uint64(b)
		want, ok := m.payload[id]
		if !ok || !bytes.Equal(want, b) {
			t.Fatalf("record at %v (id %d) was never appended or differs", r.Pos(), id)
		}
		if seen[id] {
			t.Fatalf("record %d appears twice (again at %v)", id, r.Pos())
		}
		seen[id] = true
		w := m.writer[id]
		if last := lastOfWriter[w]; id < last {
			t.Fatalf("writer %d: record %d after %d", w, id, last)
		}
		lastOfWriter[w] = id
		ids = append(ids, id)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("reading the recovered log: %v", err)
	}
	// Batches: all or nothing, contiguous.
	for i := 0; i < len(ids); {
		b := m.batch[ids[i]]
		if b[0] != ids[i] || i+len(b) > len(ids) {
			t.Fatalf("batch %v only partly present (at index %d)", b, i)
		}
		for j, id := range b {
			if ids[i+j] != id {
				t.Fatalf("batch %v broken: index %d holds %d", b, i+j, ids[i+j])
			}
		}
		i += len(b)
	}
	for _, id := range must {
		if !seen[id] {
			t.Fatalf("acknowledged record %d lost", id)
		}
	}
	return ids
}

// TestCrashProperty crashes a log on a crash-simulating filesystem at random
// points while several writers append, reopens the crash image and checks
// that every acknowledged record is there, in order, byte-identical, that
// batches are whole, and that nothing else appears. Each round reopens the
// previous round's image and continues appending in its newest segment, so
// resume after resume is covered (chainLen times per log). A round ends
// either with a power loss (a crash clone keeping 0, 50 or 100 percent of
// the unsynced blocks) or with a kill: the process stops, its unsynced
// writes stay unsynced (as in a page cache) and the next round resumes after
// them, until a later power loss decides which blocks survive.
func TestCrashProperty(t *testing.T) {
	rounds := 700 // per UnsyncedDataPercent: 2,100 crash points in all
	switch {
	case !testing.Short():
		rounds = 3000
	case raceEnabled:
		rounds = 150 // the race detector looks for races, not more crash points
	}
	for _, pct := range []int{0, 50, 100} {
		t.Run(fmt.Sprintf("unsynced=%d", pct), func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, uint64(pct)))
			crashRounds(t, rng, pct, rounds)
		})
	}
}

// chainLen is how many crash-and-recover rounds run on one log.
const chainLen = 20

func crashRounds(t *testing.T, rng *rand.Rand, pct, rounds int) {
	m := newCrashModel()
	var fs *vfs.MemFS
	var segSize int64
	var must []uint64
	torn, resumed, kills := 0, 0, 0 // recoveries that trimmed a torn tail, that resumed; rounds ended by a kill
	ctx := context.Background()
	defer func(v int64) { maxUnsynced = v }(maxUnsynced)
	// At 50 percent a torn tail is likely but not certain in a given round:
	// go on (up to 4x) until one was met, so the torn path is always tested.
	for round := 0; round < rounds || (pct == 50 && torn == 0 && round < 4*rounds); round++ {
		if round%chainLen == 0 {
			// A fresh log every chainLen rounds keeps each round cheap; within
			// a chain every round recovers the previous round's crash image.
			fs, must = vfs.NewCrashableMem(), nil
			segSize = int64(MinSegmentSize) << rng.IntN(4)
			// A small bound on unsynced bytes splits group commits and
			// narrows the window recovery checks past the tail.
			maxUnsynced = []int64{512, 2 << 10, 512 << 10}[rng.IntN(3)]
		}
		cloneRNG := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		cfg := vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: cloneRNG}
		if rng.IntN(8) == 0 {
			// Crash while Open recovers: while it zeroes a torn tail and
			// syncs, or seals, creates and activates a segment.
			done := make(chan *Log, 1)
			go func() {
				l, err := Open("wal", &Options{FS: fs, SegmentSize: segSize})
				if err != nil {
					t.Errorf("round %d: Open: %v", round, err)
				}
				done <- l
			}()
			time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
			clone := fs.CrashClone(cfg)
			if l := <-done; l != nil {
				l.Close()
			}
			if t.Failed() {
				return
			}
			fs = clone
			continue
		}
		// Syncs that take a little time make crashes between a write and
		// its sync (torn tails) likely. The kill switch fails every
		// operation once the round's process is killed.
		var kill killSwitch
		slow := errorfs.Wrap(kill.wrap(fs), errorfs.InjectorFunc(func(op errorfs.Op) error {
			if op.Kind == errorfs.OpFileSyncData {
				time.Sleep(time.Duration(rand.IntN(50)) * time.Microsecond)
			}
			return nil
		}))
		l, err := Open("wal", &Options{FS: slow, SegmentSize: segSize})
		if err != nil {
			t.Fatalf("round %d: Open: %v", round, err)
		}
		must = m.check(t, l, must)
		if ri := l.Recovery(); ri.TornRecords > 0 {
			torn++
		}
		if l.Recovery().Resumed {
			resumed++
		}
		base := len(m.ackedSnapshot())

		writers := 1 + rng.IntN(4)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range writers {
			wrng := rand.New(rand.NewPCG(rng.Uint64(), uint64(w)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					recs := m.newBatch(wrng, w, 1+wrng.IntN(3)*wrng.IntN(3))
					var err error
					if len(recs) == 1 && wrng.IntN(2) == 0 {
						_, err = l.Append(ctx, recs[0])
					} else {
						_, err = l.AppendAsync(recs...).Wait(ctx)
					}
					if err != nil {
						return // closed under us
					}
					m.ack(recs)
				}
			}()
		}
		// Crash after a random number of acknowledgements.
		target := base + rng.IntN(24)
		deadline := time.Now().Add(2 * time.Second)
		for len(m.ackedSnapshot()) < target && time.Now().Before(deadline) {
			time.Sleep(100 * time.Microsecond)
		}
		if rng.IntN(3) == 0 {
			// Kill: no more writes or syncs reach the filesystem; what was
			// written stays there, unsynced, for the next round.
			kill.dead.Store(true)
			acked := m.ackedSnapshot()
			close(stop)
			l.Close()
			wg.Wait()
			must = append(must, acked[base:]...)
			kills++
			continue
		}
		acked := m.ackedSnapshot()
		clone := fs.CrashClone(cfg)
		close(stop)
		l.Close()
		wg.Wait()
		must = append(must, acked[base:]...)
		fs = clone
	}
	l, err := Open("wal", &Options{FS: fs, SegmentSize: segSize})
	if err != nil {
		t.Fatalf("final Open: %v", err)
	}
	ids := m.check(t, l, must)
	st := l.Recovery()
	l.Close()
	if pct == 50 && torn == 0 {
		t.Errorf("no recovery met a torn tail in %d rounds: the torn path went untested", rounds)
	}
	if resumed < rounds/4 {
		t.Errorf("only %d of %d recoveries resumed the newest segment", resumed, rounds)
	}
	t.Logf("%d torn tails trimmed, %d resumes, %d kills; %d rounds, %d records appended, %d recovered at the end; last recovery %+v",
		torn, resumed, kills, rounds, m.nextID, len(ids), st)
}
