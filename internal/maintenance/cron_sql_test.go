package maintenance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// queues.add_schedule, called as an operator's role granted what docs/security.md grants for
// schedules, gives every expression the verdict of the leader's parser (ParseCron): the
// hand-picked ones (the accepted syntax of docs/operations.md, "Periodic schedules", and the
// mistakes), and a thousand generated from the grammar with its mistakes. A refused one is
// 22023 naming _cron, and writes nothing; an accepted one is stored trimmed.
func TestAddScheduleAgreesWithTheLeader(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	ops := opsRole(t, pool)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "set local role "+pgx.Identifier{ops}.Sanitize())
	require.NoError(t, err)

	sqlOK := func(name, expr string) (bool, string) {
		_, err := tx.Exec(ctx, "savepoint s")
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `select queues.add_schedule($1, $2, 'cron.probe')`, name, expr)
		if err == nil {
			require.Equal(t, strings.Trim(expr, " "), scalar[string](t, tx, `select cron from queues.schedule where name = $1`, name))
			return true, ""
		}
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%q: %v", expr, err)
		require.Equal(t, "22023", pgErr.Code, "%q: %v", expr, err)
		require.True(t, strings.HasPrefix(pgErr.Message, "add_schedule: _cron"), pgErr.Message)
		_, err = tx.Exec(ctx, "rollback to savepoint s")
		require.NoError(t, err)
		require.Zero(t, scalar[int64](t, tx, `select count(*) from queues.schedule where name = $1`, name), expr)
		return false, pgErr.Message
	}

	exprs := []string{
		"* * * * *", "*/15 9-17 * * MON-FRI", "0 0 1 jan,jul *", "@hourly", "@every 10m", "@every 1h30m",
		"@every 1.5h", "@every .5s", "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight",
		"CRON_TZ=Europe/Paris 0 9 * * *", "TZ=UTC 0 0 * * *", "CRON_TZ=UTC @every 5m", "CRON_TZ=Etc/UTC @hourly",
		"? ? ? ? ?", "0 0 29 2 *", "0 0 31 4,6 *", "0 0 31 4,6 1", "0 0 30 2 */2",
		"0 0 30 2 *", "0 0 30 2 */1", "0 0 30 2 ?", "0 0 31 2,4 *", "0 0 31 2,4,5 *", "5/10 * * * *",
		"5-50/10 * * * *", "*/0 * * * *", "61 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *", "* * * 13 *",
		"* * * * 7", "* * * JAN-DEC SUN-SAT", "* * * jan-DEC sun-sat", "1-2-3 * * * *", "1/2/3 * * * *",
		"10-5 * * * *", "a * * * *", "* * * * MON-", ", * * * *", "1,,2 * * * *", "+5 * * * *", "-5 * * * *",
		"* * * *", "* * * * * *", "@fortnightly", "@every banana", "@every 0s", "@every", "@every -5m",
		"@every 0", "@every +5m", "@every 1.s", "@every 0.0000001ns", "@every 0.5ns", "@every 1ns",
		"@every 2562047h", "@every 2562048h", "@every 99999999999h", "@every 5", "@every  5m", "@every 1h-5m",
		"CRON_TZ=UTC @every 0s", "CRON_TZ=Nowhere * * * * *", "CRON_TZ= * * * * *", "CRON_TZ=UTC",
		"TZ=UTC", "CRON_TZ=Local * * * * *", "CRON_TZ=UTC  * * * * *", "@HOURLY", "0 0 * * 0,6", "*/1 * * * *",
		"0 0 1-31/2 2 *", "0 0 30-31 2 mon", "00 00 01 01 00", " @hourly", "@hourly ", "  */5 * * * *  ",
		"", " ", "CRON_TZ=US/Pacific 0 9 * * *", "CRON_TZ=EST5EDT 0 9 * * *", "CRON_TZ=Etc/GMT+5 0 9 * * *",
		"CRON_TZ=GMT @daily", "CRON_TZ=Europe/Kyiv 0 9 * * *", "CRON_TZ=posix/Europe/Paris 0 9 * * *",
		"CRON_TZ=right/UTC 0 9 * * *", "CRON_TZ=posixrules 0 9 * * *", "CRON_TZ=zone.tab 0 9 * * *",
		"CRON_TZ=../../etc/passwd 0 9 * * *", "CRON_TZ=europe/paris 0 9 * * *", "CRON_TZ=Factory 0 9 * * *",
		"CRON_TZ=localtime 0 9 * * *", "CRON_TZ=right/Europe/Paris 0 9 * * *", "CRON_TZ=Europe 0 9 * * *",
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		exprs = append(exprs, randomCron(r))
	}
	for i, expr := range exprs {
		_, goErr := ParseCron(expr)
		got, msg := sqlOK(fmt.Sprintf("probe-%d", i), expr)
		if goErr != nil && got {
			t.Errorf("%q: the leader refuses it (%v), the database accepts it", expr, goErr)
		}
		if goErr == nil && !got {
			t.Errorf("%q: the leader accepts it, the database refuses it: %s", expr, msg)
		}
	}
}

// opsRole creates an operator's role granted what docs/security.md grants for schedules, and
// returns its name.
func opsRole(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	name := fmt.Sprintf("ops_cron_%d", rand.Uint64())
	id := pgx.Identifier{name}.Sanitize()
	mustExec(t, pool, "create role "+id+" nologin")
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "drop owned by "+id+"; drop role "+id)
		require.NoError(t, err)
	})
	mustExec(t, pool, `grant usage on schema queues to `+id+`;
grant execute on function
    queues.add_schedule(text, text, text, jsonb, integer, integer, boolean, timestamptz),
    queues.put_schedule(text, text, text, jsonb, integer, integer, boolean, timestamptz),
    queues.permit_task_functions(text[], jsonb[]),
    queues.remove_schedule(text)
  to `+id+`;
grant insert on queues.enqueue_permit to `+id+`;
grant select on queues.schedule to `+id)
	return name
}

// randomCron makes a cron expression from the grammar, with its usual mistakes.
func randomCron(r *rand.Rand) string {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	num := func(min, max int) string { return fmt.Sprint(min - 2 + r.IntN(max-min+5)) } // a little out of range too
	names := map[int][]string{3: {"jan", "feb", "Mar", "APR", "dec", "foo"}, 4: {"sun", "Mon", "FRI", "sat", "xyz"}}
	bounds := [][2]int{{0, 59}, {0, 23}, {1, 31}, {1, 12}, {0, 6}}
	value := func(i int) string {
		if ns, ok := names[i]; ok && r.IntN(3) == 0 {
			return pick(ns...)
		}
		return num(bounds[i][0], bounds[i][1])
	}
	rng := func(i int) string {
		switch r.IntN(8) {
		case 0:
			return pick("*", "?")
		case 1:
			return pick("*", "?") + "/" + fmt.Sprint(r.IntN(8))
		case 2:
			return value(i) + "-" + value(i)
		case 3:
			return value(i) + "-" + value(i) + "/" + fmt.Sprint(r.IntN(5))
		case 4:
			return value(i) + "/" + fmt.Sprint(r.IntN(5))
		case 5:
			return pick("", "a", "1-", "-1", "1--2", "1//2", "*-3")
		default:
			return value(i)
		}
	}
	field := func(i int) string {
		parts := make([]string, 1+r.IntN(3))
		for j := range parts {
			parts[j] = rng(i)
		}
		return strings.Join(parts, ",")
	}
	switch r.IntN(12) {
	case 0:
		return pick("@yearly", "@monthly", "@weekly", "@daily", "@hourly", "@every "+fmt.Sprint(r.IntN(3))+pick("s", "m", "h", "ms", "x", ""), "@nope")
	case 1:
		n := 3 + r.IntN(5)
		fs := make([]string, n)
		for i := range fs {
			fs[i] = field(i % 5)
		}
		return strings.Join(fs, " ")
	}
	fs := make([]string, 5)
	for i := range fs {
		fs[i] = field(i)
	}
	expr := strings.Join(fs, " ")
	if r.IntN(10) == 0 {
		expr = pick("CRON_TZ=UTC ", "TZ=America/New_York ", "CRON_TZ=Mars/Olympus ") + expr
	}
	return expr
}

// queues.add_schedule refuses what the leader could not run, with 22023 and nothing written.
func TestAddScheduleRefusesBadCron(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	for expr, msg := range map[string]string{
		"@every banana": `_cron '@every banana': '@every banana' is not a descriptor`,
		"61 * * * *":    `_cron: minute field '61' is out of range: 0 to 59`,
		"0 0 30 2 *":    `never fires`,
		"* * * *":       `has 4 field(s): want 5`,
	} {
		_, err := pool.Exec(ctx, `select queues.add_schedule('s', $1, 't')`, expr)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, expr)
		require.Equal(t, "22023", pgErr.Code, expr)
		require.Contains(t, pgErr.Message, msg, expr)
	}
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.schedule`))
	mustExec(t, pool, `select queues.add_schedule('s', 'CRON_TZ=Europe/Paris */5 9-17 * * mon-fri', 't')`)
}
