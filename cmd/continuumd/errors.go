package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/ledger"
)

// apiError is every error the server answers with: an HTTP status, a
// stable code for programs, a message for people, and the request field it
// concerns when there is one. It is written as
//
//	{"error": {"code": "bad_request", "message": "...", "field": "delta[2].status"}}
//
// Codes are part of the protocol (openapi.json lists them); messages are
// not, and may change.
type apiError struct {
	Status  int            `json:"-"`
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Field   string         `json:"field,omitempty"`
	Details map[string]any `json:"details,omitempty"`
}

func (e *apiError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s (%s): %s", e.Code, e.Field, e.Message)
	}
	return e.Code + ": " + e.Message
}

// The error codes. openapi.json's ErrorCode enum holds the same list;
// TestOpenAPIErrorCodes keeps the two equal.
const (
	codeBadRequest       = "bad_request"       // 400: malformed JSON, a wrong type, a missing or unknown field
	codeUnauthorized     = "unauthorized"      // 401: no bearer token, or a wrong one
	codeForbidden        = "forbidden"         // 403: the token's scope does not allow the request (its rights or runs)
	codeAuthRateLimited  = "auth_rate_limited" // 429: too many failed authentications from the client's address
	codeRouteNotFound    = "route_not_found"   // 404: no such endpoint
	codeRunNotFound      = "run_not_found"     // 404: no run of that id (PUT /v1/runs/{run} creates it)
	codeAttemptNotFound  = "attempt_not_found" // 404: no attempt of that id: the server restarted, or it is long finished
	codeCallNotFound     = "call_not_found"    // 404: the attempt has no call of that number
	codeAtomNotFound     = "atom_not_found"    // 404: no committed atom at that seq
	codeMethodNotAllowed = "method_not_allowed"
	codeRunHeld          = "run_held"             // 409: another attempt holds the run's lease
	codeRunEnded         = "run_ended"            // 409: the run ended: it takes no more atoms, and no other end
	codeRunExists        = "run_exists"           // 409: a fork's id names a run that is not that fork
	codeLeaseLost        = "lease_lost"           // 409: this attempt was abandoned (lease expired, taken over, server stopping)
	codeAttemptDone      = "attempt_done"         // 409: the attempt is committed or failed
	codeCallMismatch     = "call_mismatch"        // 409: a repeated call differs from the first request of that number
	codeActionChanged    = "action_changed"       // 409: a call differs from an earlier attempt's call at its index, which is in doubt (settle that one first)
	codeCommitMismatch   = "commit_mismatch"      // 409: a repeated commit of a committed attempt carries another delta
	codeSeqMismatch      = "seq_mismatch"         // 409: a begin's seq is not the run's next
	codeOutOfOrder       = "out_of_order"         // 409: a call number past the next one, or a stream append's index past the attempt's count
	codeAppendMismatch   = "append_mismatch"      // 409: a repeated stream append (its index) carries another chunk than the one appended at that index
	codeNotExecuting     = "not_executing"        // 409: an outcome for a call that is not waiting for one
	codeNotInDoubt       = "not_in_doubt"         // 409: a resolution for a call that is not in doubt
	codeCallsRunning     = "calls_running"        // 409: commit while a call is executing
	codeConflict         = "conflict"             // 409: a branch's commit lost to an atom committed after its base (details: seq, key, lost); nothing written, branch again
	codeRollbackPending  = "rollback_pending"     // 409: a rollback of the run is not finished (run it to its end first)
	codeNotUndone        = "not_undone"           // 409: certified actions the rollback reaches have no compensation (details.not_undone; allow_not_undone)
	codeRollbackNotFound = "rollback_not_found"   // 404: no rollback of the run is running in this server (POST .../rollback resumes a pending one)
	codeUnrelatedRuns    = "unrelated_runs"       // 422: a diff of two runs of different lineages (no common state)
	codeRunDeleted       = "run_deleted"          // 410: the run was deleted (or erased): its id is never served again
	codeRunNotEnded      = "run_not_ended"        // 409: erase of a run that has not ended
	codeRunHasForks      = "run_has_forks"        // 409: erase of a run with a fork that is not erased (erase the fork first)
	codeKeyring          = "keyring"              // 409: erasure in a store that is not encrypted (the server has no --keyring)
	codeNotErasable      = "not_erasable"         // 409: the memory key's values were never sealed with keys of their own (not in --erasable when written)
	codeNothingToErase   = "nothing_to_erase"     // 409: the memory key's values are all erased already, and none was written since
	codeTooLarge         = "too_large"            // 413: the body, a result or the frame exceeds a limit
	codeHeaderTooLarge   = "header_too_large"     // 431: the request's header is larger than the server takes
	codeTimeout          = "request_timeout"      // 408: the request's body did not arrive within --body-timeout
	codeTooManyConns     = "too_many_connections" // 503: the server holds --max-conns connections already
	codeInvalidDelta     = "invalid_delta"        // 422: the delta does not apply to the run's frame
	codeInvalidArgs      = "invalid_args"         // 422: the action's args or redact pointers are refused by the ledger
	codeInvalidRunID     = "invalid_run_id"       // 400: empty, longer than 256 bytes, or not UTF-8
	codeShuttingDown     = "shutting_down"        // 503: the server is stopping; retry against the next one
	codeStorage          = "storage"              // 500: the store failed (I/O error, full disk): the server must be restarted
	codeCorrupt          = "corrupt"              // 500: the store is damaged where the request needed it
	codeInternal         = "internal"             // 500: a bug; the message says what
)

// errorCodes lists every code, for the OpenAPI test.
var errorCodes = []string{
	codeBadRequest, codeUnauthorized, codeForbidden, codeAuthRateLimited, codeRouteNotFound, codeRunNotFound,
	codeAttemptNotFound, codeCallNotFound, codeAtomNotFound, codeMethodNotAllowed,
	codeRunHeld, codeRunEnded, codeRunExists, codeLeaseLost, codeAttemptDone, codeCallMismatch, codeActionChanged, codeCommitMismatch, codeAppendMismatch, codeSeqMismatch, codeOutOfOrder,
	codeNotExecuting, codeNotInDoubt, codeCallsRunning, codeConflict, codeRollbackPending, codeNotUndone, codeRollbackNotFound, codeUnrelatedRuns, codeRunDeleted, codeRunNotEnded, codeRunHasForks,
	codeKeyring, codeNotErasable, codeNothingToErase, codeTooLarge, codeInvalidDelta,
	codeInvalidArgs, codeInvalidRunID, codeShuttingDown, codeStorage, codeCorrupt,
	codeHeaderTooLarge, codeTimeout, codeTooManyConns,
	codeBlobNotFound,
	codeInternal,
}

func badRequest(field, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: codeBadRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}

func conflict(code, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusConflict, Code: code, Message: fmt.Sprintf(format, args...)}
}

func notFound(code, field, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusNotFound, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// engineError maps an error of the engine to the answer that says what
// happened, naming the request field it concerns (field is the one the
// caller passed the engine; "" if none).
func engineError(err error, field string) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, engine.ErrInvalidRunID):
		return &apiError{Status: http.StatusBadRequest, Code: codeInvalidRunID, Field: "run", Message: err.Error()}
	case errors.Is(err, engine.ErrTooLarge):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: codeTooLarge, Field: field, Message: err.Error()}
	case errors.Is(err, engine.ErrInvalidDelta), errors.Is(err, engine.ErrNilDelta):
		return &apiError{Status: http.StatusUnprocessableEntity, Code: codeInvalidDelta, Field: "delta", Message: err.Error()}
	case errors.Is(err, ledger.ErrInvalidArgs):
		return &apiError{Status: http.StatusUnprocessableEntity, Code: codeInvalidArgs, Field: "args", Message: err.Error()}
	case errors.Is(err, ledger.ErrBadPointer):
		f := "redact"
		if field == "redact_result" {
			f = field
		}
		return &apiError{Status: http.StatusUnprocessableEntity, Code: codeInvalidArgs, Field: f, Message: err.Error()}
	case errors.Is(err, ledger.ErrBadCompensation):
		return &apiError{Status: http.StatusUnprocessableEntity, Code: codeInvalidArgs, Field: "compensate", Message: err.Error()}
	case errors.Is(err, ledger.ErrNoTool):
		return badRequest("tool", "%v", err)
	case errors.Is(err, engine.ErrSeqOutOfRange):
		return notFound(codeAtomNotFound, "seq", "%v", err)
	case errors.Is(err, engine.ErrAtomDone):
		return conflict(codeAttemptDone, "%v", err)
	case errors.Is(err, engine.ErrNotInDoubt):
		return conflict(codeNotInDoubt, "%v", err)
	case errors.Is(err, engine.ErrRunDeleted):
		return &apiError{Status: http.StatusGone, Code: codeRunDeleted, Field: field, Message: err.Error()}
	case errors.Is(err, engine.ErrRunNotEnded):
		return conflict(codeRunNotEnded, "%v", err)
	case errors.Is(err, engine.ErrActionChanged):
		var ce *engine.ActionChangedError
		if errors.As(err, &ce) && ce.InDoubt != nil {
			return &apiError{Status: http.StatusConflict, Code: codeActionChanged, Field: "tool",
				Message: fmt.Sprintf("this call is %q, but call %d of an earlier attempt of seq %d, %q with key %q, is in doubt: "+
					"make that call again (same tool and args) and resolve it with what the downstream says, then make this one "+
					"(it then gets a key no earlier call used)", ce.NewTool, ce.Index, ce.Seq, ce.OldTool, ce.InDoubt.Key)}
		}
		return conflict(codeActionChanged, "%v", err)
	case errors.Is(err, engine.ErrRunHasForks):
		return conflict(codeRunHasForks, "%v", err)
	case errors.Is(err, engine.ErrKeyring):
		return conflict(codeKeyring, "%v", err)
	case errors.Is(err, engine.ErrNotErasable):
		return conflict(codeNotErasable, "%v", err)
	case errors.Is(err, engine.ErrNothingToErase):
		return conflict(codeNothingToErase, "%v", err)
	case errors.Is(err, engine.ErrInvalidOptions):
		return badRequest(field, "%v", err)
	case errors.Is(err, engine.ErrRunEnded):
		return conflict(codeRunEnded, "%v", err)
	case errors.Is(err, engine.ErrRunExists):
		return conflict(codeRunExists, "%v", err)
	case errors.As(err, new(*engine.ConflictError)):
		return conflictError(err)
	case errors.Is(err, engine.ErrRollbackPending):
		return conflict(codeRollbackPending, "%v", err)
	case errors.Is(err, engine.ErrAtomInProgress):
		return conflict(codeRunHeld, "%v", err)
	case errors.Is(err, engine.ErrClosed), errors.Is(err, context.Canceled):
		return &apiError{Status: http.StatusServiceUnavailable, Code: codeShuttingDown, Message: err.Error()}
	case errors.Is(err, engine.ErrCorrupt):
		return &apiError{Status: http.StatusInternalServerError, Code: codeCorrupt, Message: err.Error()}
	}
	return &apiError{Status: http.StatusInternalServerError, Code: codeStorage, Message: err.Error()}
}
