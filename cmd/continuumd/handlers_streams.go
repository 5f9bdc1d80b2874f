package main

// Streams out of runs over the wire (engine Atom.Append, Run.ReadStream,
// Run.Streams): an attempt appends chunks to a named stream of its run
// while it works, before it commits; anyone with the read right reads a
// stream from an offset, and follows its tail with a long poll (wait_ms).
// Offsets are the log's: a reader that resumes from the next of its last
// read sees each chunk once, across its own crash and the server's.

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"strconv"
	"time"

	"github.com/continuumdb/continuum/engine"
)

// maxChunksPerAppend bounds the chunks of one POST .../streams/{stream}.
const maxChunksPerAppend = 1024

// chunkIn is one chunk of an append: its data as text or base64.
type chunkIn struct {
	Data       *string `json:"data"`
	DataBase64 *string `json:"data_base64"`
}

// appendRequest is the body of POST .../attempts/{attempt}/streams/{stream}:
// one chunk (data or data_base64) or several (chunks), appended in order.
type appendRequest struct {
	Data       *string   `json:"data"`
	DataBase64 *string   `json:"data_base64"`
	Chunks     []chunkIn `json:"chunks"`
	// Flush makes the answer wait until the chunks are durable.
	Flush bool `json:"flush"`
	// Index, if given, is how many chunks the attempt appended to the
	// stream before these (the client's count): it makes the append
	// idempotent. Chunks at indexes the attempt appended already are
	// checked to be the same and not appended again (a repeat after a
	// lost answer); an index past the attempt's count is out_of_order.
	Index *uint64 `json:"index"`
}

// sentChunk is a chunk an attempt appended: its offset and a hash of its
// data (streamSeed), for the check of a repeated append.
type sentChunk struct {
	off, sum uint64
}

// streamSeed seeds the hashes of sentChunk (they live in memory only).
var streamSeed = maphash.MakeSeed()

// chunkJSON is a chunk as a read answers it (engine.StreamChunk).
type chunkJSON struct {
	Offset     uint64  `json:"offset"`
	Seq        uint64  `json:"seq"`     // the atom that appended it
	Attempt    uint64  `json:"attempt"` // that atom's attempt, from 1 (the engine's count, not an attempt id)
	Status     string  `json:"status"`  // open, committed, failed, abandoned
	Data       *string `json:"data,omitempty"`
	DataBase64 *string `json:"data_base64,omitempty"`
}

func (s *server) handleAppend(r *http.Request, body []byte) (int, any, *apiError) {
	var req appendRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	var chunks [][]byte
	one, has, aerr := pickBytes("data", req.Data, req.DataBase64)
	switch {
	case aerr != nil:
		return 0, nil, aerr
	case has && len(req.Chunks) > 0:
		return 0, nil, badRequest("chunks", "give data (or data_base64) or chunks, not both")
	case has:
		chunks = [][]byte{one}
	case len(req.Chunks) == 0:
		return 0, nil, badRequest("data", "data (or data_base64), or chunks, is required")
	case len(req.Chunks) > maxChunksPerAppend:
		return 0, nil, badRequest("chunks", "%d chunks, at most %d per request", len(req.Chunks), maxChunksPerAppend)
	}
	for i, c := range req.Chunks {
		b, has, aerr := pickBytes("chunks["+strconv.Itoa(i)+"].data", c.Data, c.DataBase64)
		if aerr != nil {
			return 0, nil, aerr
		}
		if !has {
			return 0, nil, badRequest("chunks", "chunk %d has neither data nor data_base64", i)
		}
		chunks = append(chunks, b)
	}
	for i, c := range chunks {
		if len(c) > engine.MaxChunkSize {
			// Refused before any is appended: a request is appended whole
			// or not at all, but for a failure of the store.
			return 0, nil, &apiError{Status: http.StatusRequestEntityTooLarge, Code: codeTooLarge, Field: "data",
				Message: fmt.Sprintf("chunk %d is %d bytes, the limit is %d (engine.MaxChunkSize)", i, len(c), engine.MaxChunkSize)}
		}
	}
	name := r.PathValue("stream")
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	if aerr := a.pin(true); aerr != nil {
		return 0, nil, aerr
	}
	defer a.unpin()
	// One append of the attempt at a time, so that its count of chunks per
	// stream is the order they were appended in.
	a.appends.Lock()
	defer a.appends.Unlock()
	if a.appends.sent == nil {
		a.appends.sent = map[string][]sentChunk{}
	}
	sent := a.appends.sent[name]
	var first, last uint64
	done := 0 // chunks of the request the attempt appended before
	if req.Index != nil {
		idx := *req.Index
		if idx > uint64(len(sent)) {
			return 0, nil, &apiError{Status: http.StatusConflict, Code: codeOutOfOrder, Field: "index",
				Message: fmt.Sprintf("attempt %s appended %d chunks to stream %q: index %d would leave a gap (append from index %d)", a.token, len(sent), name, idx, len(sent))}
		}
		done = min(len(chunks), len(sent)-int(idx))
		for i, c := range chunks[:done] {
			if sent[int(idx)+i].sum != maphash.Bytes(streamSeed, c) {
				return 0, nil, &apiError{Status: http.StatusConflict, Code: codeAppendMismatch, Field: "chunks",
					Message: fmt.Sprintf("chunk %d differs from the chunk attempt %s appended to stream %q at index %d: an index names one chunk (repeat it unchanged, or append from index %d)", i, a.token, name, int(idx)+i, len(sent))}
			}
		}
		if done > 0 {
			first, last = sent[idx].off, sent[int(idx)+done-1].off
		}
	}
	for i, c := range chunks[done:] {
		off, err := a.atom.Append(s.ctx, name, c)
		if err != nil {
			a.appends.sent[name] = sent
			if i+done > 0 {
				// The earlier chunks are appended: say how far it went.
				e := streamError(err)
				e.Message = "chunk " + strconv.Itoa(i+done) + " (after " + strconv.Itoa(i+done) + " appended from offset " + strconv.FormatUint(first, 10) + "): " + e.Message
				return 0, nil, e
			}
			return 0, nil, streamError(err)
		}
		sent = append(sent, sentChunk{off, maphash.Bytes(streamSeed, c)})
		if i+done == 0 {
			first = off
		}
		last = off
	}
	a.appends.sent[name] = sent
	if req.Flush {
		if err := a.atom.FlushStreams(r.Context()); err != nil {
			return 0, nil, engineError(err, "")
		}
	}
	return 200, map[string]any{"stream": name, "offset": first, "next": last + 1}, nil
}

// streamError maps an error of Append or ReadStream.
func streamError(err error) *apiError {
	switch {
	case errors.Is(err, engine.ErrTooLarge):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: codeTooLarge, Field: "data", Message: err.Error()}
	case errors.Is(err, engine.ErrBranchStream):
		return badRequest("stream", "%v", err)
	case errors.Is(err, engine.ErrInvalidStreamName):
		return badRequest("stream", "%v", err)
	}
	return engineError(err, "")
}

func (s *server) handleReadStream(r *http.Request, _ []byte) (int, any, *apiError) {
	q := r.URL.Query()
	for k := range q {
		if k != "from" && k != "max" && k != "wait_ms" {
			return 0, nil, badRequest(k, "unknown query parameter %q (from, max, wait_ms)", k)
		}
	}
	num := func(k string, def, limit uint64) (uint64, *apiError) {
		if !q.Has(k) {
			return def, nil
		}
		n, err := strconv.ParseUint(q.Get(k), 10, 64)
		if err != nil || n > limit {
			return 0, badRequest(k, "%s must be an integer from 0 to %d, not %q", k, limit, q.Get(k))
		}
		return n, nil
	}
	from, aerr := num("from", 0, 1<<62)
	if aerr != nil {
		return 0, nil, aerr
	}
	maxN, aerr := num("max", 1000, 10000)
	if aerr != nil {
		return 0, nil, aerr
	}
	waitMS, aerr := num("wait_ms", 0, uint64(s.cfg.callWait.Milliseconds()))
	if aerr != nil {
		return 0, nil, aerr
	}
	name := r.PathValue("stream")
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	ctx := r.Context()
	opts := &engine.ReadStreamOptions{Max: int(max(maxN, 1)), MaxBytes: int(s.cfg.maxBody) / 2}
	if waitMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(waitMS)*time.Millisecond)
		defer cancel()
		opts.Wait = true
	}
	b, err := rs.run.ReadStream(ctx, name, from, opts)
	switch {
	case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
		b, err = engine.StreamBatch{Next: from}, nil // nothing came within wait_ms
	case err != nil:
		return 0, nil, streamError(err)
	}
	out := make([]chunkJSON, len(b.Chunks))
	for i, c := range b.Chunks {
		out[i] = chunkJSON{Offset: c.Offset, Seq: c.Seq, Attempt: c.Attempt, Status: c.Status.String()}
		out[i].Data, out[i].DataBase64 = textOrBase64(c.Data)
	}
	return 200, map[string]any{"run": rs.id, "stream": name, "chunks": out, "next": b.Next, "ended": b.Ended}, nil
}

func (s *server) handleStreams(r *http.Request, _ []byte) (int, any, *apiError) {
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	infos, err := rs.run.Streams(r.Context())
	if err != nil {
		return 0, nil, engineError(err, "")
	}
	type streamJSON struct {
		Name   string `json:"name"`
		Chunks uint64 `json:"chunks"`
	}
	out := make([]streamJSON, len(infos))
	for i, in := range infos {
		out[i] = streamJSON{in.Name, in.Chunks}
	}
	return 200, map[string]any{"run": rs.id, "streams": out}, nil
}
