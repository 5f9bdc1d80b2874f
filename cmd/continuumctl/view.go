package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/webview"
)

const viewUsage = "view DIR [--listen ADDR] [--keyring FILE] [--allow-remote]"

const viewAbout = `View serves a read-only web view of the store in DIR and prints its URL:
the runs (filter, pages), a run's timeline (atoms, actions and outcomes,
messages as a chat with their tool calls, branches, rollbacks, messages
between runs), the frame at any seq with a slider and what changed between
two seqs, the lineage of forks and the branch DAG, a run's ledger (in doubt,
resolved, compensated) and verify's result. A page of a run that commits
updates in place.

It reads the store as inspect does: no lock, nothing written, beside a live
agent. It listens on loopback (127.0.0.1) unless --allow-remote; the URL it
prints carries a one-time token, exchanged on first use for a session
cookie: open it in one browser. An encrypted store needs --keyring (the
view says so without it); erased values are shown as "erased", never.
Every asset is embedded: the page loads nothing from the network.
It serves until interrupted (Ctrl-C). Exit 2 on a usage or I/O error.`

const viewExamples = `  continuumctl view ./agent-store
  continuumctl view ./agent-store --listen 127.0.0.1:9000 --keyring ./agent.keyring`

func runWebView(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serveView(ctx, args, stdout, stderr)
}

// serveView is view until ctx is done.
func serveView(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := ctl.Flags("view", viewUsage, viewAbout, viewExamples, stderr)
	keyring := keyringFlag(fs)
	listen := fs.String("listen", "127.0.0.1:8765", "serve on `host:port` (port 0: any free port)")
	remote := fs.Bool("allow-remote", false, "allow a --listen address that is not loopback (anyone who can reach it and has the URL sees the store)")
	pos, code, ok := cli.ParseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return cli.UsageErr(fs, stderr, "want DIR, got %d arguments", len(pos))
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return cli.UsageErr(fs, stderr, "--listen %q: %v", *listen, err)
	}
	if !webview.IsLoopback(host) && !*remote {
		return cli.UsageErr(fs, stderr, "--listen %q is not a loopback address: add --allow-remote to serve it beyond this machine", *listen)
	}
	ring, err := readKeyring(*keyring)
	if err != nil {
		return ctl.Fail(stderr, "view", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	v, err := webview.New(webview.Options{Dir: pos[0], Keyring: ring, Log: log})
	if err != nil {
		return ctl.Fail(stderr, "view", err)
	}
	defer v.Close()
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return ctl.Fail(stderr, "view", fmt.Errorf("--listen %s: %w", *listen, err))
	}
	hs := &http.Server{Handler: v, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext: func(net.Listener) context.Context { return ctx }}
	fmt.Fprintf(stdout, "continuumctl view: serving %s read-only; open (the token works once):\n  %s\n",
		pos[0], v.LoginURL("http://"+browsable(l.Addr())))
	if a, ok := l.Addr().(*net.TCPAddr); ok && a.IP.IsUnspecified() {
		fmt.Fprintf(stdout, "  (it listens on every interface: from another machine, put this machine's name or address in place of %s)\n", hostOf(browsable(l.Addr())))
	}
	if f, ok := stdout.(*os.File); ok {
		f.Sync()
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		hs.Shutdown(sctx) // event streams end with ctx, through BaseContext
		cancel()
		err = <-errc
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return ctl.Fail(stderr, "view", err)
	}
	return cli.ExitOK
}

// browsable is addr as a browser opens it: a listener on every interface
// (0.0.0.0, [::]) is named by its loopback address (127.0.0.1, [::1]),
// which a browser on this machine opens, where the wildcard opens nothing.
func browsable(addr net.Addr) string {
	a, ok := addr.(*net.TCPAddr)
	if !ok || !a.IP.IsUnspecified() {
		return addr.String()
	}
	ip := net.IPv6loopback // [::]: its loopback
	if a.IP.To4() != nil {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(a.Port))
}

// hostOf is the host of a host:port.
func hostOf(hostport string) string {
	h, _, _ := net.SplitHostPort(hostport)
	return h
}
