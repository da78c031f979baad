package taskorch_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/taskorch/taskorch"
)

// A schedule enqueues a task at every tick of its cron expression; the leader of the workers
// enqueues each tick once.
func ExampleClient_AddSchedule() {
	ctx := context.Background()
	client, _ := taskorch.NewClient(exampleDB(), nil)

	created, err := client.AddSchedule(ctx, &taskorch.ScheduleParams{
		Name: "nightly-report",
		Cron: "0 3 * * *", // 03:00 UTC every day
		Args: SendReport{AccountID: 7},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created:", created)

	_, err = client.AddSchedule(ctx, &taskorch.ScheduleParams{Name: "bad", Cron: "every night", Args: SendReport{}})
	fmt.Println(err)

	schedules, _ := client.Schedules(ctx)
	for _, s := range schedules {
		fmt.Println(s.Name, s.Cron, s.TaskType, string(s.Payload), s.NextRunAt.UTC().Format("15:04"))
	}
	// Output:
	// created: true
	// taskorch: invalid schedule: cron "every night": expected exactly 5 fields, found 2: [every night] (want 5 fields: minute hour day-of-month month day-of-week, e.g. "*/15 * * * *", or a descriptor such as @hourly or @every 10m)
	// nightly-report 0 3 * * * send_report {"account_id": 7} 03:00
}

// Periodic tasks declared in code: the worker that leads makes them the schedules declared in
// code (added, updated, or removed when the code no longer declares them), and enqueues their
// ticks as it does any schedule's.
func ExampleWorkerConfig_periodic() {
	ctx := context.Background()
	pool := exampleDB()
	client, _ := taskorch.NewClient(pool, nil)

	ran := make(chan int64, 1)
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(ctx context.Context, t *taskorch.TaskFor[SendReport]) error {
		select {
		case ran <- t.Args.AccountID:
		default:
		}
		return nil
	})
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Handlers: hs,
		Periodic: []taskorch.PeriodicTask{
			{Name: "report-7", Cron: "@every 1s", Args: SendReport{AccountID: 7}},
		},
		PollInterval: 10 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = w.Run(ctx) }()

	fmt.Println("report sent to account", <-ran)
	schedules, _ := client.Schedules(ctx)
	for _, s := range schedules {
		fmt.Println(s.Name, s.Cron, s.TaskType, "declared in code:", s.DeclaredInCode)
	}
	if err := w.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// report sent to account 7
	// report-7 @every 1s send_report declared in code: true
}
