package replicate

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// cluster is a three-node JetStream cluster inside the test process, over
// loopback, each node with its own store directory under t.TempDir.
type cluster struct {
	t       testing.TB
	confs   []string // config file per node
	servers []*server.Server
	urls    []string // client URL per node
}

// freePort returns a loopback port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// newCluster starts three nodes; syncAlways sets sync_interval: always.
// The ports are picked free just before the nodes bind them; a node that
// does not come up (a port taken meanwhile, or a machine too loaded to
// start it within 10 s) makes it start a new cluster, three times at most.
func newCluster(t testing.TB, syncAlways bool) *cluster {
	t.Helper()
	var err error
	for attempt := range 3 {
		var c *cluster
		if c, err = launch(t, syncAlways); err == nil {
			t.Cleanup(func() {
				for i := range c.servers {
					c.stop(i)
				}
			})
			c.waitReady()
			return c
		}
		t.Logf("cluster start, attempt %d: %v", attempt+1, err)
	}
	t.Fatal(err)
	return nil
}

// launch writes the nodes' configurations and starts them; on an error
// every node it started is stopped.
func launch(t testing.TB, syncAlways bool) (*cluster, error) {
	dir := t.TempDir()
	c := &cluster{t: t}
	var client, route []int
	for range 3 {
		client = append(client, freePort(t))
		route = append(route, freePort(t))
	}
	var routes []string
	for _, p := range route {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	sync := ""
	if syncAlways {
		sync = "sync_interval: always"
	}
	for i := range 3 {
		conf := fmt.Sprintf(`
server_name: n%d
listen: 127.0.0.1:%d
jetstream { store_dir: %q, %s }
accounts {
  APP { jetstream: enabled, users: [{user: app, password: app}] }
  SYS { users: [{user: sys, password: sys}] }
}
system_account: SYS
cluster { name: c, listen: 127.0.0.1:%d, routes: [%s] }
`, i+1, client[i], filepath.Join(dir, fmt.Sprintf("n%d", i+1)), sync, route[i], strings.Join(routes, ", "))
		p := filepath.Join(dir, fmt.Sprintf("n%d.conf", i+1))
		if err := os.WriteFile(p, []byte(conf), 0o600); err != nil {
			return nil, err
		}
		c.confs = append(c.confs, p)
		c.urls = append(c.urls, fmt.Sprintf("nats://127.0.0.1:%d", client[i]))
		c.servers = append(c.servers, nil)
	}
	for i := range 3 {
		if err := c.tryStart(i); err != nil {
			for j := range c.servers {
				c.stop(j)
			}
			return nil, err
		}
	}
	return c, nil
}

// waitReady waits until the JetStream meta leader knows all three peers
// (a stream placed before that may find "no suitable peers").
func (c *cluster) waitReady() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if l := leaderOf(c.servers); l != nil && len(l.JetStreamClusterPeers()) == len(c.servers) && c.canPlace() {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("JetStream cluster without a meta leader that knows its %d peers after 30 s", len(c.servers))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// canPlace reports whether an R3 stream can be placed now: the meta
// leader may know a peer before it counts it online.
func (c *cluster) canPlace() bool {
	nc, err := nats.Connect(strings.Join(c.urls, ","), nats.UserInfo("app", "app"))
	if err != nil {
		return false
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PROBE", Subjects: []string{"probe"}, Replicas: 3, Storage: jetstream.FileStorage}); err != nil {
		return false
	}
	return js.DeleteStream(ctx, "PROBE") == nil
}

func leaderOf(ss []*server.Server) *server.Server {
	for _, s := range ss {
		if s != nil && s.JetStreamIsLeader() {
			return s
		}
	}
	return nil
}

// start starts node i again after stop, with its store directory and
// its ports.
func (c *cluster) start(i int) {
	c.t.Helper()
	if err := c.tryStart(i); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) tryStart(i int) error {
	opts, err := server.ProcessConfigFile(c.confs[i])
	if err != nil {
		return err
	}
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		s.WaitForShutdown()
		return fmt.Errorf("node %d not ready for connections after 10 s", i+1)
	}
	c.servers[i] = s
	return nil
}

// stop shuts node i down (a killed JetStream node).
func (c *cluster) stop(i int) {
	if s := c.servers[i]; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
		c.servers[i] = nil
	}
}

// connect connects to the cluster as the application (user "sys": the
// system account), preferring node i.
func (c *cluster) connect(user string, i int) *nats.Conn {
	c.t.Helper()
	urls := append([]string{c.urls[i]}, c.urls...)
	nc, err := nats.Connect(strings.Join(urls, ","), nats.UserInfo(user, user), nats.DontRandomize(),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(nc.Close)
	return nc
}

// config is a Config for node on the cluster, connected through node i.
func (c *cluster) config(store, node string, i int) Config {
	return Config{Conn: c.connect("app", i), SystemConn: c.connect("sys", i), Store: store, Node: node,
		LeaseTTL: 600 * time.Millisecond}
}
