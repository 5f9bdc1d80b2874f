package main

// Blobs over the wire: large values kept outside the log (package blob;
// engine.Options.BlobThreshold, --blob-threshold). Both endpoints stream:
// an upload is read from the request body a chunk at a time into
// Atom.PutBlob, a download written from Run.OpenBlob a chunk at a time,
// so that the server holds about two chunks (2 MiB) per transfer whatever
// the blob's size. They are not JSON-bodied routes (route): the body is
// the blob's bytes, so they have their own wrapper (streamRoute) with the
// same token checks.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/continuumdb/continuum/blob"
)

// codeBlobNotFound: no blob of that reference for the run.
const codeBlobNotFound = "blob_not_found" // 404: the run references no such blob, or it is missing from the store

// maxBlobUpload bounds one upload's bytes (the body is streamed to disk,
// never held: the bound is the disk's, not memory's).
const maxBlobUpload = 1 << 40

// streamRoute is an endpoint whose body is not JSON: it reads or writes
// the request and response itself.
type streamRoute struct {
	method, pattern string
	handle          func(w http.ResponseWriter, r *http.Request) (int, any, *apiError)
	need            right
}

func (s *server) streamRoutes() []streamRoute {
	return []streamRoute{
		{"POST", "/v1/runs/{run}/attempts/{attempt}/blobs", s.handlePutBlob, rightWrite},
		{"GET", "/v1/runs/{run}/blobs/{hash}/{size}", s.handleGetBlob, rightRead},
	}
}

// wrapStream is wrap for a streamRoute: the token's scope, the counter,
// the recover; the handler reads the body itself. A handler that wrote
// the response returns (0, nil, nil).
func (s *server) wrapStream(rt streamRoute) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sc := scopeOf(r); sc != adminScope && rt.need != 0 {
			if aerr := sc.checkRun(rt.need, r.PathValue("run"), "run"); aerr != nil {
				writeError(w, aerr)
				return
			}
		}
		s.counters.requests.Add(1)
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p) // net/http closes the connection
				}
				s.log.Error("continuumd: handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				writeError(w, &apiError{Status: http.StatusInternalServerError, Code: codeInternal,
					Message: fmt.Sprintf("the server failed handling %s %s: %v", r.Method, r.URL.Path, p)})
			}
		}()
		status, v, aerr := rt.handle(w, r)
		switch {
		case aerr != nil:
			writeError(w, aerr)
		case status != 0:
			writeJSON(w, status, v)
		}
	})
}

// blobJSON is a blob's reference as the server answers it.
type blobJSON struct {
	// Ref is the reference as verify and continuumctl print it.
	Ref string `json:"ref"`
	// Value is the reference value to put in a delta (a memory value, a
	// tool output, a message text) to reference the blob.
	Value string `json:"value"`
	Hash  string `json:"hash"`
	Size  int64  `json:"size"`
	Media string `json:"media_type,omitempty"`
}

func refJSON(ref blob.Ref) blobJSON {
	return blobJSON{Ref: ref.String(), Value: blob.Value(ref), Hash: hex.EncodeToString(ref.Hash[:]), Size: ref.Size, Media: ref.Media}
}

// handlePutBlob streams the request body into a blob of the attempt's
// atom (Atom.PutBlob): the blob is kept while the attempt is open, and
// afterwards while a record references it. Its media type is the
// request's Content-Type ("application/octet-stream" when absent). The
// body may be sent with chunked transfer encoding: nothing of it is held
// beyond one chunk.
func (s *server) handlePutBlob(w http.ResponseWriter, r *http.Request) (int, any, *apiError) {
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	media := r.Header.Get("Content-Type")
	if media != "" {
		if _, _, err := mime.ParseMediaType(media); err != nil {
			return 0, nil, badRequest("Content-Type", "the media type %q does not parse: %v", media, err)
		}
	}
	if len(media) > blob.MaxMediaType {
		return 0, nil, badRequest("Content-Type", "a media type of %d bytes, at most %d", len(media), blob.MaxMediaType)
	}
	if aerr := a.pin(true); aerr != nil {
		return 0, nil, aerr
	}
	defer a.unpin()
	body := http.MaxBytesReader(w, r.Body, maxBlobUpload)
	ref, err := a.atom.PutBlob(r.Context(), media, body)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return 0, nil, &apiError{Status: http.StatusRequestEntityTooLarge, Code: codeTooLarge,
			Message: fmt.Sprintf("a blob of more than %d bytes", mbe.Limit)}
	case err != nil && strings.Contains(err.Error(), "read the blob's source"):
		return 0, nil, badRequest("", "reading the request body: %v", err)
	case err != nil:
		return 0, nil, engineError(err, "")
	}
	return 200, refJSON(ref), nil
}

// handleGetBlob streams the blob of the reference as the run reads it:
// in an encrypted store one sealed under the run's keys or its ancestors';
// in a plaintext one any blob of that hash and size (blobs are addressed
// by content: doc.go's exception to the tokens' scopes), every chunk
// checked against the hash before it is sent. A chunk found damaged after the headers went out ends the
// response early (the body is shorter than its Content-Length): the
// client sees a truncated transfer, never unchecked bytes.
func (s *server) handleGetBlob(w http.ResponseWriter, r *http.Request) (int, any, *apiError) {
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	var ref blob.Ref
	hs := r.PathValue("hash")
	if len(hs) != 64 || strings.ToLower(hs) != hs {
		return 0, nil, badRequest("hash", "the hash must be 64 lower-case hex digits, not %q", hs)
	}
	if _, err := hex.Decode(ref.Hash[:], []byte(hs)); err != nil {
		return 0, nil, badRequest("hash", "the hash must be 64 lower-case hex digits, not %q", hs)
	}
	n, err := strconv.ParseInt(r.PathValue("size"), 10, 64)
	if err != nil || n < 0 {
		return 0, nil, badRequest("size", "the size must be a non-negative integer, not %q", r.PathValue("size"))
	}
	ref.Size = n
	rc, err := rs.run.OpenBlob(r.Context(), ref)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		// Not the engine's message: it names the blob's file, a path of
		// the server's.
		return 0, nil, notFound(codeBlobNotFound, "hash", "run %q: no blob %v in the store", rs.id, ref)
	case errors.Is(err, blob.ErrCorrupt):
		return 0, nil, &apiError{Status: http.StatusInternalServerError, Code: codeCorrupt, Message: err.Error()}
	case err != nil:
		return 0, nil, engineError(err, "")
	}
	defer rc.Close()
	media := r.URL.Query().Get("media_type")
	if media == "" {
		media = "application/octet-stream"
	}
	w.Header().Set("Content-Type", media)
	w.Header().Set("Content-Length", strconv.FormatInt(ref.Size, 10))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return 0, nil, nil
	}
	if _, err := io.Copy(w, rc); err != nil {
		s.log.Warn("continuumd: blob download ended early", "run", rs.id, "ref", ref.String(), "err", err)
		// The status is sent: abort the connection so that the client
		// sees the transfer cut, not a short body taken for whole.
		panic(http.ErrAbortHandler)
	}
	return 0, nil, nil
}
