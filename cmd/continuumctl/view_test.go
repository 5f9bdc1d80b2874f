package main

import (
	"net"
	"testing"
)

// TestBrowsable: the login URL names a listener on every interface by its
// loopback address, which a browser opens, and any other by its own.
func TestBrowsable(t *testing.T) {
	for _, tc := range []struct {
		addr *net.TCPAddr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8765}, "127.0.0.1:8765"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 8765}, "[::1]:8765"},
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}, "127.0.0.1:9"},
		{&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 80}, "10.1.2.3:80"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 80}, "[::1]:80"},
	} {
		if got := browsable(tc.addr); got != tc.want {
			t.Errorf("browsable(%v) = %s, want %s", tc.addr, got, tc.want)
		}
	}
}
