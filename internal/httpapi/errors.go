package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/redact"
)

// errorBody is every error's answer: {"error": {"code": ..., "message": ...}}.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// requestError is an error found before the database was asked: a 400.
type requestError struct{ msg string }

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &requestError{msg: fmt.Sprintf(format, args...)}
}

// fail answers err: bad input 400, a refused privilege 403, not found 404, the wrong status
// 409, each with the database's or the client's message (masked); anything else is logged and
// answered 500 without its text.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var reqErr *requestError
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &reqErr):
		writeError(w, http.StatusBadRequest, "invalid_input", reqErr.msg)
	case errors.Is(err, taskorch.ErrInvalidInput):
		writeError(w, http.StatusBadRequest, "invalid_input", message(err))
	case errors.Is(err, taskorch.ErrPermissionDenied):
		writeError(w, http.StatusForbidden, "forbidden", message(err))
	case errors.Is(err, taskorch.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", message(err))
	case errors.Is(err, taskorch.ErrWrongState):
		writeError(w, http.StatusConflict, "wrong_state", message(err))
	case errors.As(err, &pgErr) && pgErr.Code == "42501": // insufficient_privilege
		writeError(w, http.StatusForbidden, "forbidden", message(pgErr))
	case errors.As(err, &pgErr) && (pgErr.Code == "22023" || pgErr.Code == "22P02"):
		writeError(w, http.StatusBadRequest, "invalid_input", message(pgErr))
	case errors.As(err, &pgErr) && pgErr.Code == "P0002":
		writeError(w, http.StatusNotFound, "not_found", message(pgErr))
	case errors.As(err, &pgErr) && pgErr.Code == "55000":
		writeError(w, http.StatusConflict, "wrong_state", message(pgErr))
	case r.Context().Err() != nil:
		// The caller went away: nobody reads an answer.
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &pgErr) && pgErr.Code == "57014"):
		writeError(w, http.StatusServiceUnavailable, "timeout", "the database did not answer in time; try again")
	default:
		h.internal(w, r, err)
	}
}

// internal logs err (masked) and answers 500 without its text.
func (h *Handler) internal(w http.ResponseWriter, r *http.Request, err error) {
	h.cfg.Logger.Error("api request failed", "method", r.Method, "path", r.URL.Path, "error", redact.String(err.Error()))
	writeError(w, http.StatusInternalServerError, "internal", "internal error: the API's log says what failed")
}

// message is an error's text for an answer: the database's or the client's words, without the
// "taskorch: " labels, masked (a message may quote input).
func message(err error) string {
	var pgErr *pgconn.PgError
	msg := err.Error()
	if errors.As(err, &pgErr) {
		msg = pgErr.Message
		if pgErr.Hint != "" {
			msg += ". " + pgErr.Hint
		}
	}
	return redact.String(strings.ReplaceAll(msg, "taskorch: ", ""))
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: errorDetail{Code: code, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
