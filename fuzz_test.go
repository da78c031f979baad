package taskorch_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

type fuzzArgs struct {
	ID     int64              `json:"id"`
	Email  string             `json:"email"`
	Tags   []string           `json:"tags"`
	Meta   map[string]any     `json:"meta"`
	Nested *struct{ N uint8 } `json:"nested"`
}

func (fuzzArgs) TaskType() string { return "fuzz.args" }

// FuzzTypedPayload: decoding a payload into a typed handler's args never panics; a payload that
// does not decode is a Discard (failed for good, with the reason), never a retry and never a
// call of the handler with half-decoded args.
func FuzzTypedPayload(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"id": 7, "email": "a@b.c", "tags": ["x"], "meta": {"k": [1, {}]}, "nested": {"N": 3}}`,
		`{"id": "7"}`, `{"id": 1e400}`, `{"nested": {"N": 256}}`, `{"tags": "x"}`, `[]`, `null`, ``, `{"id": 9223372036854775808}`,
	} {
		f.Add([]byte(s))
	}
	hs := taskorch.NewHandlers()
	called := false
	taskorch.AddHandler(hs, func(_ context.Context, _ *taskorch.TaskFor[fuzzArgs]) error {
		called = true
		return nil
	})
	h, _ := hs.HandlerFor("fuzz.args")
	f.Fuzz(func(t *testing.T, payload []byte) {
		called = false
		err := h.Work(context.Background(), &taskorch.Task{ID: 1, Type: "fuzz.args", Payload: payload})
		switch {
		case err == nil && !called:
			t.Fatal("no error, but the handler did not run")
		case err != nil && called:
			t.Fatalf("the handler ran and the decode failed: %v", err)
		case err != nil:
			var d *taskorch.DiscardError
			if !errors.As(err, &d) || !strings.Contains(err.Error(), "payload does not decode into taskorch_test.fuzzArgs") {
				t.Fatalf("a bad payload must be discarded with its reason, got %v", err)
			}
		}
	})
}

// FuzzRunFunctionName: whatever function name a payload carries, internal.run_function, called
// as worker_service_user, runs only the one function that is granted, and refuses everything
// else with a clear error of a known class. An ungranted canary records any call that gets
// through.
func FuzzRunFunctionName(f *testing.F) {
	for _, s := range []string{
		"fz.granted", "fz.canary", "fz.granted; select fz.canary('{}')", `fz."granted"`, "FZ.GRANTED", "fz.granted(jsonb)",
		"pg_catalog.pg_sleep", "fz.granted--", "public.fz", "fz", "", " fz.granted", "fz.granted\x00", `"fz".canary`,
		"fz.granted'); select fz.canary('{}'); --", "fz.Canary", "fz . canary", "\"fz.canary\"", "queues.enqueue",
	} {
		f.Add(s)
	}
	pool := dbtest.NewDB(f)
	ctx := context.Background()
	for _, sql := range []string{
		`create schema fz`,
		`create table fz.called (name text)`,
		`create function fz.granted(_p jsonb) returns jsonb language sql security definer set search_path = pg_catalog, pg_temp
			as $$ select '{"status":"succeeded"}'::jsonb $$`,
		`create function fz.canary(_p jsonb) returns jsonb language plpgsql security definer set search_path = pg_catalog, pg_temp
			as $$ begin insert into fz.called values ('canary'); return '{}'::jsonb; end $$`,
		`revoke all on all functions in schema fz from public`,
		`grant usage on schema fz to worker_service_user`,
		`grant execute on function fz.granted(jsonb) to worker_service_user`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, name string) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, `set local role worker_service_user`); err != nil {
			t.Fatal(err)
		}
		var out []byte
		err = tx.QueryRow(ctx, `select internal.run_function($1, '{}')`, name).Scan(&out)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			if string(out) != `{"status": "succeeded"}` {
				t.Fatalf("%q ran something other than fz.granted: %s", name, out)
			}
		case errors.As(err, &pgErr):
			switch pgErr.Code {
			case "22023", "42883", "42501", "3F000", "22021": // malformed, no such function, not granted, no such schema, bad encoding
			default:
				t.Fatalf("%q: unexpected error class %s: %v", name, pgErr.Code, err)
			}
		default:
			if !strings.Contains(err.Error(), "invalid byte sequence") && !strings.Contains(err.Error(), "0x00") {
				t.Fatalf("%q: %v", name, err)
			}
		}
		_ = tx.Rollback(ctx)
		var n int
		if err := pool.QueryRow(ctx, `select count(*) from fz.called`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("%q reached the ungranted canary", name)
		}
	})
}
