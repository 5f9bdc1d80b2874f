package replicate

import (
	"io"
	"net"
	"sync"
	"testing"
)

// proxy forwards TCP connections from a loopback port to target until it
// is cut: then its connections are closed and new ones refused (closed at
// once), until it is healed. It stands for the network between a writer
// and its JetStream node.
type proxy struct {
	l      net.Listener
	target string
	mu     struct {
		sync.Mutex
		cut   bool
		conns []net.Conn
	}
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target}
	t.Cleanup(func() { l.Close(); p.cut() })
	go p.accept()
	return p
}

func (p *proxy) url() string { return "nats://" + p.l.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.mu.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.conns = append(p.mu.conns, c, u)
		p.mu.Unlock()
		go func() { io.Copy(u, c); u.Close() }()
		go func() { io.Copy(c, u); c.Close() }()
	}
}

// cut closes every connection and refuses new ones until heal.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.cut = true
	for _, c := range p.mu.conns {
		c.Close()
	}
	p.mu.conns = nil
}

func (p *proxy) heal() {
	p.mu.Lock()
	p.mu.cut = false
	p.mu.Unlock()
}
