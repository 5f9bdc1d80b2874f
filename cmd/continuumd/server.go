package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
)

// serverConfig is what the server needs of the command line.
type serverConfig struct {
	dir       string // the store's directory (for Verify)
	fs        vfs.FS // the store's filesystem (nil: the operating system's)
	chainKey  []byte // for Verify of a keyed store
	token     []byte // bearer token; nil: no token needed (Unix socket only)
	maxBody   int64  // request bodies larger than this are refused (413)
	lease     time.Duration
	minLease  time.Duration
	maxLease  time.Duration
	callWait  time.Duration // how long a request waits for a call to change before answering pending
	retain    time.Duration // how long finished attempts are kept to answer repeated requests
	reapEvery time.Duration
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
		// known is the set of run ids the store holds, loaded once (the
		// engine's Run creates, so existence is asked here); nil until
		// first needed.
		known map[string]bool
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
	}
}

func newServer(db *engine.DB, cfg serverConfig, log *slog.Logger) *server {
	s := &server{db: db, cfg: cfg, log: log}
	s.workers.jobs = make(chan func())
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.runs = map[string]*runState{}
	s.mu.attempts = map[string]*attempt{}
	return s
}

// route is one endpoint of the protocol.
type route struct {
	method, pattern string
	handle          func(r *http.Request, body []byte) (int, any, *apiError)
}

func (s *server) routes() []route {
	return []route{
		{"GET", "/v1/health", s.handleHealth},
		{"GET", "/v1/stats", s.handleStats},
		{"POST", "/v1/verify", s.handleVerify},
		{"GET", "/v1/runs", s.handleListRuns},
		{"PUT", "/v1/runs/{run}", s.handleOpenRun},
		{"GET", "/v1/runs/{run}", s.handleRunInfo},
		{"GET", "/v1/runs/{run}/state", s.handleState},
		{"GET", "/v1/runs/{run}/atoms/{seq}", s.handleAtom},
		{"GET", "/v1/runs/{run}/interrupted", s.handleInterrupted},
		{"POST", "/v1/runs/{run}/end", s.handleEnd},
		{"POST", "/v1/runs/{run}/fork", s.handleFork},
		{"POST", "/v1/runs/{run}/attempts", s.handleBegin},
		{"GET", "/v1/runs/{run}/attempts/{attempt}", s.handleAttempt},
		{"POST", "/v1/runs/{run}/attempts/{attempt}/heartbeat", s.handleHeartbeat},
		{"POST", "/v1/runs/{run}/attempts/{attempt}/calls/{call}", s.handleCall},
		{"POST", "/v1/runs/{run}/attempts/{attempt}/calls/{call}/outcome", s.handleOutcome},
		{"POST", "/v1/runs/{run}/attempts/{attempt}/calls/{call}/resolve", s.handleResolve},
		{"POST", "/v1/runs/{run}/attempts/{attempt}/commit", s.handleCommit},
		{"POST", "/v1/runs/{run}/attempts/{attempt}/fail", s.handleFail},
	}
}

// handler is the server's HTTP handler: routing, the bearer token, the
// body limit, JSON answers and errors, and a recover that turns a panic
// of a handler into a 500 instead of a dead connection.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	paths := http.NewServeMux() // the same patterns without methods: tells 405 from 404
	methods := map[string][]string{}
	for _, rt := range s.routes() {
		mux.Handle(rt.method+" "+rt.pattern, s.wrap(rt.handle))
		if methods[rt.pattern] == nil {
			pattern := rt.pattern
			paths.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Allow", strings.Join(methods[pattern], ", "))
				writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Code: codeMethodNotAllowed,
					Message: fmt.Sprintf("%s %s: this endpoint takes %s", r.Method, r.URL.Path, strings.Join(methods[pattern], ", "))})
			})
		}
		methods[rt.pattern] = append(methods[rt.pattern], rt.method)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := paths.Handler(r); pattern != "" {
			paths.ServeHTTP(w, r)
			return
		}
		writeError(w, notFound(codeRouteNotFound, "", "no endpoint %s %s (see openapi.json)", r.Method, r.URL.Path))
	})
	return s.authenticate(mux)
}

func (s *server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.token != nil {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), s.cfg.token) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="continuumd"`)
				msg := "this server needs a bearer token: Authorization: Bearer TOKEN"
				if ok {
					msg = "the bearer token is not this server's"
				}
				writeError(w, &apiError{Status: http.StatusUnauthorized, Code: codeUnauthorized, Message: msg})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (s *server) wrap(h func(r *http.Request, body []byte) (int, any, *apiError)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
			b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.maxBody))
			var mbe *http.MaxBytesError
			switch {
			case errors.As(err, &mbe):
				writeError(w, &apiError{Status: http.StatusRequestEntityTooLarge, Code: codeTooLarge,
					Message: fmt.Sprintf("the request body is larger than %d bytes (the server's --max-body)", mbe.Limit)})
				return
			case err != nil:
				writeError(w, badRequest("", "reading the request body: %v", err))
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
	return s.adopt(id, run), nil
}

// adopt returns the server's state of run id, whose engine handle is run,
// making it if this is the first request of the run.
func (s *server) adopt(id string, run *engine.Run) *runState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rs := s.mu.runs[id]; rs != nil {
		return rs
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
	known := make(map[string]bool, len(infos))
	for _, info := range infos {
		known[info.ID] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.known == nil {
		s.mu.known = known
	}
	return s.mu.known[id], nil
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

func (s *server) handleHealth(r *http.Request, _ []byte) (int, any, *apiError) {
	return 200, map[string]any{"ok": true, "protocol": "v1", "store": s.db.StoreID(), "origin": s.db.Origin(), "draining": s.draining.Load()}, nil
}

func (s *server) handleStats(r *http.Request, _ []byte) (int, any, *apiError) {
	st := s.db.Stats()
	s.mu.Lock()
	open := 0
	for _, a := range s.mu.attempts {
		a.mu.Lock()
		if a.mu.state == attemptOpen {
			open++
		}
		a.mu.Unlock()
	}
	s.mu.Unlock()
	bg := ""
	if st.Background != nil {
		bg = st.Background.Error()
	}
	return 200, map[string]any{
		"engine": map[string]any{
			"runs": st.Runs, "atoms": st.Atoms, "fails": st.Fails, "actions": st.Actions, "deduped": st.Deduped,
			"snapshots": st.Snapshots, "checkpoints": st.Checkpoints, "open_ms": float64(st.Open.Duration.Microseconds()) / 1000,
			"interrupted_at_open": st.Open.Interrupted, "background_error": bg,
		},
		"server": map[string]any{
			"attempts_open": open, "attempts_begun": s.counters.begun.Load(), "attempts_committed": s.counters.committed.Load(),
			"attempts_failed": s.counters.failed.Load(), "leases_expired": s.counters.expired.Load(),
			"takeovers": s.counters.takeovers.Load(), "requests": s.counters.requests.Load(),
		},
	}, nil
}

func (s *server) handleVerify(r *http.Request, body []byte) (int, any, *apiError) {
	var req verifyRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	opts := &engine.VerifyOptions{FS: s.cfg.fs, Deep: req.Deep, ChainKey: s.cfg.chainKey, UnsignedTail: req.UnsignedTail}
	if req.PublicKey != "" {
		origin, key, err := chain.ParsePublicKeyFile([]byte(req.PublicKey))
		if err != nil {
			return 0, nil, badRequest("public_key", "public_key is not a public key file: %v", err)
		}
		opts.PublicKey, opts.Origin = key, origin
	}
	rep, err := engine.Verify(r.Context(), s.cfg.dir, opts)
	if err != nil {
		return 0, nil, engineError(err, "")
	}
	return 200, rep, nil
}

func (s *server) handleListRuns(r *http.Request, _ []byte) (int, any, *apiError) {
	infos, err := s.db.Runs()
	if err != nil {
		return 0, nil, engineError(err, "")
	}
	s.mu.Lock()
	states := make(map[string]*runState, len(s.mu.runs))
	for id, rs := range s.mu.runs {
		states[id] = rs
	}
	s.mu.Unlock()
	out := make([]runJSON, 0, len(infos))
	for _, info := range infos {
		var lease *leaseJSON
		if rs := states[info.ID]; rs != nil {
			lease = rs.lease()
		}
		out = append(out, runInfoJSON(info, lease))
	}
	return 200, map[string]any{"runs": out}, nil
}

func (s *server) handleOpenRun(r *http.Request, body []byte) (int, any, *apiError) {
	var req struct{}
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), true)
	if aerr != nil {
		return 0, nil, aerr
	}
	return 200, runInfoJSON(rs.run.Info(), rs.lease()), nil
}

func (s *server) handleRunInfo(r *http.Request, _ []byte) (int, any, *apiError) {
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	return 200, runInfoJSON(rs.run.Info(), rs.lease()), nil
}

func (s *server) handleState(r *http.Request, _ []byte) (int, any, *apiError) {
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	seq := rs.run.LastSeq()
	if q := r.URL.Query(); q.Has("seq") {
		n, err := strconv.ParseUint(q.Get("seq"), 10, 64)
		if err != nil {
			return 0, nil, badRequest("seq", "seq must be a committed seq (a non-negative integer), not %q", q.Get("seq"))
		}
		seq = n
	}
	f, err := rs.run.StateAt(r.Context(), seq)
	if err != nil {
		return 0, nil, engineError(err, "seq")
	}
	return 200, frameJSON(rs.id, seq, f), nil
}

func (s *server) handleAtom(r *http.Request, _ []byte) (int, any, *apiError) {
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil || seq == 0 {
		return 0, nil, badRequest("seq", "seq must be a committed seq (1, 2, ...), not %q", r.PathValue("seq"))
	}
	info, err := rs.run.Atom(r.Context(), seq)
	if err != nil {
		return 0, nil, engineError(err, "seq")
	}
	return 200, atomJSON(info), nil
}

// interrupted reports the attempt of rs's next seq that ended without its
// client committing or failing it: the engine's interrupted atom (the
// server stopped while it ran) or the last abandoned attempt.
func (rs *runState) interrupted(ctx context.Context) (*interruptedJSON, error) {
	seq, acts, err := rs.run.Interrupted(ctx)
	if err != nil {
		return nil, err
	}
	if seq != 0 {
		out := &interruptedJSON{Seq: seq, Reason: "restart", Actions: make([]actionStateJSON, 0, len(acts))}
		for _, a := range acts {
			out.Actions = append(out.Actions, actionStateJSON{Index: a.Index, Fingerprint: a.Fingerprint.String(),
				Status: statusName(a.Status), Tool: a.Tool, Key: a.Key, Idempotent: a.Idempotent})
		}
		return out, nil
	}
	next := rs.run.LastSeq() + 1
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if ab := rs.mu.abandoned; ab != nil && ab.Seq == next {
		return ab, nil
	}
	return nil, nil
}

func (s *server) handleInterrupted(r *http.Request, _ []byte) (int, any, *apiError) {
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	intr, err := rs.interrupted(r.Context())
	if err != nil {
		return 0, nil, engineError(err, "")
	}
	return 200, map[string]any{"interrupted": intr}, nil
}

func (s *server) handleEnd(r *http.Request, body []byte) (int, any, *apiError) {
	var req endRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	st, ok := endStatuses[req.Status]
	if !ok {
		return 0, nil, badRequest("status", "status must be completed, failed or cancelled, not %q", req.Status)
	}
	result, _, aerr := pickBytes("result", req.Result, req.ResultBase64)
	if aerr != nil {
		return 0, nil, aerr
	}
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	// Begins wait while the run ends, so that none slips in between.
	rs.beginMu.Lock()
	defer rs.beginMu.Unlock()
	if l := rs.lease(); l != nil {
		e := conflict(codeRunHeld, "run %q seq %d is held by an attempt until %s: commit or fail it before ending the run",
			rs.id, l.Seq, l.Expires.Format(time.RFC3339Nano))
		e.Details = map[string]any{"seq": l.Seq, "lease_expires": l.Expires}
		return 0, nil, e
	}
	if err := rs.run.End(s.ctx, st, result); err != nil {
		info := rs.run.Info()
		if errors.Is(err, engine.ErrRunEnded) && info.Status == st && bytes.Equal(info.Result, result) {
			return 200, runInfoJSON(info, nil), nil // a repeated end
		}
		return 0, nil, engineError(err, "result")
	}
	return 200, runInfoJSON(rs.run.Info(), nil), nil
}

func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return "att_" + hex.EncodeToString(b[:])
}

func (s *server) handleBegin(r *http.Request, body []byte) (int, any, *apiError) {
	var req beginRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	lease := s.cfg.lease
	if req.LeaseMS != 0 {
		lease = time.Duration(req.LeaseMS) * time.Millisecond
		if req.LeaseMS < 0 || lease < s.cfg.minLease || lease > s.cfg.maxLease {
			return 0, nil, badRequest("lease_ms", "lease_ms must be between %d and %d (0: the server's default, %d)",
				s.cfg.minLease.Milliseconds(), s.cfg.maxLease.Milliseconds(), s.cfg.lease.Milliseconds())
		}
	}
	if s.draining.Load() {
		return 0, nil, &apiError{Status: http.StatusServiceUnavailable, Code: codeShuttingDown, Message: "the server is shutting down: begin on the next one"}
	}
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	rs.beginMu.Lock()
	defer rs.beginMu.Unlock()

	rs.mu.Lock()
	cur := rs.mu.cur
	var last *attempt
	if req.RequestID != "" && req.RequestID == rs.mu.lastRequest {
		last = rs.mu.lastAttempt
	}
	rs.mu.Unlock()
	if last != nil {
		if resp, ok := last.beginAnswer(); ok {
			return 201, resp, nil // a repeated begin: the attempt it made, while open
		}
	}

	if cur != nil {
		cur.mu.Lock()
		open, closing, expires, seq := cur.mu.state == attemptOpen, cur.mu.closing, cur.mu.expires, cur.seq
		cur.mu.Unlock()
		switch {
		case open && closing:
			<-cur.ended // being abandoned already: wait for it
		case open && req.Takeover:
			s.counters.takeovers.Add(1)
			cur.abandon(s.ctx, "takeover", true)
		case open:
			e := conflict(codeRunHeld, "run %q seq %d is held by another attempt until %s (its lease); begin with takeover to abandon it",
				rs.id, seq, expires.UTC().Format(time.RFC3339Nano))
			e.Details = map[string]any{"seq": seq, "lease_expires": expires.UTC()}
			return 0, nil, e
		}
	}

	atom, err := rs.run.Begin(s.ctx)
	if err != nil {
		return 0, nil, engineError(err, "")
	}
	a := &attempt{token: newToken(), rs: rs, atom: atom, seq: atom.Seq(), lease: lease,
		abandonCh: make(chan struct{}), ended: make(chan struct{})}
	a.mu.expires = time.Now().Add(lease)

	var intr *interruptedJSON
	if atom.Interrupted() {
		intr, err = rs.interrupted(s.ctx)
		if err != nil {
			atom.Fail(context.WithoutCancel(s.ctx), "continuumd: could not read the interrupted atom: "+err.Error())
			return 0, nil, engineError(err, "")
		}
	}
	rs.mu.Lock()
	if ab := rs.mu.abandoned; ab != nil {
		if ab.Seq == a.seq && intr == nil {
			intr = ab
		}
		if ab.Seq != a.seq || intr != ab {
			rs.mu.abandoned = nil
		}
	}
	if intr != nil {
		a.inherited = append([]actionStateJSON(nil), intr.Actions...)
	}
	rs.mu.cur = a
	rs.mu.lastRequest, rs.mu.lastAttempt = req.RequestID, a
	a.interrupted = intr
	rs.mu.Unlock()

	s.mu.Lock()
	s.mu.attempts[a.token] = a
	s.mu.Unlock()
	s.counters.begun.Add(1)
	resp, _ := a.beginAnswer()
	return 201, resp, nil
}

// beginAnswer is the answer to the begin that made a, while it is open.
func (a *attempt) beginAnswer() (beginResponse, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.state != attemptOpen || a.mu.closing {
		return beginResponse{}, false
	}
	a.mu.expires = time.Now().Add(a.lease)
	return beginResponse{Attempt: a.token, Run: a.rs.id, Seq: a.seq, LeaseMS: a.lease.Milliseconds(),
		LeaseExpires: a.mu.expires.UTC(), Interrupted: a.interrupted}, true
}

// attemptOf finds the attempt a request names, which must be of its run.
func (s *server) attemptOf(r *http.Request) (*attempt, *apiError) {
	token, run := r.PathValue("attempt"), r.PathValue("run")
	s.mu.Lock()
	a := s.mu.attempts[token]
	s.mu.Unlock()
	if a == nil || a.rs.id != run {
		e := notFound(codeAttemptNotFound, "attempt", "run %q has no attempt %q: the server restarted since (begin again: the atom is reported interrupted), or the attempt finished long ago", run, token)
		return nil, e
	}
	return a, nil
}

func (s *server) handleAttempt(r *http.Request, _ []byte) (int, any, *apiError) {
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	return 200, a.describe(), nil
}

func (s *server) handleHeartbeat(r *http.Request, body []byte) (int, any, *apiError) {
	var req struct{}
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	if aerr := a.pin(true); aerr != nil {
		return 0, nil, aerr
	}
	a.unpin()
	return 200, a.describe(), nil
}

func callNumber(r *http.Request) (int, *apiError) {
	n, err := strconv.ParseUint(r.PathValue("call"), 10, 31)
	if err != nil {
		return 0, badRequest("call", "the call number must be 0, 1, 2, ..., not %q", r.PathValue("call"))
	}
	return int(n), nil
}

// existingCall finds call n of a for an outcome or a resolution.
func (a *attempt) existingCall(n int) (*call, *apiError) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n >= len(a.mu.calls) {
		return nil, notFound(codeCallNotFound, "call", "attempt %s has no call %d (it has %d)", a.token, n, len(a.mu.calls))
	}
	return a.mu.calls[n], nil
}

func (s *server) handleCall(r *http.Request, body []byte) (int, any, *apiError) {
	n, aerr := callNumber(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	var req callRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	if aerr := a.pin(false); aerr != nil {
		return 0, nil, aerr
	}
	defer a.unpin()
	c, aerr := a.callFor(n, &req)
	if aerr != nil {
		return 0, nil, aerr
	}
	a.waitCall(r.Context(), c, func(st callState) bool { return st == callStarting })
	return s.callAnswer(a, c)
}

// callAnswer answers with call c's state, or lease_lost if its attempt was
// abandoned meanwhile.
func (s *server) callAnswer(a *attempt, c *call) (int, any, *apiError) {
	a.mu.Lock()
	lost := a.mu.closing || a.mu.state == attemptAbandoned
	var e *apiError
	if lost {
		e = a.lostLocked()
	}
	a.mu.Unlock()
	if lost {
		return 0, nil, e
	}
	resp, aerr := a.answer(c)
	if aerr != nil {
		return 0, nil, aerr
	}
	return 200, resp, nil
}

func (s *server) handleOutcome(r *http.Request, body []byte) (int, any, *apiError) {
	n, aerr := callNumber(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	var req outcomeRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	result, hasResult, aerr := pickBytes("result", req.Result, req.ResultBase64)
	switch {
	case aerr != nil:
		return 0, nil, aerr
	case hasResult && req.Error != nil:
		return 0, nil, badRequest("error", "an outcome is a result or an error, not both")
	case !hasResult && req.Error == nil:
		return 0, nil, badRequest("result", "an outcome needs result (or result_base64), or error")
	case req.Error != nil && *req.Error == "":
		return 0, nil, badRequest("error", "error must say why the action did not take effect")
	}
	o := outcome{result: result}
	if req.Error != nil {
		o.err = *req.Error
	}
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	if aerr := a.pin(false); aerr != nil {
		return 0, nil, aerr
	}
	defer a.unpin()
	c, aerr := a.existingCall(n)
	if aerr != nil {
		return 0, nil, aerr
	}
	if aerr := a.deliver(c, o); aerr != nil {
		return 0, nil, aerr
	}
	a.waitCall(r.Context(), c, func(st callState) bool { return st == callExecuting || st == callStarting })
	return s.callAnswer(a, c)
}

func (s *server) handleResolve(r *http.Request, body []byte) (int, any, *apiError) {
	n, aerr := callNumber(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	var req resolveRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	result, hasResult, aerr := pickBytes("result", req.Result, req.ResultBase64)
	switch {
	case aerr != nil:
		return 0, nil, aerr
	case hasResult && req.Failed != nil:
		return 0, nil, badRequest("failed", "a resolution is a result (the effect happened) or failed (it did not), not both")
	case !hasResult && req.Failed == nil:
		return 0, nil, badRequest("result", "a resolution needs result (or result_base64), or failed")
	case req.Failed != nil && *req.Failed == "":
		return 0, nil, badRequest("failed", "failed must say why the effect is known not to have happened")
	case req.Retry && req.Failed == nil:
		return 0, nil, badRequest("retry", "retry goes with failed: an action that happened is not executed again")
	}
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	if aerr := a.pin(false); aerr != nil {
		return 0, nil, aerr
	}
	defer a.unpin()
	c, aerr := a.existingCall(n)
	if aerr != nil {
		return 0, nil, aerr
	}
	reason := ""
	if req.Failed != nil {
		reason = *req.Failed
	}
	if aerr := a.resolve(s.ctx, c, result, hasResult, reason, req.Retry); aerr != nil {
		return 0, nil, aerr
	}
	a.waitCall(r.Context(), c, func(st callState) bool { return st == callStarting })
	return s.callAnswer(a, c)
}

func (s *server) handleCommit(r *http.Request, body []byte) (int, any, *apiError) {
	var req commitRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	if req.Delta == nil {
		return 0, nil, badRequest("delta", "delta is required: a list of ops ([] for none)")
	}
	d, aerr := decodeDelta(req.Delta)
	if aerr != nil {
		return 0, nil, aerr
	}
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	if done, ok := a.finished(attemptCommitted); ok {
		return 200, done, nil // a repeated commit
	}
	if aerr := a.pin(true); aerr != nil {
		return 0, nil, aerr
	}
	defer a.unpin()
	if busy := a.busyCalls(); len(busy) > 0 {
		e := conflict(codeCallsRunning, "calls %v of attempt %s are still executing: report their outcomes before committing", busy, a.token)
		e.Details = map[string]any{"calls": busy}
		return 0, nil, e
	}
	if err := a.atom.Commit(s.ctx, d); err != nil {
		return 0, nil, engineError(err, "delta")
	}
	head := hexHash(a.rs.run.Head())
	a.mu.Lock()
	a.mu.state, a.mu.head = attemptCommitted, head
	a.mu.Unlock()
	a.end()
	s.counters.committed.Add(1)
	resp, _ := a.finished(attemptCommitted)
	return 200, resp, nil
}

// finished returns the answer of a's commit or fail when a ended so.
func (a *attempt) finished(st attemptState) (any, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.state != st {
		return nil, false
	}
	if st == attemptCommitted {
		return commitResponse{Run: a.rs.id, Seq: a.seq, Head: a.mu.head}, true
	}
	return failResponse{Run: a.rs.id, Seq: a.seq, Reason: a.mu.reason}, true
}

func (s *server) handleFail(r *http.Request, body []byte) (int, any, *apiError) {
	var req failRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	if done, ok := a.finished(attemptFailed); ok {
		return 200, done, nil
	}
	if aerr := a.pin(true); aerr != nil {
		return 0, nil, aerr
	}
	defer a.unpin()
	if busy := a.busyCalls(); len(busy) > 0 {
		e := conflict(codeCallsRunning, "calls %v of attempt %s are still executing: report their outcomes before failing the atom", busy, a.token)
		e.Details = map[string]any{"calls": busy}
		return 0, nil, e
	}
	if err := a.atom.Fail(s.ctx, req.Reason); err != nil {
		return 0, nil, engineError(err, "")
	}
	a.mu.Lock()
	a.mu.state, a.mu.reason = attemptFailed, req.Reason
	a.mu.Unlock()
	a.end()
	s.counters.failed.Add(1)
	resp, _ := a.finished(attemptFailed)
	return 200, resp, nil
}

// reap abandons the attempts whose lease ran out and forgets finished
// ones older than cfg.retain. It runs until ctx ends.
func (s *server) reap(ctx context.Context) {
	t := time.NewTicker(s.cfg.reapEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.reapOnce(now)
		}
	}
}

func (s *server) reapOnce(now time.Time) {
	s.mu.Lock()
	var expired []*attempt
	for token, a := range s.mu.attempts {
		if a.expired(now) {
			expired = append(expired, a)
			continue
		}
		a.mu.Lock()
		old := a.mu.state != attemptOpen && !a.mu.closing && now.Sub(a.mu.expires) > s.cfg.retain
		a.mu.Unlock()
		if old {
			delete(s.mu.attempts, token)
		}
	}
	s.mu.Unlock()
	for _, a := range expired {
		s.counters.expired.Add(1)
		go a.abandon(s.ctx, "lease_expired", true)
	}
}

// abandonAll abandons every open attempt without failing its atom, for
// shutdown: their calls waiting for an outcome are left in doubt, and the
// engine reports their atoms as interrupted at the next Open.
func (s *server) abandonAll() {
	s.mu.Lock()
	var open []*attempt
	for _, a := range s.mu.attempts {
		a.mu.Lock()
		if a.mu.state == attemptOpen {
			open = append(open, a)
		}
		a.mu.Unlock()
	}
	s.mu.Unlock()
	sort.Slice(open, func(i, j int) bool { return open[i].token < open[j].token })
	var wg sync.WaitGroup
	for _, a := range open {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.abandon(s.ctx, "shutdown", false)
		}()
	}
	wg.Wait()
}
