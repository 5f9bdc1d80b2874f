package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/seal"
)

// serverConfig is what the server needs of the command line.
type serverConfig struct {
	dir      string // the store's directory (for Verify)
	fs       vfs.FS // the store's filesystem (nil: the operating system's)
	chainKey []byte // for Verify of a keyed store
	token    []byte // bearer token (an admin's); nil: no token needed (Unix socket only)
	// tokens are the scoped tokens of --tokens; nil: none.
	tokens *tokenSet
	// keyring opens an encrypted store's payloads for inspect (nil:
	// plaintext).
	keyring seal.Keyring
	maxBody int64 // request bodies larger than this are refused (413)
	// bodyTimeout is how long a request's body may take to arrive (408
	// beyond); 0: no limit.
	bodyTimeout time.Duration
	lease       time.Duration
	minLease    time.Duration
	maxLease    time.Duration
	// framesIdle closes a frames connection without a request in flight
	// that sent nothing for this long (0: framesIdle, as HTTP's idle
	// timeout).
	framesIdle time.Duration
	callWait   time.Duration // how long a request waits for a call to change before answering pending
	retain     time.Duration // how long finished attempts are kept to answer repeated requests
	reapEvery  time.Duration
}

// server serves one store over the protocol of openapi.json.
type server struct {
	db  *engine.DB
	cfg serverConfig
	log *slog.Logger
	// ctx is the server's lifetime: the engine calls of calls run under it,
	// not under a request's, so that a client that disconnects does not
	// cancel a Do halfway. Cancelled last, at shutdown.
	ctx    context.Context
	cancel context.CancelFunc

	draining atomic.Bool // shutdown began: no new attempt or run
	// rollbacks counts the engine's Rollback calls running: at shutdown,
	// once ctx is cancelled, their waiting compensations end in doubt and
	// the store is closed after them.
	rollbacks sync.WaitGroup

	authFails authFailures
	// scans holds one token per pass over the whole store running
	// (maxStoreScans, handlers_verify.go).
	scans chan struct{}

	// frames serves the listeners' frames connections (frames.go); nil
	// until listen.
	frames *framesServer

	// workers run the engine's Do of calls (which wait for the client's
	// outcome, so each needs a goroutine of its own).
	workers workers

	counters struct {
		begun, committed, failed, expired, takeovers, requests atomic.Int64
	}

	mu struct {
		sync.Mutex
		runs map[string]*runState
		// attempts maps every attempt's token to it: open ones, and
		// finished ones for cfg.retain, so that a repeated commit or fail
		// gets its answer.
		attempts map[string]*attempt
		// open is the set of attempts not ended yet, which the reaper
		// checks for a lapsed lease; done are the ended ones, in the
		// order they ended, which it forgets once retained long enough.
		// Neither walk touches the other set: a busy server retains many
		// more finished attempts than it has open ones.
		open map[*attempt]struct{}
		done []*attempt
		// known is the set of run ids the store holds, loaded once (the
		// engine's Run creates, so existence is asked here); nil until
		// first needed.
		known map[string]bool
		// gone is the set of run ids the store deleted (and erased): those
		// deleted before the server started, loaded with known, and those
		// it erased since. They answer run_deleted.
		gone map[string]bool
		// erasing holds the runs an erase request is erasing, each with a
		// channel closed when it is done: requests of the run wait for it,
		// so that none reads the run's state from the server's handle once
		// the engine has withdrawn it.
		erasing map[string]chan struct{}
	}
}

// runState is the server's side of one run: its engine handle, the
// attempt holding its lease, and what the last abandoned attempt left.
type runState struct {
	srv *server
	id  string
	run *engine.Run

	// beginMu orders begins of the run (takeover waits for the attempt it
	// abandons).
	beginMu sync.Mutex
	// handedOut: calls a client may still be executing (call.go).
	handedOut keySet

	mu struct {
		sync.Mutex
		cur *attempt // the latest attempt; it holds the lease while open
		// lastRequest and lastAttempt make begin idempotent: a begin that
		// repeats the request id of the last one gets its attempt back.
		lastRequest string
		lastAttempt *attempt
		// abandoned is the interrupted attempt of the seq after the last
		// committed one, reported to the next begin of that seq.
		abandoned *interruptedJSON
		// branches holds the latest attempt of each branch name.
		branches map[string]*attempt
		// rollback is the run's rollback running in this server, and
		// lastRollback the last one that stopped; compDoubt the in-doubt
		// compensation it stopped on, for POST .../rollback/resolve.
		rollback, lastRollback *rollbackJob
		compDoubt              *ledger.InDoubtError
	}
}

func newServer(db *engine.DB, cfg serverConfig, log *slog.Logger) *server {
	s := &server{db: db, cfg: cfg, log: log}
	s.workers.jobs = make(chan func())
	s.scans = make(chan struct{}, maxStoreScans)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.runs = map[string]*runState{}
	s.mu.attempts = map[string]*attempt{}
	s.mu.open = map[*attempt]struct{}{}
	s.mu.gone = map[string]bool{}
	s.mu.erasing = map[string]chan struct{}{}
	return s
}

// route is one endpoint of the protocol.
type route struct {
	method, pattern string
	handle          func(r *http.Request, body []byte) (int, any, *apiError)
	// need is the right a token needs (0: any token); on a pattern with
	// {run}, on that run.
	need right
}

func (s *server) routes() []route {
	return []route{
		{"GET", "/v1/health", s.handleHealth, 0},
		{"GET", "/v1/stats", s.handleStats, rightAdmin},
		{"POST", "/v1/verify", s.handleVerify, rightAdmin},
		{"GET", "/v1/runs", s.handleListRuns, rightRead},
		{"PUT", "/v1/runs/{run}", s.handleOpenRun, rightWrite},
		{"GET", "/v1/runs/{run}", s.handleRunInfo, rightRead},
		{"GET", "/v1/runs/{run}/state", s.handleState, rightRead},
		{"GET", "/v1/runs/{run}/atoms/{seq}", s.handleAtom, rightRead},
		{"GET", "/v1/runs/{run}/read", s.handleRead, rightRead},
		{"GET", "/v1/heads", s.handleHeads, rightRead},
		{"GET", "/v1/runs/{run}/interrupted", s.handleInterrupted, rightRead},
		{"POST", "/v1/runs/{run}/end", s.handleEnd, rightWrite},
		{"POST", "/v1/runs/{run}/fork", s.handleFork, rightRead},
		{"POST", "/v1/runs/{run}/erase", s.handleErase, rightErase},
		{"POST", "/v1/runs/{run}/delete", s.handleDelete, rightErase},
		{"POST", "/v1/runs/{run}/verify", s.handleRunVerify, rightRead},
		{"GET", "/v1/runs/{run}/inspect", s.handleRunInspect, rightRead},
		{"POST", "/v1/gc", s.handleGC, rightAdmin},
		{"POST", "/v1/runs/{run}/memory/{key}/erase", s.handleEraseKey, rightErase},
		{"POST", "/v1/runs/{run}/attempts", s.handleBegin, rightWrite},
		{"POST", "/v1/runs/{run}/branches", s.handleBranch, rightWrite},
		{"POST", "/v1/runs/{run}/rollback", s.handleRollback, rightWrite},
		{"GET", "/v1/runs/{run}/rollback", s.handlePendingRollback, rightRead},
		{"GET", "/v1/runs/{run}/diff", s.handleDiff, rightRead},
		{"POST", "/v1/runs/{run}/rollback/outcome", s.handleRollbackOutcome, rightWrite},
		{"POST", "/v1/runs/{run}/rollback/resolve", s.handleRollbackResolve, rightWrite},
		{"GET", "/v1/runs/{run}/attempts/{attempt}", s.handleAttempt, rightRead},
		{"POST", "/v1/runs/{run}/attempts/{attempt}/heartbeat", s.handleHeartbeat, rightWrite},
		{"POST", "/v1/runs/{run}/attempts/{attempt}/calls/{call}", s.handleCall, rightWrite},
		{"POST", "/v1/runs/{run}/attempts/{attempt}/calls/{call}/outcome", s.handleOutcome, rightWrite},
		{"POST", "/v1/runs/{run}/attempts/{attempt}/calls/{call}/resolve", s.handleResolve, rightWrite},
		{"POST", "/v1/runs/{run}/attempts/{attempt}/commit", s.handleCommit, rightWrite},
		{"POST", "/v1/runs/{run}/attempts/{attempt}/fail", s.handleFail, rightWrite},
		{"POST", "/v1/runs/{run}/attempts/{attempt}/send", s.handleSend, rightWrite},
		{"POST", "/v1/runs/{run}/attempts/{attempt}/receive", s.handleReceive, rightWrite},
		{"GET", "/v1/runs/{run}/inbox", s.handleInbox, rightRead},
		// waits, events and timers (handlers_waits.go); the events route's
		// need is 0: its handler checks the write or event right itself.
		{"POST", "/v1/runs/{run}/wait", s.handleDeclareWait, rightWrite},
		{"POST", "/v1/runs/{run}/sleep", s.handleSleep, rightWrite},
		{"GET", "/v1/runs/{run}/wait", s.handleGetWait, rightRead},
		{"POST", "/v1/runs/{run}/wait/cancel", s.handleCancelWait, rightWrite},
		{"POST", "/v1/runs/{run}/events", s.handleSendEvent, 0},
		{"GET", "/v1/runs/{run}/attempts/{attempt}/wait", s.handleAttemptWait, rightRead},
		{"GET", "/v1/ready", s.handleReady, rightRead},
		{"POST", "/v1/runs/{run}/attempts/{attempt}/streams/{stream}", s.handleAppend, rightWrite},
		{"GET", "/v1/runs/{run}/streams", s.handleStreams, rightRead},
		{"GET", "/v1/runs/{run}/streams/{stream}", s.handleReadStream, rightRead},
	}
}

// handler is the server's HTTP handler: routing, the bearer token, the
// body limit, JSON answers and errors, and a recover that turns a panic
// of a handler into a 500 instead of a dead connection.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	paths := http.NewServeMux() // the same patterns without methods: tells 405 from 404
	methods := map[string][]string{}
	// register routes pattern under method, and remembers the method for
	// the 405 of another one.
	register := func(method, pattern string, h http.Handler) {
		mux.Handle(method+" "+pattern, h)
		if methods[pattern] == nil {
			paths.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Allow", strings.Join(methods[pattern], ", "))
				writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Code: codeMethodNotAllowed,
					Message: fmt.Sprintf("%s %s: this endpoint takes %s", r.Method, r.URL.Path, strings.Join(methods[pattern], ", "))})
			})
		}
		methods[pattern] = append(methods[pattern], method)
	}
	for _, rt := range s.routes() {
		register(rt.method, rt.pattern, s.wrap(rt))
	}
	for _, rt := range s.streamRoutes() { // handlers_blob.go
		register(rt.method, rt.pattern, s.wrapStream(rt))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {

		if _, pattern := paths.Handler(r); pattern != "" {
			paths.ServeHTTP(w, r)
			return
		}
		writeError(w, notFound(codeRouteNotFound, "", "no endpoint %s %s (see openapi.json)", r.Method, r.URL.Path))
	})
	return s.authenticate(canonicalPaths(mux))
}

// canonicalPaths refuses CONNECT (which http.ServeMux answers in plain
// text) and a path that is not canonical (an unencoded ".."
// or ".", a doubled "/"), which http.ServeMux would answer with a
// redirect: a client of the protocol gets a JSON error instead, and never
// reaches another endpoint than the one it wrote. A run id or key that
// holds such segments is percent-encoded, as every path segment is.
func canonicalPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Code: codeMethodNotAllowed, Message: "CONNECT: the server is no proxy"})
			return
		}
		p := r.URL.EscapedPath()
		if p == "" || p[0] != '/' || path.Clean(p) != p && path.Clean(p)+"/" != p {
			writeError(w, &apiError{Status: http.StatusBadRequest, Code: codeBadRequest, Field: "path",
				Message: fmt.Sprintf("the path %q is not canonical (\".\", \"..\" or an empty segment): percent-encode a run id or key that holds them", p)})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// scopeKey is the context key of a request's token scope.
type scopeKey struct{}

// scopeOf is the scope of r's token (set by authenticate).
func scopeOf(r *http.Request) *scope {
	if sc, ok := r.Context().Value(scopeKey{}).(*scope); ok {
		return sc
	}
	return adminScope // a handler called without authenticate: tests, the fuzzer
}

func (s *server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc, aerr := s.authenticateRequest(r)
		if aerr != nil {
			writeAuthError(w, aerr)
			return
		}
		if sc != adminScope {
			r = r.WithContext(context.WithValue(r.Context(), scopeKey{}, sc))
		}
		next.ServeHTTP(w, r)
	})
}

func (s *server) wrap(rt route) http.Handler {
	h := rt.handle
	runScoped := strings.Contains(rt.pattern, "{run}")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sc := scopeOf(r); sc != adminScope && rt.need != 0 {
			var aerr *apiError
			if runScoped {
				aerr = sc.checkRun(rt.need, r.PathValue("run"), "run")
			} else if !sc.may(rt.need) {
				aerr = sc.forbidden("%s %s needs %s", r.Method, rt.pattern, rt.need)
			}
			if aerr != nil {
				writeError(w, aerr)
				return
			}
		}
		s.counters.requests.Add(1)
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("continuumd: handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				writeError(w, &apiError{Status: http.StatusInternalServerError, Code: codeInternal,
					Message: fmt.Sprintf("the server failed handling %s %s: %v", r.Method, r.URL.Path, p)})
			}
		}()
		var body []byte
		if r.Method != http.MethodGet {
			b, aerr := s.readBody(w, r)
			if aerr != nil {
				writeError(w, aerr)
				return
			}
			body = b
		}
		status, v, aerr := h(r, body)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		writeJSON(w, status, v)
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]any{"error": &apiError{Code: codeInternal, Message: "encoding the answer: " + err.Error()}})
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.Status, map[string]any{"error": e})
}

// runState returns the server's state of run id. With create, the run is
// opened or created (PUT); otherwise a run the store does not hold is
// run_not_found, and nothing is created.
func (s *server) runState(ctx context.Context, id string, create bool) (*runState, *apiError) {
	if aerr := s.waitErasure(ctx, id); aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	rs := s.mu.runs[id]
	s.mu.Unlock()
	if rs != nil {
		return rs, nil
	}
	if !create {
		known, err := s.knownRun(id)
		if err != nil {
			return nil, engineError(err, "")
		}
		if s.isGone(id) {
			return nil, &apiError{Status: http.StatusGone, Code: codeRunDeleted, Field: "run",
				Message: fmt.Sprintf("run %q was deleted: a deleted run's id is not served again", id)}
		}
		if !known {
			return nil, notFound(codeRunNotFound, "run", "the store has no run %q (PUT /v1/runs/{run} creates it)", id)
		}
	} else if s.draining.Load() {
		return nil, &apiError{Status: http.StatusServiceUnavailable, Code: codeShuttingDown, Message: "the server is shutting down"}
	}
	run, err := s.db.Run(ctx, id)
	if err != nil {
		return nil, engineError(err, "run")
	}
	rs = s.adopt(id, run)
	if rs == nil {
		return nil, &apiError{Status: http.StatusGone, Code: codeRunDeleted, Field: "run",
			Message: fmt.Sprintf("run %q was erased while the request was served", id)}
	}
	return rs, nil
}

// adopt returns the server's state of run id, whose engine handle is run,
// making it if this is the first request of the run; nil if the server
// erased the run meanwhile (the handle is stale).
func (s *server) adopt(id string, run *engine.Run) *runState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rs := s.mu.runs[id]; rs != nil {
		return rs
	}
	if s.mu.gone[id] {
		return nil
	}
	rs := &runState{srv: s, id: id, run: run}
	s.mu.runs[id] = rs
	if s.mu.known != nil {
		s.mu.known[id] = true
	}
	return rs
}

func (s *server) knownRun(id string) (bool, error) {
	s.mu.Lock()
	if s.mu.known != nil {
		ok := s.mu.known[id]
		s.mu.Unlock()
		return ok, nil
	}
	s.mu.Unlock()
	infos, err := s.db.Runs()
	if err != nil {
		return false, err
	}
	deleted, err := s.db.Deleted()
	if err != nil {
		return false, err
	}
	known := make(map[string]bool, len(infos))
	for _, info := range infos {
		known[info.ID] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.known == nil {
		s.mu.known = known
		for _, d := range deleted {
			s.mu.gone[d.ID] = true
		}
	}
	return s.mu.known[id], nil
}

// waitErasure waits while an erase request erases run id.
func (s *server) waitErasure(ctx context.Context, id string) *apiError {
	for {
		s.mu.Lock()
		ch := s.mu.erasing[id]
		s.mu.Unlock()
		if ch == nil {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return engineError(ctx.Err(), "")
		}
	}
}

// beginErasure marks run id as being erased (after waiting for another
// erase request of it); done removes the mark, after forget if the
// erasure succeeded.
func (s *server) beginErasure(ctx context.Context, id string) (done func(), aerr *apiError) {
	for {
		if aerr := s.waitErasure(ctx, id); aerr != nil {
			return nil, aerr
		}
		s.mu.Lock()
		if s.mu.erasing[id] == nil {
			ch := make(chan struct{})
			s.mu.erasing[id] = ch
			s.mu.Unlock()
			return func() {
				s.mu.Lock()
				delete(s.mu.erasing, id)
				s.mu.Unlock()
				close(ch)
			}, nil
		}
		s.mu.Unlock()
	}
}

// isGone reports whether the store deleted run id (knownRun loads what
// was deleted before the server started).
func (s *server) isGone(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.gone[id]
}

// forget drops run id, which the store erased, from the server's state:
// from here on it answers run_deleted.
func (s *server) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.runs, id)
	if s.mu.known != nil {
		delete(s.mu.known, id)
	}
	s.mu.gone[id] = true
}

// lease describes the attempt holding rs, or nil.
func (rs *runState) lease() *leaseJSON {
	rs.mu.Lock()
	a := rs.mu.cur
	rs.mu.Unlock()
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.state != attemptOpen {
		return nil
	}
	return &leaseJSON{Seq: a.seq, Expires: a.mu.expires.UTC()}
}

// noteAbandoned keeps what abandoned attempt a leaves for the next begin.
func (rs *runState) noteAbandoned(a *attempt, reason string) {
	intr := &interruptedJSON{Seq: a.seq, Reason: reason, Actions: a.interruptedActions()}
	rs.mu.Lock()
	rs.mu.abandoned = intr
	rs.mu.Unlock()
}
