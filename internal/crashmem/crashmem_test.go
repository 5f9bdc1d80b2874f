package crashmem

import (
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

type lockCloner interface {
	Lock(name string) (io.Closer, error)
	CrashClone(cfg vfs.CrashCloneCfg) *vfs.MemFS
}

// race runs Locks and CrashClones of fs at once and reports whether they
// all returned within limit.
func race(fs lockCloner, n int, limit time.Duration) bool {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range n {
			l, err := fs.Lock(fmt.Sprintf("LOCK%d", i%8))
			if err == nil {
				l.Close()
			}
		}
	}()
	go func() {
		defer wg.Done()
		for range n {
			fs.CrashClone(vfs.CrashCloneCfg{})
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(limit):
		return false
	}
}

// TestCloneBesideLock: Locks and crash clones at once all return (on the
// bare MemFS they deadlock: a Lock that holds the clone lock for reading
// asks for it again while a clone waits for it).
func TestCloneBesideLock(t *testing.T) {
	if !race(New(vfs.NewCrashableMem()), 20000, time.Minute) {
		t.Fatal("Lock and CrashClone deadlocked")
	}
}
