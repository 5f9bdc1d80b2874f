//go:build unix

package main

import (
	"net"
	"sync"
	"syscall"
)

// umaskMu serializes the narrowing of the process's umask.
var umaskMu sync.Mutex

// listenPrivate listens on a Unix socket created with mode 0600: the umask
// is 0177 while bind creates the file, so no other user can connect in
// the moment before a chmod.
func listenPrivate(path string) (net.Listener, error) {
	umaskMu.Lock()
	defer umaskMu.Unlock()
	old := syscall.Umask(0o177)
	defer syscall.Umask(old)
	return net.Listen("unix", path)
}
