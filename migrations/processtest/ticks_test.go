package processtest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// No wake-up of a supervisor is lost: sends started from many sessions at once, while ticks
// run, all end, although the supervisor would not look again on its own for an hour
// (check_interval): every kickoff's wake-up is seen by a tick. One tick is pending at a time.
func TestSupervisorTicksLoseNoWakeUp(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2)
	mustExec(t, pool, `update comms.process_config set check_interval = '1 hour'`)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: &scripted{}})

	const sessions, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pool.Acquire(context.Background())
			if err != nil {
				errs <- err
				return
			}
			defer conn.Release()
			for i := range each {
				// One send per transaction, some with a pause inside it, so kickoffs commit while
				// ticks are reading the agenda.
				tx, err := conn.Begin(context.Background())
				if err != nil {
					errs <- err
					return
				}
				if _, err := tx.Exec(context.Background(), `select comms.send_email($1, 'Hi', 'text')`,
					fmt.Sprintf("s%d-%d@example.com", s, i)); err != nil {
					errs <- err
					return
				}
				if i%5 == 0 {
					time.Sleep(time.Duration(i%7) * time.Millisecond)
				}
				if err := tx.Commit(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		return scalar[int64](t, pool, `select count(*) from comms.send_email_task_succeeded`) == sessions*each
	}, 60*time.Second, 20*time.Millisecond, "every send ends without the hourly check")
	require.Zero(t, scalar[int64](t, pool, `select count(*) from comms.send_email_due`), "the agenda is empty")
	require.Zero(t, scalar[int64](t, pool, `select count(*) from comms.send_email_task_failed`))
	require.Equal(t, int64(sessions*each), scalar[int64](t, pool, `select count(*) from comms.send_email_attempt`), "one attempt each")
	require.LessOrEqual(t, scalar[int64](t, pool, `select count(*) from queues.task where debounce_key = 'tick:comms.send_email_supervisor' and status = 'pending'`),
		int64(1), "at most one tick pending")
}

// The race a lost wake-up would come from, made to happen: a kickoff finds a tick pending (so
// schedules none), and that tick runs before the kickoff commits, so its read of the agenda
// cannot see the new send. The tick notices the wake-up in flight and looks again; the send
// ends, although nothing else would wake the supervisor for an hour.
func TestSupervisorTickSeesAWakeUpInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2)
	mustExec(t, pool, `update comms.process_config set check_interval = '1 hour'`)

	first := scalar[int64](t, pool, `select comms.send_email('first@example.com', 'Hi', 'text')`) // a tick is now pending
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var second int64
	require.NoError(t, tx.QueryRow(ctx, `select comms.send_email('second@example.com', 'Hi', 'text')`).Scan(&second))
	require.Equal(t, int64(1), scalar[int64](t, pool, `select count(*) from queues.task
		where debounce_key = 'tick:comms.send_email_supervisor' and status = 'pending'`), "the kickoff found the first send's tick pending")

	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: &scripted{}})
	waitTrue(t, pool, "the first send ends: its tick ran while the second send was not committed",
		`select exists (select 1 from comms.send_email_task_succeeded where send_email_task_id = $1)`, first)
	require.NoError(t, tx.Commit(ctx))
	waitTrue(t, pool, "the second send ends too",
		`select exists (select 1 from comms.send_email_task_succeeded where send_email_task_id = $1)`, second)
}
