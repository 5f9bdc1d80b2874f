package main

// Waits, events and timers over the wire (engine Run.Wait, Run.Sleep,
// Run.CurrentWait, Run.CancelWait, Run.WaitEnded, Atom.WaitOutcome,
// DB.SendEvent, DB.Ready, DB.ReadyChanged; docs/DESIGN.md, "Waits and
// timers"):
//
//	POST /v1/runs/{run}/wait {"name", "deadline" | "timeout_ms", "seq"}  engine Run.Wait: the run waits, after its last atom, for an event
//	POST /v1/runs/{run}/sleep {"until" | "duration_ms", "seq"}          engine Run.Sleep: a timer
//	GET  /v1/runs/{run}/wait[?wait_ms=N]                                the run's wait after its last atom ({"wait": null}: none); wait_ms: until it ends
//	POST /v1/runs/{run}/wait/cancel {}                                  engine Run.CancelWait
//	POST /v1/runs/{run}/events {"name", "sender", "payload" | "payload_base64"}  engine DB.SendEvent
//	GET  /v1/runs/{run}/attempts/{attempt}/wait                         engine Atom.WaitOutcome: the wait the attempt's atom follows, ended
//	GET  /v1/ready[?wait_ms=N&max=M]                                    engine DB.Ready, long-polled: the runs to resume
//
// An event is taken from anyone whose token reaches the run with the
// write right or the event right (tokens.go): an approver's token needs no
// more. The token's run scope filters the ready list.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/continuumdb/continuum/engine"
)

// The error codes of waits (errors.go holds the others; openapi.json's
// ErrorCode enum lists them all).
const (
	codeEventMismatch = "event_mismatch" // 409: the sender id has sent the run another event (another name or payload)
	codeWaitExists    = "wait_exists"    // 409: the run waits after its last atom already, for another event
	codeWaitNotFound  = "wait_not_found" // 404: the run has no wait after its last atom (cancel; an attempt's wait outcome)
	codeWaitNotEnded  = "wait_not_ended" // 409: the wait the attempt's atom follows has not ended
	codeInvalidTime   = "invalid_time"   // 400: a deadline or time that is not RFC 3339, or both a time and a duration
	waitLongPollLimit = "wait_ms"        // the query parameter of long polls
)

func init() {
	errorCodes = append(errorCodes, codeEventMismatch, codeWaitExists, codeWaitNotFound, codeWaitNotEnded, codeInvalidTime)
}

// waitRequest is the body of POST /v1/runs/{run}/wait.
type waitRequest struct {
	Name string `json:"name"`
	// Deadline is when the wait times out (RFC 3339); TimeoutMS, the same
	// counted from the server's clock now. Neither: no deadline.
	Deadline  *string `json:"deadline"`
	TimeoutMS *int64  `json:"timeout_ms"`
	// Seq, when set, is the run's last seq the caller expects the wait to
	// follow: another answers seq_mismatch and declares nothing.
	Seq *uint64 `json:"seq"`
}

// sleepRequest is the body of POST /v1/runs/{run}/sleep.
type sleepRequest struct {
	Until      *string `json:"until"`
	DurationMS *int64  `json:"duration_ms"`
	Seq        *uint64 `json:"seq"`
}

// eventRequest is the body of POST /v1/runs/{run}/events.
type eventRequest struct {
	Name          string  `json:"name"`
	Sender        string  `json:"sender"`
	Payload       *string `json:"payload"`
	PayloadBase64 *string `json:"payload_base64"`
}

// eventResponse is the answer to POST /v1/runs/{run}/events.
type eventResponse struct {
	Run       string `json:"run"`
	Name      string `json:"name"`
	Sender    string `json:"sender"`
	Duplicate bool   `json:"duplicate"`
	Delivered bool   `json:"delivered"`
}

// waitJSON is a run's wait (engine.Wait).
type waitJSON struct {
	Run      string     `json:"run"`
	Seq      uint64     `json:"seq"`
	Name     string     `json:"name"` // "": a sleep
	Declared string     `json:"declared"`
	Deadline *string    `json:"deadline"`
	Outcome  string     `json:"outcome"` // open, delivered, timed_out, cancelled
	Event    *eventJSON `json:"event"`
	Ended    *string    `json:"ended"`
}

// eventJSON is an event sent to a run (engine.Event).
type eventJSON struct {
	Run           string  `json:"run"`
	Name          string  `json:"name"`
	Sender        string  `json:"sender"`
	Seq           uint64  `json:"seq"`
	Sent          string  `json:"sent"`
	Payload       *string `json:"payload,omitempty"`
	PayloadBase64 *string `json:"payload_base64,omitempty"`
}

// readyResponse is the answer to GET /v1/ready.
type readyResponse struct {
	Ready []waitJSON `json:"ready"`
	// More: the list was cut at max.
	More bool `json:"more"`
}

func wireTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func outcomeName(o engine.WaitOutcome) string {
	switch o {
	case engine.WaitOpen:
		return "open"
	case engine.WaitDelivered:
		return "delivered"
	case engine.WaitTimedOut:
		return "timed_out"
	case engine.WaitCancelled:
		return "cancelled"
	}
	return o.String()
}

func waitToJSON(w engine.Wait) waitJSON {
	out := waitJSON{Run: w.Run, Seq: w.Seq, Name: w.Name, Declared: wireTime(w.Declared), Outcome: outcomeName(w.Outcome)}
	if !w.Deadline.IsZero() {
		d := wireTime(w.Deadline)
		out.Deadline = &d
	}
	if !w.Ended.IsZero() && w.Outcome != engine.WaitOpen {
		e := wireTime(w.Ended)
		out.Ended = &e
	}
	if e := w.Event; e != nil {
		ej := &eventJSON{Run: e.Run, Name: e.Name, Sender: e.Sender, Seq: e.Seq, Sent: wireTime(e.Sent)}
		ej.Payload, ej.PayloadBase64 = textOrBase64(e.Payload)
		out.Event = ej
	}
	return out
}

// waitError maps an error of the engine's waits to its answer; field is
// the request field it concerns.
func waitError(err error, field string) *apiError {
	switch {
	case errors.Is(err, engine.ErrEventMismatch):
		e := conflict(codeEventMismatch, "%v", err)
		e.Field = "sender"
		return e
	case errors.Is(err, engine.ErrWaitExists):
		e := conflict(codeWaitExists, "%v", err)
		e.Field = "name"
		return e
	case errors.Is(err, engine.ErrNoWait):
		return notFound(codeWaitNotFound, "", "%v", err)
	case errors.Is(err, engine.ErrWaitNotEnded):
		return conflict(codeWaitNotEnded, "%v", err)
	case errors.Is(err, engine.ErrNoRun):
		return notFound(codeRunNotFound, "run", "%v", err)
	}
	return engineError(err, field)
}

// parseWireTime parses an RFC 3339 time of field.
func parseWireTime(field, v string) (time.Time, *apiError) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, &apiError{Status: http.StatusBadRequest, Code: codeInvalidTime, Field: field,
			Message: fmt.Sprintf("%s %q is not an RFC 3339 time (2026-12-06T12:00:00Z): %v", field, v, err)}
	}
	return t, nil
}

// pickTime returns the time a request gives as an RFC 3339 time (tfield)
// or a count of milliseconds from now (dfield); neither: zero.
func pickTime(tfield string, t *string, dfield string, ms *int64) (time.Time, *apiError) {
	switch {
	case t != nil && ms != nil:
		return time.Time{}, &apiError{Status: http.StatusBadRequest, Code: codeInvalidTime, Field: dfield,
			Message: fmt.Sprintf("give %s or %s, not both", tfield, dfield)}
	case t != nil:
		return parseWireTime(tfield, *t)
	case ms != nil:
		if *ms < 0 || *ms > int64(100*365*24*time.Hour/time.Millisecond) {
			return time.Time{}, badRequest(dfield, "%s must be between 0 and 100 years in milliseconds, not %d", dfield, *ms)
		}
		return time.Now().Add(time.Duration(*ms) * time.Millisecond), nil
	}
	return time.Time{}, nil
}

// declare runs declare (Run.Wait or Run.Sleep) on the run of r after
// checking the seq it should follow, with the run's begins held off so
// that no atom commits between the check and the wait.
func (s *server) declare(r *http.Request, seq *uint64, declare func(ctx context.Context, run *engine.Run) (engine.Wait, error)) (int, any, *apiError) {
	if s.draining.Load() {
		return 0, nil, &apiError{Status: http.StatusServiceUnavailable, Code: codeShuttingDown, Message: "the server is shutting down"}
	}
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	rs.beginMu.Lock()
	defer rs.beginMu.Unlock()
	if seq != nil {
		if last := rs.run.LastSeq(); last != *seq {
			e := conflict(codeSeqMismatch, "run %q: the wait would follow seq %d, the run's last atom; the request says %d", rs.id, last, *seq)
			e.Field, e.Details = "seq", map[string]any{"last_seq": last}
			return 0, nil, e
		}
	}
	w, err := declare(s.ctx, rs.run)
	if err != nil {
		return 0, nil, waitError(err, "")
	}
	return 200, waitToJSON(w), nil
}

func (s *server) handleDeclareWait(r *http.Request, body []byte) (int, any, *apiError) {
	var req waitRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	if req.Name == "" {
		return 0, nil, badRequest("name", "name is required: the event the run waits for (POST .../sleep waits for the clock only)")
	}
	deadline, aerr := pickTime("deadline", req.Deadline, "timeout_ms", req.TimeoutMS)
	if aerr != nil {
		return 0, nil, aerr
	}
	return s.declare(r, req.Seq, func(ctx context.Context, run *engine.Run) (engine.Wait, error) {
		w, err := run.Wait(ctx, req.Name, deadline)
		if errors.Is(err, engine.ErrInvalidOptions) {
			return w, badRequest("name", "%v", err)
		}
		return w, err
	})
}

func (s *server) handleSleep(r *http.Request, body []byte) (int, any, *apiError) {
	var req sleepRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	until, aerr := pickTime("until", req.Until, "duration_ms", req.DurationMS)
	if aerr != nil {
		return 0, nil, aerr
	}
	if until.IsZero() {
		return 0, nil, badRequest("until", "until or duration_ms is required: when the run wakes")
	}
	return s.declare(r, req.Seq, func(ctx context.Context, run *engine.Run) (engine.Wait, error) {
		w, err := run.Sleep(ctx, until)
		if errors.Is(err, engine.ErrInvalidOptions) {
			return w, badRequest("until", "%v", err)
		}
		return w, err
	})
}

// longPoll reads the wait_ms query parameter: how long a request may
// block; more than the server's call wait is cut to it (the client polls
// again).
func (s *server) longPoll(r *http.Request) (time.Duration, *apiError) {
	v := r.URL.Query().Get(waitLongPollLimit)
	if v == "" {
		return 0, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		return 0, badRequest(waitLongPollLimit, "wait_ms must be a count of milliseconds, 0 or more, not %q", v)
	}
	return min(time.Duration(min(ms, 1<<40))*time.Millisecond, s.cfg.callWait), nil
}

// pollContext is the context of a long poll of d: it ends after d, with
// the request, or when the server begins to drain (so that a SIGTERM does
// not wait for idle long polls: they answer what they have, and the
// client asks the next server).
func (s *server) pollContext(r *http.Request, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(r.Context(), d)
	go func() {
		t := time.NewTicker(drainPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if s.draining.Load() {
					cancel()
					return
				}
			}
		}
	}()
	return ctx, cancel
}

// drainPoll is how often a long poll looks whether the server drains.
const drainPoll = 50 * time.Millisecond

func (s *server) handleGetWait(r *http.Request, _ []byte) (int, any, *apiError) {
	poll, aerr := s.longPoll(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	w, ok, err := rs.run.CurrentWait(r.Context())
	if err != nil {
		return 0, nil, waitError(err, "")
	}
	if ok && w.Outcome == engine.WaitOpen && poll > 0 {
		ctx, cancel := s.pollContext(r, poll)
		got, err := rs.run.WaitEnded(ctx)
		cancel()
		switch {
		case err == nil:
			w = got
		case errors.Is(err, engine.ErrNoWait):
			ok = false // an atom took it meanwhile
		case ctx.Err() != nil && r.Context().Err() == nil:
			// wait_ms passed, or the server drains: the wait as it is
		default:
			return 0, nil, waitError(err, "")
		}
	}
	if !ok {
		return 200, map[string]any{"wait": nil, "last_seq": rs.run.LastSeq()}, nil
	}
	return 200, map[string]any{"wait": waitToJSON(w), "last_seq": rs.run.LastSeq()}, nil
}

func (s *server) handleCancelWait(r *http.Request, body []byte) (int, any, *apiError) {
	var req struct{}
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	w, err := rs.run.CancelWait(s.ctx)
	if err != nil {
		return 0, nil, waitError(err, "")
	}
	return 200, waitToJSON(w), nil
}

func (s *server) handleSendEvent(r *http.Request, body []byte) (int, any, *apiError) {
	id := r.PathValue("run")
	if sc := scopeOf(r); !sc.covers(id) || !(sc.may(rightWrite) || sc.may(rightEvent)) {
		e := sc.forbidden("it may not send events to run %q (the write or event right on it)", id)
		e.Field = "run"
		return 0, nil, e
	}
	var req eventRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	payload, _, aerr := pickBytes("payload", req.Payload, req.PayloadBase64)
	switch {
	case aerr != nil:
		return 0, nil, aerr
	case req.Name == "":
		return 0, nil, badRequest("name", "name is required: the event's name, which a wait of the run names")
	case req.Sender == "":
		return 0, nil, badRequest("sender", "sender is required: the sender's id for the event, unique per run (a repeat of it is answered duplicate)")
	}
	if len(payload) > engine.MaxEventSize {
		return 0, nil, &apiError{Status: http.StatusRequestEntityTooLarge, Code: codeTooLarge, Field: "payload",
			Message: fmt.Sprintf("an event payload of %d bytes, the limit is %d", len(payload), engine.MaxEventSize)}
	}
	if _, aerr := s.runState(r.Context(), id, false); aerr != nil {
		return 0, nil, aerr
	}
	res, err := s.db.SendEvent(s.ctx, id, req.Name, req.Sender, payload)
	if err != nil {
		field := ""
		if errors.Is(err, engine.ErrInvalidOptions) {
			field = "name"
			if len(req.Sender) > engine.MaxSenderID {
				field = "sender"
			}
		}
		return 0, nil, waitError(err, field)
	}
	return 200, eventResponse{Run: id, Name: req.Name, Sender: req.Sender, Duplicate: res.Duplicate, Delivered: res.Delivered}, nil
}

func (s *server) handleAttemptWait(r *http.Request, _ []byte) (int, any, *apiError) {
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	if aerr := a.pin(true); aerr != nil {
		return 0, nil, aerr
	}
	defer a.unpin()
	w, err := a.atom.WaitOutcome(r.Context())
	if err != nil {
		e := waitError(err, "")
		if errors.Is(err, engine.ErrWaitNotEnded) {
			e.Details = map[string]any{"wait": waitToJSON(w)}
		}
		return 0, nil, e
	}
	return 200, waitToJSON(w), nil
}

// handleReady answers the runs whose wait ended and that no atom took,
// in the order they ended; with wait_ms, it blocks until there is one
// (or wait_ms passes, answering none). A token's run scope filters the
// list.
func (s *server) handleReady(r *http.Request, _ []byte) (int, any, *apiError) {
	poll, aerr := s.longPoll(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	max := 1000
	if v := r.URL.Query().Get("max"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			return 0, nil, badRequest("max", "max must be an integer between 1 and 100000, not %q", v)
		}
		max = n
	}
	sc := scopeOf(r)
	ctx, cancel := s.pollContext(r, poll)
	defer cancel()
	for {
		changed := s.db.ReadyChanged()
		ask := max + 1
		if !sc.all {
			ask = 0 // the scope filters: read them all
		}
		ws, err := s.db.Ready(r.Context(), ask)
		if err != nil {
			return 0, nil, waitError(err, "")
		}
		out := readyResponse{Ready: []waitJSON{}}
		for _, w := range ws {
			if !sc.covers(w.Run) {
				continue
			}
			if len(out.Ready) == max {
				out.More = true
				break
			}
			out.Ready = append(out.Ready, waitToJSON(w))
		}
		if len(out.Ready) > 0 || poll == 0 {
			return 200, out, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if err := r.Context().Err(); err != nil {
				return 0, nil, engineError(err, "")
			}
			return 200, out, nil // wait_ms passed, or the server drains
		}
	}
}
