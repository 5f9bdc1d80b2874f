package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/seal"
)

const usage = `continuumd serves one CONTINUUM store to agents in any language.

Usage:
  continuumd --store DIR [--socket PATH | --no-socket] [--listen ADDR] [--token-file FILE] [--tokens FILE]
             [--tls-cert F --tls-key F] [--keyring FILE [--erasable KEY]...]
  continuumd token --tokens FILE --name NAME --rights read,write,erase,admin [--runs PREFIX]

It listens on a Unix socket (DIR.sock by default, mode 0600) and, with
--listen, on TCP too, where every request needs a bearer token: the one
of --token-file (which may do anything), or one of --tokens, each scoped
to rights (read, write, erase, admin) and to runs (an id prefix);
continuumd token makes them. The protocol is HTTP/JSON, described by openapi.json in the
repository (cmd/continuumd); the same listeners serve it in binary frames
too (continuum-frames/1: a connection whose first byte is 0x00). SIGTERM or SIGINT stops it gracefully: requests
in progress are answered (commits included) before the store is closed; a
second signal stops it at once.

With --keyring the store is encrypted (the keyring file continuumctl
reads): runs can then be erased (POST /v1/runs/{run}/erase), and the
values of the memory keys named by --erasable are sealed with keys of
their own, so that one key of a run can be erased
(POST /v1/runs/{run}/memory/{key}/erase).

Flags:
`

// config is the command line, checked.
type config struct {
	store, socket, listen       string
	tokenFile, tlsCert, tlsKey  string
	tokensFile                  string
	signingKey, chainKey        string
	insecurePlaintext, noSocket bool
	unsafeNoSync                bool
	lease, maxLease, drain      time.Duration
	maxBody                     int64
	bodyTimeout                 time.Duration
	maxConns                    int
	durability, logLevel        string
	keyring                     string
	erasable                    stringList
	cpuProfile                  string
	blockProfile, mutexProfile  string
	h2c                         bool
	blobThreshold               int
}

// stringList is a flag that may be given more than once.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "token" {
		os.Exit(runTokenCommand(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stderr))
}

func parseConfig(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("continuumd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{}
	fs.StringVar(&c.store, "store", "", "the store's `directory` (created if it holds no store)")
	fs.StringVar(&c.socket, "socket", "", "the Unix socket's `path` (default: the store's directory + \".sock\")")
	fs.BoolVar(&c.noSocket, "no-socket", false, "serve no Unix socket (only --listen)")
	fs.StringVar(&c.listen, "listen", "", "also serve TCP on `host:port`; needs --token-file")
	fs.StringVar(&c.tokenFile, "token-file", "", "`file` holding the bearer token every request must carry (mode 0600; required with --listen, optional on the socket)")
	fs.StringVar(&c.tokensFile, "tokens", "", "`file` of scoped tokens' hashes (mode 0600; see continuumd token): each token's rights and runs")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "TLS certificate `file` (PEM) for --listen")
	fs.StringVar(&c.tlsKey, "tls-key", "", "TLS private key `file` (PEM) for --listen")
	fs.BoolVar(&c.insecurePlaintext, "insecure-plaintext", false, "allow --listen on a non-loopback address without TLS (the token then crosses the network in clear)")
	fs.DurationVar(&c.lease, "lease", 30*time.Second, "an attempt's lease unless its begin asks for another")
	fs.DurationVar(&c.maxLease, "max-lease", time.Hour, "the longest lease a begin may ask for")
	fs.DurationVar(&c.drain, "drain-timeout", 30*time.Second, "how long shutdown waits for requests in progress")
	fs.Int64Var(&c.maxBody, "max-body", 16<<20, "the largest request body, in `bytes`")
	fs.DurationVar(&c.bodyTimeout, "body-timeout", 30*time.Second, "how long a request's body may take to arrive (408 beyond)")
	fs.IntVar(&c.maxConns, "max-conns", 1024, "the most connections served at once, per listener (one more is answered 503 and closed)")
	fs.StringVar(&c.durability, "durability", "strict", "strict or relaxed (see the engine's Durability)")
	fs.StringVar(&c.signingKey, "signing-key", "", "signing key `file` (continuumctl keygen): checkpoints are signed")
	fs.StringVar(&c.chainKey, "chain-key", "", "`file` of the 32-byte key of a store written in keyed chain mode")
	fs.StringVar(&c.keyring, "keyring", "", "keyring `file` of an encrypted store (mode 0600, outside the store; see seal.ParseKeyringFile): a new store is created encrypted")
	fs.Var(&c.erasable, "erasable", "a memory `key` whose values are sealed with keys of their own, so that it can be erased; repeatable; needs --keyring")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.blockProfile, "block-profile", "", "write a profile of where goroutines waited (runtime/pprof \"block\", every wait of 10 µs or more sampled) to `file` at shutdown, for measuring")
	fs.StringVar(&c.mutexProfile, "mutex-profile", "", "write a profile of contended mutexes (runtime/pprof \"mutex\", one contention in 5 sampled) to `file` at shutdown, for measuring")
	fs.BoolVar(&c.h2c, "h2c", false, "also serve HTTP/2 without TLS (prior knowledge, RFC 9113 3.3) beside HTTP/1.1 on every listener without TLS")
	fs.StringVar(&c.cpuProfile, "cpu-profile", "", "write a CPU profile (runtime/pprof; go tool pprof reads it) of the server's whole life to `file`, for measuring")
	fs.IntVar(&c.blobThreshold, "blob-threshold", 0, "keep every value of a delta and result of a call longer than `bytes` in a blob outside the log (engine.Options.BlobThreshold; 0: inline); blobs stream over POST .../attempts/{attempt}/blobs and GET .../blobs/{hash}/{size}")
	fs.BoolVar(&c.unsafeNoSync, "unsafe-no-sync", false, "never fsync (the engine's NoSync): a machine crash loses acknowledged atoms; for benchmarks only")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() != 0:
		return nil, fmt.Errorf("unexpected arguments %q (every option is a flag)", fs.Args())
	case c.store == "":
		return nil, errors.New("--store is required")
	case c.noSocket && c.listen == "":
		return nil, errors.New("--no-socket needs --listen: the server must listen somewhere")
	case c.noSocket && c.socket != "":
		return nil, errors.New("--socket and --no-socket contradict each other")
	case c.listen != "" && c.tokenFile == "" && c.tokensFile == "":
		return nil, errors.New("--listen needs --token-file or --tokens: TCP is served only with bearer tokens")
	case (c.tlsCert == "") != (c.tlsKey == ""):
		return nil, errors.New("--tls-cert and --tls-key go together")
	case c.tlsCert != "" && c.listen == "":
		return nil, errors.New("--tls-cert is for --listen (the Unix socket needs no TLS)")
	case c.lease < 100*time.Millisecond || c.lease > c.maxLease:
		return nil, fmt.Errorf("--lease %v must be at least 100ms and at most --max-lease (%v)", c.lease, c.maxLease)
	case c.maxBody < 1<<10 || c.maxBody > 128<<20:
		return nil, fmt.Errorf("--max-body %d must be between 1 KiB and 128 MiB", c.maxBody)
	case c.bodyTimeout < 100*time.Millisecond:
		return nil, fmt.Errorf("--body-timeout %v must be at least 100ms", c.bodyTimeout)
	case c.maxConns < 1:
		return nil, fmt.Errorf("--max-conns %d must be at least 1", c.maxConns)
	case c.durability != "strict" && c.durability != "relaxed":
		return nil, fmt.Errorf("--durability %q: strict or relaxed", c.durability)
	case c.drain < 0:
		return nil, errors.New("--drain-timeout must not be negative")
	case c.blobThreshold < 0:
		return nil, errors.New("--blob-threshold must not be negative")
	case len(c.erasable) > 0 && c.keyring == "":
		return nil, errors.New("--erasable needs --keyring: only an encrypted store seals a memory key's values with keys of their own")
	}
	for _, k := range c.erasable {
		if k == "" || len(k) > engine.MaxMemoryKeyLen {
			return nil, fmt.Errorf("--erasable %q: a memory key of 1 to %d bytes", k, engine.MaxMemoryKeyLen)
		}
	}
	if c.listen != "" && c.tlsCert == "" && !c.insecurePlaintext {
		host, _, err := net.SplitHostPort(c.listen)
		if err != nil {
			return nil, fmt.Errorf("--listen %q: %v", c.listen, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, fmt.Errorf("--listen %q is not a loopback address: give --tls-cert and --tls-key (or --insecure-plaintext)", c.listen)
		}
	}
	if !c.noSocket && c.socket == "" {
		c.socket = filepath.Clean(c.store) + ".sock"
	}
	return c, nil
}

func run(args []string, stderr io.Writer) int {
	c, err := parseConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "continuumd: %v\n", err)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		fmt.Fprintf(stderr, "continuumd: --log-level %q: %v\n", c.logLevel, err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err := serve(c, log); err != nil {
		fmt.Fprintf(stderr, "continuumd: %v\n", err)
		return 1
	}
	return 0
}

// readSecretFile reads a token or key file, which must not be readable by
// others than its owner.
func readSecretFile(flagName, path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s %s is readable by others (mode %v): chmod 600 it", flagName, path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	return b, nil
}

func serve(c *config, log *slog.Logger) error {
	opts := &engine.Options{Logger: log, NoSync: c.unsafeNoSync}
	if c.unsafeNoSync {
		log.Warn("continuumd: --unsafe-no-sync: nothing is fsynced; a machine crash loses acknowledged atoms")
	}
	if c.durability == "relaxed" {
		opts.Durability = engine.Relaxed
	}
	cfg := serverConfig{
		dir: c.store, maxBody: c.maxBody, bodyTimeout: c.bodyTimeout, lease: c.lease, minLease: 100 * time.Millisecond, maxLease: c.maxLease,
		callWait: 20 * time.Second, retain: 10 * time.Minute, reapEvery: 50 * time.Millisecond,
	}
	if c.tokenFile != "" {
		b, err := readSecretFile("--token-file", c.tokenFile)
		if err != nil {
			return err
		}
		tok := strings.TrimSpace(string(b))
		if len(tok) < 16 || strings.ContainsAny(tok, " \t\r\n") {
			return fmt.Errorf("--token-file %s: the token must be one word of at least 16 characters (e.g. openssl rand -hex 32)", c.tokenFile)
		}
		cfg.token = []byte(tok)
	}
	if c.tokensFile != "" {
		b, err := readSecretFile("--tokens", c.tokensFile)
		if err != nil {
			return err
		}
		if cfg.tokens, err = parseTokens(b, c.tokensFile); err != nil {
			return fmt.Errorf("--tokens: %w", err)
		}
	}
	if c.signingKey != "" {
		b, err := readSecretFile("--signing-key", c.signingKey)
		if err != nil {
			return err
		}
		_, key, err := chain.ParseSigningKey(b)
		if err != nil {
			return fmt.Errorf("--signing-key %s: %w", c.signingKey, err)
		}
		opts.SigningKey = key
	}
	if c.chainKey != "" {
		b, err := readSecretFile("--chain-key", c.chainKey)
		if err != nil {
			return err
		}
		opts.ChainKey, cfg.chainKey = b, b
	}
	opts.BlobThreshold = c.blobThreshold
	if c.keyring != "" {
		b, err := readSecretFile("--keyring", c.keyring)
		if err != nil {
			return err
		}
		ring, err := seal.ParseKeyringFile(b)
		clear(b)
		if err != nil {
			return fmt.Errorf("--keyring %s: %w", c.keyring, err)
		}
		opts.Keyring, cfg.keyring = ring, ring
		opts.ErasableKeys = c.erasable
	}
	var tlsConf *tls.Config
	if c.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}

	// Listen first: a socket that cannot be served should fail before the
	// store is opened (and its lock taken).
	var listeners []net.Listener
	closeAll := func() {
		for _, l := range listeners {
			l.Close()
		}
	}
	if c.socket != "" {
		l, err := listenUnix(c.socket)
		if err != nil {
			return err
		}
		listeners = append(listeners, l)
	}
	if c.listen != "" {
		l, err := net.Listen("tcp", c.listen)
		if err != nil {
			closeAll()
			return fmt.Errorf("--listen %s: %w", c.listen, err)
		}
		if tlsConf != nil {
			l = tls.NewListener(l, tlsConf)
		}
		listeners = append(listeners, l)
	}

	if c.cpuProfile != "" {
		f, err := os.OpenFile(c.cpuProfile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			closeAll()
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				log.Error("continuumd: --cpu-profile", "err", err)
			}
		}()
	}
	for _, p := range []struct{ name, file string }{{"block", c.blockProfile}, {"mutex", c.mutexProfile}} {
		if p.file == "" {
			continue
		}
		f, err := os.OpenFile(p.file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			closeAll()
			return fmt.Errorf("--%s-profile: %w", p.name, err)
		}
		if p.name == "block" {
			runtime.SetBlockProfileRate(10_000)
		} else {
			runtime.SetMutexProfileFraction(5)
		}
		defer func() {
			err := pprof.Lookup(p.name).WriteTo(f, 0)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				log.Error("continuumd: --"+p.name+"-profile", "err", err)
			}
		}()
	}
	db, err := engine.Open(c.store, opts)
	if err != nil {
		closeAll()
		return err
	}
	srv := newServer(db, cfg, log)
	hs := srv.httpServer(log)
	if c.h2c {
		serveH2C(hs)
	}
	hs.Handler = withTLS(withView(srv, hs.Handler, listeners, opts.Keyring, tlsConf != nil))
	for i, l := range listeners {
		listeners[i] = srv.listen(hs, l, c.maxConns)
	}
	reapCtx, stopReap := context.WithCancel(context.Background())
	go srv.reap(reapCtx)

	errc := make(chan error, len(listeners))
	for _, l := range listeners {
		go func() {
			if err := hs.Serve(l); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serving %s: %w", l.Addr(), err)
			}
		}()
	}
	addrs := make([]string, len(listeners))
	for i, l := range listeners {
		addrs[i] = l.Addr().Network() + ":" + l.Addr().String()
	}
	log.Info("continuumd: serving", "store", c.store, "listen", strings.Join(addrs, " "), "store_id", db.StoreID(),
		"durability", c.durability, "lease", c.lease)

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	var serveErr error
	select {
	case sig := <-sigs:
		log.Info("continuumd: stopping", "signal", sig.String(), "drain_timeout", c.drain)
	case serveErr = <-errc:
		log.Error("continuumd: stopping", "err", serveErr)
	}
	err = shutdown(srv, hs, c.drain, sigs, log)
	stopReap()
	return errors.Join(serveErr, err)
}

// shutdown stops the server gracefully: no new connection or attempt,
// every request in progress answered (a commit that began lands and is
// acknowledged), then every open attempt abandoned without failing its
// atom (its calls waiting for an outcome are in doubt; the next server
// reports the atom interrupted), then the store closed (a final engine
// checkpoint: the next Open replays nothing). After drain, or at a second
// signal, connections still busy are closed instead.
func shutdown(srv *server, hs *http.Server, drain time.Duration, sigs <-chan os.Signal, log *slog.Logger) error {
	srv.draining.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	var once sync.Once
	go func() {
		select {
		case <-sigs:
			log.Warn("continuumd: second signal: closing busy connections now")
			once.Do(cancel)
		case <-ctx.Done():
		}
	}()
	var framesErr chan error
	if srv.frames != nil {
		framesErr = make(chan error, 1)
		go func() { framesErr <- srv.frames.shutdown(ctx) }()
	}
	if err := hs.Shutdown(ctx); err != nil {
		log.Warn("continuumd: requests still in progress at the drain timeout; closing their connections", "err", err)
		hs.Close()
	}
	if framesErr != nil {
		if err := <-framesErr; err != nil {
			log.Warn("continuumd: frames requests still in progress at the drain timeout; their connections were closed", "err", err)
		}
	}
	srv.abandonAll()
	srv.cancel()
	srv.rollbacks.Wait() // their waiting compensations end in doubt: the rollbacks stay pending
	if err := srv.db.Close(); err != nil {
		return fmt.Errorf("closing the store: %w", err)
	}
	log.Info("continuumd: stopped")
	return nil
}

// listenUnix listens on a Unix socket at path, created with mode 0600 (the
// process's umask is narrowed while it is made, so it is never more open).
// A socket file left by a server that died is replaced; one that a live
// server answers on, or a file that is not a socket, is not.
func listenUnix(path string) (net.Listener, error) {
	if len(path) > 100 {
		return nil, fmt.Errorf("--socket %s: the path is %d bytes, longer than a Unix socket address takes (about 100): choose a shorter one", path, len(path))
	}
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("--socket %s exists and is not a socket: remove it or choose another path", path)
		}
		conn, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			conn.Close()
			return nil, fmt.Errorf("--socket %s: another server is listening on it", path)
		}
		// Only a refused connection says nobody listens: a server whose
		// queue of connections is full (EAGAIN) or that is too slow to
		// accept is alive, and its socket is not to be removed.
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("--socket %s: a socket is there and whether a server listens on it cannot be told (%v): stop that server, or remove the socket if none runs", path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("--socket %s: removing the stale socket: %w", path, err)
		}
	}
	l, err := listenPrivate(path)
	if err != nil {
		return nil, fmt.Errorf("--socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("--socket %s: %w", path, err)
	}
	return l, nil
}
