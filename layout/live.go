package layout

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Whether a store is open by a live process, for the offline tools: an
// intent without a certificate in the atom a live process is running may
// be an exec that is running right now, not an action in doubt.
//
// Two sources, neither of which takes the lock: the DBs this process has
// open (a registry kept beside the lock), and, for a store on the
// operating system's filesystem, the fcntl lock that Open holds on LOCK,
// queried with F_GETLK (which reports another process's lock and its pid
// without acquiring anything). A store on another filesystem (in memory,
// fault-injecting) is seen live only from its own process.

// liveKey names a store's lock file on one filesystem.
type liveKey struct {
	fs   vfs.FS // the root filesystem; nil when its type is not comparable
	path string
}

var liveStores struct {
	sync.Mutex
	open map[liveKey]int // lock file -> DBs of this process holding it
}

func liveKeyOf(fs vfs.FS, lockPath string) liveKey {
	root := vfs.Root(fs)
	k := liveKey{path: lockPath}
	if root == vfs.Default {
		if abs, err := filepath.Abs(lockPath); err == nil {
			k.path = abs
		}
	}
	if t := reflect.TypeOf(root); t != nil && t.Comparable() {
		k.fs = root
	}
	return k
}

// lockStore takes the lock file lockPath on fs and records that this
// process holds it, until the returned closer is closed. The registry's
// mutex is held across the lock, so that StoreHolder never probes a lock
// file between the lock and its record: closing a descriptor of a file
// releases every fcntl lock of the process on it.
func lockStore(fs vfs.FS, lockPath string) (io.Closer, error) {
	k := liveKeyOf(fs, lockPath)
	liveStores.Lock()
	defer liveStores.Unlock()
	lock, err := fs.Lock(lockPath)
	if err != nil {
		return nil, err
	}
	if liveStores.open == nil {
		liveStores.open = map[liveKey]int{}
	}
	liveStores.open[k]++
	return &liveCloser{key: k, lock: lock}, nil
}

type liveCloser struct {
	once sync.Once
	key  liveKey
	lock io.Closer
	err  error
}

func (c *liveCloser) Close() error {
	c.once.Do(func() {
		liveStores.Lock()
		if liveStores.open[c.key]--; liveStores.open[c.key] <= 0 {
			delete(liveStores.open, c.key)
		}
		liveStores.Unlock()
		c.err = c.lock.Close()
	})
	return c.err
}

// Holder says which live process, if any, has a store open.
type Holder struct {
	// Live: a DB has the store open, in this process or another one.
	Live bool
	// PID is the holding process's id when it could be learned (0 if not,
	// or if no process holds the store).
	PID int
}

// StoreHolder reports whether a live process holds the lock file lockPath
// on fs. It never takes the lock, so it cannot make an agent's Open fail.
func StoreHolder(fs vfs.FS, lockPath string) Holder {
	k := liveKeyOf(fs, lockPath)
	liveStores.Lock()
	defer liveStores.Unlock()
	if liveStores.open[k] > 0 {
		return Holder{Live: true, PID: os.Getpid()}
	}
	if vfs.Root(fs) != vfs.Default {
		return Holder{}
	}
	return lockHolder(k.path)
}
