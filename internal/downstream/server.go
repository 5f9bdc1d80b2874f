package downstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/continuumdb/continuum/internal/workload"
)

// MaxRequestBytes bounds the body of a call.
const MaxRequestBytes = 1 << 20

// Call is one call the server received.
type Call struct {
	Tool       string
	Args       []byte // the JSON arguments as sent
	Key        string
	Idempotent bool
	// Effect reports whether this call took effect (false for a repeated
	// idempotent call); Effects counts the effects under Key so far,
	// including this one.
	Effect  bool
	Effects int
	Result  []byte
}

// Options configure a Server. The zero value is valid.
type Options struct {
	// Result computes the result of a call that takes effect. Default:
	// workload.Downstream. It must be a pure function of its inputs for
	// runs to be deterministic.
	Result func(tool string, args []byte, key string) []byte
	// BeforeEffect, if set, is called for every call before it takes
	// effect. An error refuses the call (HTTP 503) with no effect.
	BeforeEffect func(c Call) error
	// AfterEffect, if set, is called for every call after its effect is
	// recorded and before the reply is sent.
	AfterEffect func(c Call)
}

// Effect is what the server recorded for one idempotency key.
type Effect struct {
	Key     string `json:"key"`
	Tool    string `json:"tool"`
	Effects int    `json:"effects"` // times the call took effect
	Calls   int    `json:"calls"`   // times the call was received
}

// ErrClosed is returned by a closed Server's methods that need it running.
var ErrClosed = errors.New("downstream: server closed")

// Server is the fake outside world. Its methods are safe for concurrent use.
type Server struct {
	opts Options
	ln   net.Listener
	srv  *http.Server
	done chan struct{} // closed when Serve returns
	err  error         // Serve's error, set before done is closed

	mu struct {
		sync.Mutex
		keys    map[string]*record // by idempotency key
		order   []*record          // in the order keys were first called
		history []Call             // every call, in order
	}
}

type record struct {
	Effect
	result []byte // result of the first effect; nil while none
}

// Start listens on 127.0.0.1 on a port the kernel picks and serves in the
// background until Close.
func Start(opts *Options) (*Server, error) {
	s := &Server{done: make(chan struct{})}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Result == nil {
		s.opts.Result = workload.Downstream
	}
	s.mu.keys = map[string]*record{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("downstream: listen on 127.0.0.1: %w", err)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s.Handler()}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.err = err
		}
	}()
	return s, nil
}

// URL returns the server's base URL, e.g. "http://127.0.0.1:40123".
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server at once (open connections are closed) and returns
// the error that stopped serving, if any. The recorded effects stay
// readable.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	if err == nil {
		err = s.err
	}
	return err
}

// Handler returns the HTTP handler of the protocol in the package doc, so
// that it can also be mounted elsewhere (httptest, a mux).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /call", s.handleCall)
	mux.HandleFunc("GET /lookup", s.handleLookup)
	mux.HandleFunc("GET /effects", s.handleEffects)
	return mux
}

// callRequest is the body of POST /call.
type callRequest struct {
	Tool       string          `json:"tool"`
	Args       json.RawMessage `json:"args"`
	Key        string          `json:"key"`
	Idempotent bool            `json:"idempotent"`
}

func (s *Server) handleCall(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	if err != nil {
		http.Error(w, "downstream: reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > MaxRequestBytes {
		http.Error(w, fmt.Sprintf("downstream: request larger than %d bytes", MaxRequestBytes), http.StatusRequestEntityTooLarge)
		return
	}
	var req callRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "downstream: bad call request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if req.Tool == "" || req.Key == "" {
		http.Error(w, "downstream: a call needs a tool and a key", http.StatusBadRequest)
		return
	}
	c, err := s.Do(req.Tool, req.Args, req.Key, req.Idempotent)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(c.Result)
}

// Do performs one call as if it came over HTTP, hooks included, and returns
// what was recorded.
func (s *Server) Do(tool string, args []byte, key string, idempotent bool) (Call, error) {
	c := Call{Tool: tool, Args: append([]byte(nil), args...), Key: key, Idempotent: idempotent}
	if s.opts.BeforeEffect != nil {
		if err := s.opts.BeforeEffect(c); err != nil {
			return Call{}, fmt.Errorf("downstream: call %s (key %q) refused: %w", tool, key, err)
		}
	}
	s.mu.Lock()
	rec := s.mu.keys[key]
	if rec == nil {
		rec = &record{Effect: Effect{Key: key, Tool: tool}}
		s.mu.keys[key] = rec
		s.mu.order = append(s.mu.order, rec)
	}
	rec.Calls++
	if rec.result != nil && idempotent {
		c.Result = rec.result
	} else {
		c.Result = s.opts.Result(tool, args, key)
		c.Effect = true
		rec.Effects++
		if rec.result == nil {
			rec.result = c.Result
		}
	}
	c.Effects = rec.Effects
	s.mu.history = append(s.mu.history, c)
	s.mu.Unlock()
	if s.opts.AfterEffect != nil {
		s.opts.AfterEffect(c)
	}
	return c, nil
}

func (s *Server) handleLookup(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	if key == "" {
		http.Error(w, "downstream: lookup needs ?key=", http.StatusBadRequest)
		return
	}
	res, ok := s.Lookup(key)
	if !ok {
		http.Error(w, fmt.Sprintf("downstream: no call under key %q took effect", key), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(res)
}

func (s *Server) handleEffects(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(struct {
		Effects []Effect `json:"effects"`
	}{s.Effects()})
}

// Lookup returns the result of the first effect under key, if any call
// under it took effect. The caller owns the result.
func (s *Server) Lookup(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.mu.keys[key]
	if rec == nil || rec.result == nil {
		return nil, false
	}
	return append([]byte(nil), rec.result...), true
}

// Effects returns the effects recorded per key, in the order keys were
// first called.
func (s *Server) Effects() []Effect {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Effect, len(s.mu.order))
	for i, r := range s.mu.order {
		out[i] = r.Effect
	}
	return out
}

// History returns every call received, in order. The slice is the
// caller's; the byte slices in it are shared and must not be modified.
func (s *Server) History() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.mu.history...)
}
