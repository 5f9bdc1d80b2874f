package main

// Scoped bearer tokens: what a token may do (read, write, erase, admin)
// and to which runs (an id prefix), kept in a file of their hashes, and
// the rate limit on failed authentication.
//
// The tokens file (--tokens FILE, mode 0600) holds one token a line:
//
//	# NAME  HASH                 RIGHTS       RUNS
//	ci      sha256:9f86d081...   admin        *
//	agent7  sha256:60303ae2...   read,write   agent-7-
//
// NAME names the token in logs and errors (letters, digits, '-', '_',
// '.'); HASH is "sha256:" and the hex SHA-256 of the token; RIGHTS is a
// comma-separated list of read, write, erase, admin, event (event: send
// events to the runs, as an approver does, and nothing else); RUNS is "*" (every
// run) or the prefix every run id the token reaches starts with. Blank
// lines and lines starting with '#' are skipped. `continuumd token`
// makes a token: it prints it once and appends its line to the file.
//
// A token is a random 256-bit value, so one SHA-256 suffices to store it
// (a slow hash defends guessable passwords, which these are not): the
// file read by an attacker gives no token.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/durable"
)

// A right is what a token may do.
type right uint8

const (
	rightRead  right = 1 << iota // GETs of runs: info, state, atoms, attempts; the runs' list (of its runs)
	rightWrite                   // create runs, atoms (begin, calls, outcomes, commit, fail), end, fork
	rightErase                   // erase a run or a memory key of a run
	rightAdmin                   // the store: stats, verify; implies every right, on every run
	rightEvent                   // send events to runs (POST .../events, handlers_waits.go); write implies it
)

var rightNames = map[string]right{"read": rightRead, "write": rightWrite, "erase": rightErase, "admin": rightAdmin, "event": rightEvent}

func (r right) String() string {
	var names []string
	for _, n := range []string{"read", "write", "erase", "admin", "event"} {
		if r&rightNames[n] != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, ",")
}

// scope is one token's: its name, rights and runs.
type scope struct {
	name   string
	rights right
	all    bool   // every run
	prefix string // else: the runs whose id starts with it
}

// adminScope is the scope of --token-file's single token and of a socket
// without tokens.
var adminScope = &scope{name: "admin", rights: rightRead | rightWrite | rightErase | rightAdmin, all: true}

// may reports whether s has right want (admin has all).
func (s *scope) may(want right) bool { return s.rights&rightAdmin != 0 || s.rights&want == want }

// covers reports whether s reaches run id.
func (s *scope) covers(id string) bool { return s.all || strings.HasPrefix(id, s.prefix) }

func (s *scope) runs() string {
	if s.all {
		return "every run"
	}
	return fmt.Sprintf("the runs whose id starts with %q", s.prefix)
}

// forbidden is the answer to a request its token's scope does not allow.
func (s *scope) forbidden(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusForbidden, Code: codeForbidden,
		Message: fmt.Sprintf("token %q (%s on %s): ", s.name, s.rights, s.runs()) + fmt.Sprintf(format, args...)}
}

// checkRun answers forbidden unless s may do want on run id.
func (s *scope) checkRun(want right, id, field string) *apiError {
	if s.may(want) && s.covers(id) {
		return nil
	}
	e := s.forbidden("it may not %s run %q", want, id)
	e.Field = field
	return e
}

// tokenSet is the server's tokens: their hashes and scopes.
type tokenSet struct {
	byHash map[[sha256.Size]byte]*scope
}

var tokenNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// parseTokens reads a tokens file (the format above); where names the file
// in errors.
func parseTokens(b []byte, where string) (*tokenSet, error) {
	ts := &tokenSet{byHash: map[[sha256.Size]byte]*scope{}}
	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 4 {
			return nil, fmt.Errorf("%s:%d: %d fields, want 4: NAME sha256:HEX RIGHTS RUNS", where, n, len(f))
		}
		sc, h, err := parseTokenLine(f)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", where, n, err)
		}
		if names[sc.name] {
			return nil, fmt.Errorf("%s:%d: token name %q is given twice", where, n, sc.name)
		}
		if ts.byHash[h] != nil {
			return nil, fmt.Errorf("%s:%d: token %q has the hash of token %q", where, n, sc.name, ts.byHash[h].name)
		}
		names[sc.name] = true
		ts.byHash[h] = sc
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if len(ts.byHash) == 0 {
		return nil, fmt.Errorf("%s holds no token (continuumd token makes one)", where)
	}
	return ts, nil
}

func parseTokenLine(f []string) (*scope, [sha256.Size]byte, error) {
	var h [sha256.Size]byte
	if !tokenNameRE.MatchString(f[0]) {
		return nil, h, fmt.Errorf("token name %q: 1 to 64 letters, digits, '.', '_' or '-'", f[0])
	}
	hx, ok := strings.CutPrefix(f[1], "sha256:")
	if !ok {
		return nil, h, fmt.Errorf("token %q: the hash %q does not start with sha256:", f[0], f[1])
	}
	raw, err := hex.DecodeString(hx)
	if err != nil || len(raw) != sha256.Size {
		return nil, h, fmt.Errorf("token %q: the hash is not 64 hex digits", f[0])
	}
	copy(h[:], raw)
	s := &scope{name: f[0]}
	for _, r := range strings.Split(f[2], ",") {
		bit, ok := rightNames[r]
		if !ok {
			return nil, h, fmt.Errorf("token %q: unknown right %q (read, write, erase, admin, event)", f[0], r)
		}
		s.rights |= bit
	}
	switch {
	case f[3] == "*":
		s.all = true
	case strings.Contains(f[3], "*"):
		return nil, h, fmt.Errorf("token %q: runs %q: \"*\" alone (every run) or a prefix of run ids without '*'", f[0], f[3])
	default:
		s.prefix = f[3]
	}
	if s.rights&rightAdmin != 0 && !s.all {
		return nil, h, fmt.Errorf("token %q: admin reaches the whole store: its runs must be \"*\"", f[0])
	}
	return s, h, nil
}

// lookup returns the scope of token tok, or nil. Only the token's hash
// is looked up: the time taken tells nothing of the tokens' values.
func (ts *tokenSet) lookup(tok string) *scope {
	h := sha256.Sum256([]byte(tok))
	return ts.byHash[h]
}

// authFailures rate-limits failed authentication per client address (the
// IP on TCP; every client of the Unix socket is one): each address has a
// bucket of authBurst failures, refilled at one per authRefill; while it
// is empty every request from the address is answered 429
// auth_rate_limited without its token being looked at, so that guessing
// goes no faster than the refill.
type authFailures struct {
	mu      sync.Mutex
	buckets map[string]*authBucket
}

type authBucket struct {
	tokens float64
	at     time.Time
}

const (
	authBurst   = 20
	authRefill  = time.Second
	authBuckets = 1 << 14 // addresses tracked at most; past it, one is forgotten (its bucket refilled)
)

// level refills addr's bucket to now and returns it (nil if it is full,
// which is not stored).
func (f *authFailures) level(addr string, now time.Time) *authBucket {
	b := f.buckets[addr]
	if b == nil {
		return nil
	}
	b.tokens += float64(now.Sub(b.at)) / float64(authRefill)
	b.at = now
	if b.tokens >= authBurst {
		delete(f.buckets, addr)
		return nil
	}
	return b
}

// blocked reports whether addr has no failure left, and when it has one.
func (f *authFailures) blocked(addr string, now time.Time) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.level(addr, now)
	if b == nil || b.tokens >= 1 {
		return 0, false
	}
	return time.Duration((1 - b.tokens) * float64(authRefill)), true
}

// check answers 429 auth_rate_limited if addr has no failure left.
func (f *authFailures) check(addr string, now time.Time) *apiError {
	wait, blocked := f.blocked(addr, now)
	if !blocked {
		return nil
	}
	e := &apiError{Status: http.StatusTooManyRequests, Code: codeAuthRateLimited,
		Message: fmt.Sprintf("too many requests with a wrong or missing token from %s: retry in %v", addr, wait.Round(time.Millisecond))}
	e.Details = map[string]any{"retry_after_ms": wait.Milliseconds() + 1}
	return e
}

// writeAuthError answers a failed authentication: 401 with the scheme
// the server takes, 429 with when to retry.
func writeAuthError(w http.ResponseWriter, aerr *apiError) {
	if aerr.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="continuumd"`)
	} else if ms, ok := aerr.Details["retry_after_ms"].(int64); ok {
		w.Header().Set("Retry-After", strconv.FormatInt((ms+999)/1000, 10))
	}
	writeError(w, aerr)
}

// fail takes one failure from addr's bucket.
func (f *authFailures) fail(addr string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.buckets == nil {
		f.buckets = map[string]*authBucket{}
	}
	b := f.level(addr, now)
	if b == nil {
		if len(f.buckets) >= authBuckets {
			for a := range f.buckets { // the map is full: forget one address
				delete(f.buckets, a)
				break
			}
		}
		b = &authBucket{tokens: authBurst, at: now}
		f.buckets[addr] = b
	}
	b.tokens--
}

// clientAddr is the address failures are counted under.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil || host == "" {
		return "unix"
	}
	return host
}

// authenticate finds the scope of r's bearer token: adminScope when the
// server needs no token, nil and the answer when it is missing or wrong.
func (s *server) authenticateRequest(r *http.Request) (*scope, *apiError) {
	if s.cfg.token == nil && s.cfg.tokens == nil {
		return adminScope, nil
	}
	addr, now := clientAddr(r), time.Now()
	if aerr := s.authFails.check(addr, now); aerr != nil {
		return nil, aerr
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	got = strings.TrimSpace(got)
	if ok {
		if s.cfg.token != nil && subtle.ConstantTimeCompare([]byte(got), s.cfg.token) == 1 {
			return adminScope, nil
		}
		if s.cfg.tokens != nil {
			if sc := s.cfg.tokens.lookup(got); sc != nil {
				return sc, nil
			}
		}
	}
	s.authFails.fail(addr, now)
	msg := "this server needs a bearer token: Authorization: Bearer TOKEN"
	if ok {
		msg = "the bearer token is not one of this server's"
	}
	return nil, &apiError{Status: http.StatusUnauthorized, Code: codeUnauthorized, Message: msg}
}

// newTokenValue is a new random token.
func newTokenValue() string {
	var b [32]byte
	rand.Read(b[:])
	return "cdt_" + hex.EncodeToString(b[:])
}

const tokenUsage = `continuumd token makes a scoped bearer token: it prints the token (once:
only its hash is kept) and appends its line to the tokens file.

Usage:
  continuumd token --tokens FILE --name NAME --rights read,write[,erase|admin] | event [--runs PREFIX]

Flags:
`

// runTokenCommand is `continuumd token`.
func runTokenCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("continuumd token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("tokens", "", "the tokens `file` (created mode 0600 if missing)")
	name := fs.String("name", "", "the token's `name`, for logs and errors")
	rights := fs.String("rights", "", "what it may do: a comma-separated `list` of read, write, erase, admin, event")
	runs := fs.String("runs", "*", "the `prefix` of the run ids it reaches, or * for every run")
	fs.Usage = func() {
		fmt.Fprint(stderr, tokenUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "continuumd token: "+format+"\n", a...)
		return 2
	}
	if *file == "" || *name == "" || *rights == "" || fs.NArg() != 0 {
		return fail("--tokens, --name and --rights are required (and nothing else)")
	}
	tok := newTokenValue()
	h := sha256.Sum256([]byte(tok))
	line := fmt.Sprintf("%s sha256:%s %s %s\n", *name, hex.EncodeToString(h[:]), *rights, *runs)
	if _, _, err := parseTokenLine(strings.Fields(line)); err != nil {
		return fail("%v", err)
	}
	old, err := readSecretFile("--tokens", *file)
	created := errors.Is(err, os.ErrNotExist)
	switch {
	case created:
	case err != nil:
		return fail("%v", err)
	default:
		if _, err := parseTokens(append(old, line...), *file); err != nil {
			return fail("%v", err)
		}
	}
	f, err := os.OpenFile(*file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fail("%v", err)
	}
	if len(old) > 0 && old[len(old)-1] != '\n' {
		line = "\n" + line
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return fail("writing %s: %v", *file, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fail("syncing %s: %v", *file, err)
	}
	if err := f.Close(); err != nil {
		return fail("%v", err)
	}
	if created {
		if err := durable.SyncDir(vfs.Default, filepath.Dir(*file)); err != nil {
			return fail("%v", err)
		}
	}
	fmt.Fprintln(stdout, tok)
	fmt.Fprintf(stderr, "continuumd token: %s (%s on runs %s) added to %s; the server reads it at its next start\n", *name, *rights, *runs, *file)
	return 0
}
