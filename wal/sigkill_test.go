package wal

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The SIGKILL test re-executes the test binary as a child that appends on a
// real disk and reports each acknowledged record id on stdout; the parent
// kills it with SIGKILL at a random moment, reopens the log and checks that
// every reported record is there, byte-identical, in per-writer order, with
// whole batches, and that nothing else is.
const (
	sigkillDirEnv  = "WAL_SIGKILL_DIR"
	sigkillBaseEnv = "WAL_SIGKILL_BASE"
	sigkillSeedEnv = "WAL_SIGKILL_SEED"
)

// sigkillRecord is the payload of record id, first of a batch of n
// starting at first; its size and filler derive from id.
func sigkillRecord(id, first uint64, n int) []byte {
	size := 17 + int(id*2654435761%1500)
	b := make([]byte, size)
	binary.LittleEndian.PutUint64(b[0:], id)
	binary.LittleEndian.PutUint64(b[8:], first)
	b[16] = byte(n)
	for i := 17; i < size; i++ {
		b[i] = byte(id>>3) + byte(i)
	}
	return b
}

func sigkillChild(dir string, base, seed uint64) {
	l, err := Open(dir, &Options{SegmentSize: 256 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(3)
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			next := base + uint64(w)<<32
			for {
				n := 1 + rng.IntN(3)
				recs := make([][]byte, n)
				for i := range n {
					recs[i] = sigkillRecord(next+uint64(i), next, n)
				}
				if _, err := l.AppendBatch(ctx, recs); err != nil {
					fmt.Fprintln(os.Stderr, "child append:", err)
					os.Exit(4)
				}
				mu.Lock()
				for i := range n {
					fmt.Fprintln(out, next+uint64(i))
				}
				out.Flush()
				mu.Unlock()
				next += uint64(n)
			}
		}()
	}
	wg.Wait()
}

func TestSIGKILL(t *testing.T) {
	if dir := os.Getenv(sigkillDirEnv); dir != "" {
		base, _ := strconv.ParseUint(os.Getenv(sigkillBaseEnv), 10, 64)
		seed, _ := strconv.ParseUint(os.Getenv(sigkillSeedEnv), 10, 64)
		sigkillChild(dir, base, seed)
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("cannot re-execute the test binary: %v", err)
	}
	cycles := 6
	if !testing.Short() {
		cycles = 30
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir() + "/wal"
	must := map[uint64]bool{}
	totalAcked := 0
	for cycle := range cycles {
		base := uint64(cycle+1) << 48
		cmd := exec.Command(exe, "-test.run=^TestSIGKILL$")
		cmd.Env = append(os.Environ(), sigkillDirEnv+"="+dir,
			sigkillBaseEnv+"="+strconv.FormatUint(base, 10),
			sigkillSeedEnv+"="+strconv.FormatUint(rng.Uint64(), 10))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked := make(chan []uint64, 1)
		first := make(chan struct{})
		go func() {
			var ids []uint64
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if id, err := strconv.ParseUint(sc.Text(), 10, 64); err == nil {
					if len(ids) == 0 {
						close(first)
					}
					ids = append(ids, id)
				}
			}
			acked <- ids
		}()
		// The kill falls at a random moment after the child's first
		// acknowledgement: a timer started at exec could fire before a slow
		// child (race detector, loaded machine) has written anything.
		select {
		case <-first:
		case <-time.After(2 * time.Minute):
		}
		time.Sleep(time.Duration(rng.IntN(800)) * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		ids := <-acked
		cmd.Wait()
		for _, id := range ids {
			must[id] = true
		}
		totalAcked += len(ids)

		l, err := Open(dir, &Options{SegmentSize: 256 << 10})
		if err != nil {
			t.Fatalf("cycle %d: reopen after SIGKILL: %v", cycle, err)
		}
		found := sigkillCheck(t, l, must)
		ri := l.Recovery()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("cycle %d: %d acknowledged before the kill, %d records in the log, torn %d bytes / %d records",
			cycle, len(ids), found, ri.TornBytes, ri.TornRecords)
		if len(ids) == 0 {
			t.Fatalf("cycle %d: the child acknowledged nothing before the kill", cycle)
		}
	}
	t.Logf("%d cycles, %d acknowledged records checked", cycles, totalAcked)
}

// sigkillCheck reads the whole log and checks it against the acknowledged ids.
func sigkillCheck(t *testing.T, l *Log, must map[uint64]bool) int {
	t.Helper()
	r, err := l.NewReader(Pos{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	seen := map[uint64]bool{}
	last := map[uint64]uint64{} // writer (id>>32) -> last id
	var pendingBatch []uint64   // ids still expected to complete the current batch
	for r.Next() {
		b := r.Record()
		if len(b) < 17 {
			t.Fatalf("record at %v: %d bytes, never appended", r.Pos(), len(b))
		}
		id, first, n := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), int(b[16])
		if want := sigkillRecord(id, first, n); string(want) != string(b) {
			t.Fatalf("record %d at %v differs from what was appended", id, r.Pos())
		}
		if seen[id] {
			t.Fatalf("record %d twice", id)
		}
		seen[id] = true
		if w := id >> 32; last[w] >= id {
			t.Fatalf("writer %x: record %d after %d", w, id, last[w])
		}
		last[id>>32] = id
		if len(pendingBatch) > 0 {
			if pendingBatch[0] != id {
				t.Fatalf("batch broken at %v: got %d, want %d", r.Pos(), id, pendingBatch[0])
			}
			pendingBatch = pendingBatch[1:]
		} else {
			if id != first {
				t.Fatalf("record %d at %v starts in the middle of batch %d", id, r.Pos(), first)
			}
			for i := 1; i < n; i++ {
				pendingBatch = append(pendingBatch, first+uint64(i))
			}
		}
	}
	if err := r.Err(); err != nil {
		t.Fatalf("reading after SIGKILL: %v", err)
	}
	if len(pendingBatch) > 0 {
		t.Fatalf("log ends inside a batch, missing %v", pendingBatch)
	}
	for id := range must {
		if !seen[id] {
			t.Fatalf("acknowledged record %d lost", id)
		}
	}
	return len(seen)
}
