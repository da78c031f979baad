package main

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/cmd/taskorch/internal/chaos"
	"github.com/taskorch/taskorch/internal/pgcluster"
	"github.com/taskorch/taskorch/internal/testing/replicatest"
	"github.com/taskorch/taskorch/internal/testing/testfixtures"
)

// A primary and a streaming standby (pg_basebackup -R), workers on a multi-host URL
// (target_session_attrs=read-write), tasks arriving and running; the primary dies (SIGKILL of
// every server process) and the standby is promoted. Counted: tasks whose enqueue was
// acknowledged but that the new primary does not have (lost), effects recorded twice, and the
// seconds from the crash to the first completion on the new primary (docs/guarantees.md,
// docs/operations.md "Production topology").

func TestE2EFailoverSynchronous(t *testing.T) {
	t.Parallel()
	r := runFailover(t, true)
	require.Zero(t, r.lost, "synchronous replication: an acknowledged enqueue is on the standby")
}

func TestE2EFailoverAsynchronous(t *testing.T) {
	t.Parallel()
	runFailover(t, false)
}

// replicationDelayMS is how late the standby receives the primary's WAL.
const replicationDelayMS = 50

type failoverResult struct {
	acked, lost, duplicates int
	// rerun: tasks claimed more than once (a completion the crash took, or an attempt cut short).
	rerun int
	// resumeSeconds: from the crash to the first completion on the new primary, of which
	// promoteSeconds were the promotion (pg_ctl promote -w; a failover manager adds its own
	// detection time before that).
	resumeSeconds, promoteSeconds float64
}

// pgExec runs sql (statements without arguments) on a connection of its own.
func pgExec(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	_, err = conn.Exec(ctx, sql)
	return err
}

func runFailover(t *testing.T, synchronous bool) failoverResult {
	ctx := t.Context()
	// The standby streams through toxiproxy, which hands it the primary's WAL 50 ms late: a
	// standby in another zone. Asynchronous commits are acknowledged before their WAL reaches it.
	tp, err := chaos.StartToxiproxy(ctx, filepath.Join(t.TempDir(), "toxiproxy.log"))
	require.NoError(t, err)
	t.Cleanup(tp.Stop)
	link := freePort(t)
	pair := replicatest.Start(t, replicatest.Options{
		// A commit is flushed locally: what is lost is replication's alone.
		Settings: map[string]string{"synchronous_commit": "on"},
		Setup: func(ctx context.Context, primary *pgcluster.Cluster) error {
			if err := pgExec(ctx, primary.URL("postgres"), "create database failover"); err != nil {
				return err
			}
			if r := run(t, "migrate", "up", "--database-url", primary.URL("failover")); r.code != exitOK {
				return fmt.Errorf("migrate: %s", r.err)
			}
			if err := pgExec(ctx, primary.URL("failover"), testfixtures.WorkerSQL); err != nil {
				return err
			}
			// The leader enqueues a tick a second, before and after the failover.
			return pgExec(ctx, primary.URL("failover"), `select queues.add_schedule('failover-tick', '@every 1s', 'taskorch.noop')`)
		},
		StandbyConninfo: func(primaryPort int) string {
			require.NoError(t, tp.Proxy(ctx, "replication", fmt.Sprintf("127.0.0.1:%d", link), fmt.Sprintf("127.0.0.1:%d", primaryPort)))
			require.NoError(t, tp.Latency(ctx, "replication", replicationDelayMS))
			return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=standby", link)
		},
	})
	primary, standby := pair.Primary, pair.Standby
	admin := openPool(t, primary.URL("postgres"))
	onPrimary := openPool(t, primary.URL("failover"))
	wantState := "async"
	if synchronous {
		// Only now, with the standby there to confirm commits (and on the primary alone: the
		// promoted standby must not wait for a standby of its own).
		_, err = admin.Exec(ctx, `alter system set synchronous_standby_names = '*'`)
		require.NoError(t, err)
		_, err = admin.Exec(ctx, `select pg_reload_conf()`)
		require.NoError(t, err)
		wantState = "sync"
	}
	waitFor(t, admin, "the standby streaming", `select exists (select from pg_stat_replication where state = 'streaming' and sync_state = $1)`, wantState)

	multi := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/failover?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		primary.Port(), standby.Port())
	workers := make([]*proc, 2)
	for i := range workers {
		workers[i] = startWorkerProc(t, multi, fmt.Sprintf("TASKORCH_WORKER_ID=failover-%d", i), "TASKORCH_CONCURRENCY=8",
			"TASKORCH_LEASE_DURATION=5s", "TASKORCH_LOG_LEVEL=info")
	}

	// The enqueuer: one task at a time, its note recorded once the commit is acknowledged.
	pool := openPool(t, multi)
	var mu sync.Mutex
	acked := map[string]bool{}
	stopEnqueue := make(chan struct{})
	enqueued := make(chan struct{})
	go func() {
		defer close(enqueued)
		for i := 0; ; i++ {
			select {
			case <-stopEnqueue:
				return
			default:
			}
			note := fmt.Sprintf("fo-%d", i)
			payload := fmt.Sprintf(`{"db_function": "wbiz.supervisor", "note": %q, "child_type": "taskorch.noop"}`, note)
			ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := pool.Exec(ectx, `select queues.enqueue('db_function', $1::jsonb)`, payload)
			cancel()
			if err != nil {
				time.Sleep(20 * time.Millisecond) //nolint:forbidigo // the database is down: try the next one soon
				continue
			}
			mu.Lock()
			acked[note] = true
			mu.Unlock()
			time.Sleep(2 * time.Millisecond) //nolint:forbidigo // about 300 tasks a second
		}
	}()

	waitFor(t, onPrimary, "work under way on the primary", `select count(*) >= 100 from wbiz.effect`)
	crashedAt := time.Now()
	require.NoError(t, primary.Crash())
	require.NoError(t, standby.Promote(ctx))
	promotedAt := time.Now()
	promoted := openPool(t, standby.URL("failover"))
	// A write on the new primary starts after the promotion: what completed before came from the
	// old primary.
	waitFor(t, promoted, "a completion on the new primary", `select exists (select from queues.task where completed_at > $1)`, promotedAt)
	firstCompletion := q[time.Time](t, promoted, `select min(completed_at) from queues.task where completed_at > $1`, promotedAt)
	time.Sleep(time.Second) //nolint:forbidigo // tasks keep arriving on the new primary for a second
	close(stopEnqueue)
	<-enqueued

	mu.Lock()
	notes := maps.Clone(acked)
	mu.Unlock()
	waitFor(t, promoted, "every surviving task finished",
		`select not exists (select from queues.task where status in ('pending', 'running'))`)
	res := failoverResult{acked: len(notes), resumeSeconds: firstCompletion.Sub(crashedAt).Seconds(),
		promoteSeconds: promotedAt.Sub(crashedAt).Seconds()}
	present := map[string]bool{}
	rows, err := promoted.Query(ctx, `select payload->>'note' from queues.task where task_type = 'db_function'`)
	require.NoError(t, err)
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		present[n] = true
	}
	require.NoError(t, rows.Err())
	for n := range notes {
		if !present[n] {
			res.lost++
		}
	}
	res.duplicates = q[int](t, promoted, `select count(*)::int from (select note from wbiz.effect group by note having count(*) > 1) d`)
	require.Zero(t, res.duplicates, "an effect recorded twice")
	res.rerun = q[int](t, promoted, `select count(*)::int from queues.task where task_type = 'db_function' and attempt > 1`)
	require.Zero(t, q[int64](t, promoted, `select count(*) from queues.task where task_type = 'db_function' and status <> 'completed'`),
		"every db_function task that survived completed")
	require.Equal(t, q[int64](t, promoted, `select count(*) from queues.task where task_type = 'db_function'`),
		q[int64](t, promoted, `select count(distinct note) from wbiz.effect`), "one effect per surviving task")
	waitFor(t, promoted, "a leader elected on the new primary", `select exists (select from queues.leader where elected_at > $1 or expires_at > now())`, crashedAt)
	// Schedules go on from the new primary: ticks enqueued after the promotion, each tick once
	// (its idempotency key), whichever leader enqueued the ticks before.
	waitFor(t, promoted, "a schedule tick enqueued on the new primary",
		`select exists (select from queues.task where idempotency_key like 'schedule:failover-tick:%' and enqueued_at > $1)`, promotedAt)
	require.Zero(t, q[int64](t, promoted, `select count(*) from (select payload, scheduled_at from queues.task
		where idempotency_key like 'schedule:failover-tick:%' group by 1, 2 having count(*) > 1) d`), "a tick enqueued twice")
	if !synchronous {
		// The old primary comes back as a primary, with what it had not replicated; the workers'
		// URL lists it first. They have written on the new primary's timeline and refuse it.
		reviveFormerPrimary(t, primary, promoted, workers)
	}
	mode := "asynchronous"
	if synchronous {
		mode = "synchronous"
	}
	t.Logf("failover, %s replication (WAL %d ms late on the standby): %d enqueues acknowledged, %d lost, %d effects twice, %d tasks run again; first completion on the new primary %.2fs after the crash (promotion took %.2fs)",
		mode, replicationDelayMS, res.acked, res.lost, res.duplicates, res.rerun, res.resumeSeconds, res.promoteSeconds)
	return res
}

// reviveFormerPrimary starts the crashed primary again on its port: it comes back writable, on
// the timeline before the promotion. Every worker connection on the new primary is then cut,
// so that each reconnects through the multi-host URL, which lists the old primary first. The
// workers must refuse it (it is on an older timeline than the one they wrote on) and go on on
// the new primary: nothing is written on the revived one.
func reviveFormerPrimary(t *testing.T, old *pgcluster.Cluster, promoted *pgxpool.Pool, workers []*proc) {
	ctx := t.Context()
	revived, err := pgcluster.Start(ctx, pgcluster.Config{DataDir: old.DataDir(), Port: old.Port(), Settings: pgcluster.TestSettings()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = revived.Stop(context.Background()) })
	onRevived := openPool(t, revived.URL("failover"))
	require.False(t, q[bool](t, onRevived, `select pg_is_in_recovery()`), "the old primary came back writable")
	// Whatever it had not replicated may all have been finished before the crash (a loaded
	// machine runs the tasks as fast as they come); work written there now is work a worker
	// connected to it would certainly run.
	for range 5 {
		q[int64](t, onRevived, `select queues.enqueue('taskorch.noop', '{"on": "the revived old primary"}')`)
	}
	snapshot := `select count(*) || ':' || coalesce(md5(string_agg(task_id || status::text || attempt || coalesce(lease_id, 0), ',' order by task_id)), '')
		from queues.task`
	before := q[string](t, onRevived, snapshot)

	_, err = promoted.Exec(ctx, `select pg_terminate_backend(pid) from pg_stat_activity
		where datname = 'failover' and pid <> pg_backend_pid() and backend_type = 'client backend'`)
	require.NoError(t, err)
	// Work that can only finish if the workers reconnected (to the new primary).
	var ids []int64
	for range 20 {
		ids = append(ids, q[int64](t, promoted, `select queues.enqueue('taskorch.noop', '{"after": "revival"}')`))
	}
	waitFor(t, promoted, "the workers working on the new primary after reconnecting",
		`select count(*) = 20 from queues.task where task_id = any($1) and status = 'completed'`, ids)
	require.Equal(t, before, q[string](t, onRevived, snapshot), "a worker wrote on the revived old primary")
	refused := 0
	for _, w := range workers {
		if strings.Contains(w.out.String(), "refusing a former primary") {
			refused++
		}
	}
	require.Positive(t, refused, "a worker said it refused the former primary")
}
