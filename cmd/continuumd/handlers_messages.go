package main

// Messages between runs over the wire (engine Atom.Send, Receive,
// ReceiveFrom, TryReceive; Run.Inbox): an attempt sends as part of its
// atom (the message exists if and only if the atom commits) and receives
// from its run's inbox (the message is consumed when the atom commits; a
// failed or abandoned attempt gives it back).

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/continuumdb/continuum/engine"
)

// sendRequest is the body of POST .../attempts/{attempt}/send.
type sendRequest struct {
	To            string  `json:"to"`
	Payload       *string `json:"payload"`
	PayloadBase64 *string `json:"payload_base64"`
}

// receiveRequest is the body of POST .../attempts/{attempt}/receive.
type receiveRequest struct {
	// From receives only the messages of that sender ("": any).
	From string `json:"from"`
	// WaitMS is how long to wait for a message when the inbox has none
	// (0: answer at once; at most the server's call wait, 20 s).
	WaitMS int64 `json:"wait_ms"`
}

// messageJSON is a message between runs (engine.Message).
type messageJSON struct {
	From          string  `json:"from"`
	Seq           uint64  `json:"seq"`   // the sending atom's seq
	Index         uint32  `json:"index"` // its place among that atom's messages
	To            string  `json:"to"`
	Payload       *string `json:"payload,omitempty"`
	PayloadBase64 *string `json:"payload_base64,omitempty"`
}

func messageToJSON(m engine.Message) messageJSON {
	out := messageJSON{From: m.ID.From, Seq: m.ID.Seq, Index: m.ID.Index, To: m.To}
	out.Payload, out.PayloadBase64 = textOrBase64(m.Payload)
	return out
}

func (s *server) handleSend(r *http.Request, body []byte) (int, any, *apiError) {
	var req sendRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	payload, has, aerr := pickBytes("payload", req.Payload, req.PayloadBase64)
	switch {
	case aerr != nil:
		return 0, nil, aerr
	case !has:
		return 0, nil, badRequest("payload", "payload (or payload_base64) is required")
	case req.To == "":
		return 0, nil, badRequest("to", "to is required: the id of the run the message is for")
	}
	if aerr := scopeOf(r).checkRun(rightWrite, req.To, "to"); aerr != nil {
		return 0, nil, aerr
	}
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	if aerr := a.pin(true); aerr != nil {
		return 0, nil, aerr
	}
	defer a.unpin()
	if err := a.atom.Send(s.ctx, req.To, payload); err != nil {
		switch {
		case errors.Is(err, engine.ErrMessageTooLarge):
			return 0, nil, &apiError{Status: http.StatusRequestEntityTooLarge, Code: codeTooLarge, Field: "payload", Message: err.Error()}
		case errors.Is(err, engine.ErrInvalidRunID):
			return 0, nil, &apiError{Status: http.StatusBadRequest, Code: codeInvalidRunID, Field: "to", Message: err.Error()}
		}
		e := engineError(err, "to")
		if e.Code == codeRunEnded || e.Code == codeRunDeleted {
			e.Field = "to"
		}
		return 0, nil, e
	}
	return 200, map[string]any{"sent": true, "to": req.To}, nil
}

func (s *server) handleReceive(r *http.Request, body []byte) (int, any, *apiError) {
	var req receiveRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	if req.WaitMS < 0 || time.Duration(req.WaitMS)*time.Millisecond > s.cfg.callWait {
		return 0, nil, badRequest("wait_ms", "wait_ms must be between 0 and %d", s.cfg.callWait.Milliseconds())
	}
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	if aerr := a.pin(true); aerr != nil {
		return 0, nil, aerr
	}
	defer a.unpin()
	var (
		m   engine.Message
		ok  = true
		err error
	)
	switch {
	case req.WaitMS == 0 && req.From == "":
		m, ok, err = a.atom.TryReceive(r.Context())
	default:
		ctx, cancel := context.WithTimeout(r.Context(), max(time.Duration(req.WaitMS)*time.Millisecond, time.Millisecond))
		if req.From != "" {
			m, err = a.atom.ReceiveFrom(ctx, req.From)
		} else {
			m, err = a.atom.Receive(ctx)
		}
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil {
			ok, err = false, nil
		}
	}
	switch {
	case errors.Is(err, engine.ErrInvalidRunID):
		return 0, nil, &apiError{Status: http.StatusBadRequest, Code: codeInvalidRunID, Field: "from", Message: err.Error()}
	case err != nil:
		return 0, nil, engineError(err, "")
	case !ok:
		return 200, map[string]any{"message": nil}, nil
	}
	return 200, map[string]any{"message": messageToJSON(m)}, nil
}

func (s *server) handleInbox(r *http.Request, _ []byte) (int, any, *apiError) {
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	msgs, err := rs.run.Inbox(r.Context())
	if err != nil {
		return 0, nil, engineError(err, "")
	}
	out := make([]messageJSON, len(msgs))
	for i, m := range msgs {
		out[i] = messageToJSON(m)
	}
	return 200, map[string]any{"messages": out}, nil
}
