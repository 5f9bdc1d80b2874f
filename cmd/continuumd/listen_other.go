//go:build !unix

package main

import "net"

// listenPrivate listens on a Unix socket; its mode is set to 0600 right
// after (there is no umask to narrow on this system).
func listenPrivate(path string) (net.Listener, error) {
	return net.Listen("unix", path)
}
