package snapshot

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

const killDirEnv = "SNAPSHOT_KILL_TEST_DIR"

// TestKillChild is the child of TestSIGKILL: it commits synced batches to the
// store in $SNAPSHOT_KILL_TEST_DIR and prints the index of each one after its
// Commit returned, until it is killed. Run alone, it does nothing.
func TestKillChild(t *testing.T) {
	dir := os.Getenv(killDirEnv)
	if dir == "" {
		t.Skip("run by TestSIGKILL only")
	}
	st, err := Open(dir, &Options{Logger: discardLogger()})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	first, _ := strconv.Atoi(os.Getenv(killDirEnv + "_FIRST"))
	for i := first; ; i++ {
		if err := crashBatch(st, i, i%2 == 0); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		if i%2 == 0 { // synced: acknowledged
			fmt.Println(i)
		}
	}
}

// TestSIGKILL kills a child process that is committing batches to a store
// on the real disk, at a random moment, then checks that every batch whose
// synced Commit returned survived and that every batch is whole; it does so
// several times over the same store.
func TestSIGKILL(t *testing.T) {
	if os.Getenv(killDirEnv) != "" {
		t.Skip("in the child")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	dir := filepath.Join(t.TempDir(), "snapshots")
	kills := 5
	if testing.Short() {
		kills = 2
	}
	next := 0
	for k := range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), killDirEnv+"="+dir, fmt.Sprintf("%s_FIRST=%d", killDirEnv, next))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		want := next + 2 + rng.IntN(60)
		lastAcked := -1
		deadline := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			i, err := strconv.Atoi(sc.Text())
			if err != nil {
				cmd.Process.Kill()
				t.Fatalf("child said %q", sc.Text())
			}
			lastAcked = i
			if i >= want {
				break
			}
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		deadline.Stop()
		cmd.Wait()
		if lastAcked < 0 {
			t.Fatalf("kill %d: the child acknowledged nothing", k)
		}

		st, err := Open(dir, &Options{Logger: discardLogger()})
		if err != nil {
			t.Fatalf("kill %d: reopen: %v", k, err)
		}
		present := -1
		for i := 0; i < lastAcked+200; i++ {
			ok, err := crashBatchPresent(st, i)
			if err != nil {
				t.Fatalf("kill %d: %v", k, err)
			}
			if i <= lastAcked && !ok {
				t.Fatalf("kill %d: acknowledged batch %d lost (last acknowledged %d)", k, i, lastAcked)
			}
			if ok {
				present = i
			}
		}
		st.Close()
		next = present + 1
	}
}
