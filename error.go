package taskorch

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Errors callers can test for with errors.Is.
var (
	// ErrNotFound: no task has the given id (no schedule has the given name).
	ErrNotFound = errors.New("taskorch: task not found")

	// ErrInvalidInput: a task type, payload, option or argument was rejected. The error's
	// message says which and why; errors.As with *InputError gives the details.
	ErrInvalidInput = errors.New("taskorch: invalid input")

	// ErrWrongState: the task's status does not allow the operation (retrying a running task,
	// cancelling a completed one).
	ErrWrongState = errors.New("taskorch: operation not allowed in the task's status")

	// ErrPermissionDenied: the database refused the operation to the client's role, for example
	// a task naming a function the role may not execute itself (docs/security.md, "Who may name
	// a function"). The error's message says what and why.
	ErrPermissionDenied = errors.New("taskorch: permission denied")
)

// InputError says what was wrong with the input. It matches ErrInvalidInput.
type InputError struct {
	Msg string
}

func (e *InputError) Error() string { return "taskorch: " + e.Msg }

// Is reports whether target is ErrInvalidInput.
func (e *InputError) Is(target error) bool { return target == ErrInvalidInput }

func inputErrorf(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// stateError carries the server's message and matches ErrWrongState.
type stateError struct{ msg string }

func (e *stateError) Error() string        { return "taskorch: " + e.msg }
func (e *stateError) Is(target error) bool { return target == ErrWrongState }

// notFoundError carries the server's message and matches ErrNotFound.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string        { return "taskorch: " + e.msg }
func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }

// permissionError carries the server's message and matches ErrPermissionDenied.
type permissionError struct{ msg string }

func (e *permissionError) Error() string        { return "taskorch: " + e.msg }
func (e *permissionError) Is(target error) bool { return target == ErrPermissionDenied }

// payloadHint is the hint of the database's payload check (internal.check_task_input).
const payloadHint = "Store large data elsewhere (a table, object storage) and put its key in the payload."

// mapError turns the SQLSTATEs the SQL API raises on purpose into the package's errors.
func mapError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "22023", "22P02": // invalid_parameter_value, invalid_text_representation
			if pgErr.Hint != "" {
				return &InputError{Msg: pgErr.Message + ". " + pgErr.Hint}
			}
			return &InputError{Msg: pgErr.Message}
		case "23514": // check_violation
			// The enqueue functions check the size first (22023 above); the constraint stops a
			// direct insert or COPY. Its detail, which dumps the row, is not repeated.
			if pgErr.ConstraintName == "task_payload_size" {
				return &InputError{Msg: "the payload is over the database's limit of 8 MiB per task (constraint task_payload_size). " + payloadHint}
			}
		case "22P05", "22021": // untranslatable_character (\u0000 in jsonb), character_not_in_repertoire
			return &InputError{Msg: pgErr.Message + " (PostgreSQL stores neither NUL characters nor invalid UTF-8 in text and jsonb)"}
		case "42883": // undefined_function: a task naming a function that does not exist
			if strings.HasPrefix(pgErr.Message, "enqueue: ") {
				return &InputError{Msg: pgErr.Message}
			}
		case "42501": // insufficient_privilege
			msg := pgErr.Message
			if pgErr.Hint != "" {
				msg += ". " + pgErr.Hint
			}
			return &permissionError{msg: msg}
		case "P0002": // no_data_found
			return &notFoundError{msg: pgErr.Message}
		case "55000": // object_not_in_prerequisite_state
			return &stateError{msg: pgErr.Message}
		}
	}
	return err
}
