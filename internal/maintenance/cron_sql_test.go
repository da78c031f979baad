package maintenance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// internal.check_cron, the database's check of a schedule's cron (queues.add_schedule), agrees
// with the leader's parser (ParseCron) on every expression: the hand-picked ones, and a
// thousand generated from the grammar with its mistakes. The one difference it documents:
// @every with a duration that is not positive, which the parser runs every second, is refused.
func TestCheckCronAgreesWithTheLeader(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()

	sqlOK := func(expr string) (bool, string) {
		_, err := conn.Exec(ctx, `select internal.check_cron('add_schedule', $1)`, expr)
		if err == nil {
			return true, ""
		}
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%q: %v", expr, err)
		require.Equal(t, "22023", pgErr.Code, "%q: %v", expr, err)
		require.True(t, strings.HasPrefix(pgErr.Message, "add_schedule: cron "), pgErr.Message)
		return false, pgErr.Message
	}
	goOK := func(expr string) (ok bool) {
		defer func() {
			if recover() != nil {
				ok = false // the parser panics on a TZ= prefix without a space
			}
		}()
		_, err := ParseCron(expr)
		return err == nil
	}

	exprs := []string{
		"* * * * *", "*/15 9-17 * * MON-FRI", "0 0 1 jan,jul *", "@hourly", "@every 10m", "@every 1h30m",
		"@every 1.5h", "@every .5s", "@yearly", "@annually", "@midnight", "CRON_TZ=Europe/Paris 0 9 * * *",
		"TZ=UTC 0 0 * * *", "? ? ? ? ?", "0 0 29 2 *", "0 0 31 4,6 *", "0 0 31 4,6 1", "0 0 30 2 */2",
		"0 0 30 2 *", "0 0 30 2 */1", "0 0 30 2 ?", "0 0 31 2,4 *", "0 0 31 2,4,5 *", "5/10 * * * *",
		"5-50/10 * * * *", "*/0 * * * *", "61 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *", "* * * 13 *",
		"* * * * 7", "* * * JAN-DEC SUN-SAT", "* * * jan-DEC sun-sat", "1-2-3 * * * *", "1/2/3 * * * *",
		"10-5 * * * *", "a * * * *", "* * * * MON-", ", * * * *", "1,,2 * * * *", "+5 * * * *", "-5 * * * *",
		"* * * *", "* * * * * *", "@fortnightly", "@every banana", "@every 0s", "@every", "@every -5m",
		"CRON_TZ=Nowhere * * * * *", "CRON_TZ= * * * * *", "@HOURLY", "0 0 * * 0,6", "*/1 * * * *",
		"0 0 1-31/2 2 *", "0 0 30-31 2 mon", "00 00 01 01 00",
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		exprs = append(exprs, randomCron(r))
	}
	for _, expr := range exprs {
		want := goOK(expr)
		got, msg := sqlOK(expr)
		if !want && got {
			t.Errorf("%q: the leader refuses it, the database accepts it", expr)
		}
		if want && !got && !isNonPositiveEvery(expr) {
			t.Errorf("%q: the leader accepts it, the database refuses it: %s", expr, msg)
		}
	}
}

func isNonPositiveEvery(expr string) bool {
	d := strings.TrimPrefix(expr, "@every ")
	return strings.HasPrefix(expr, "@every ") && (strings.HasPrefix(d, "-") || !strings.ContainsAny(d, "123456789"))
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
		"@every banana": `'@every banana' is not a descriptor`,
		"61 * * * *":    `minute field '61' is out of range: 0 to 59`,
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
