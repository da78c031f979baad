package taskorch_test

import (
	"context"
	"fmt"
	"log"

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
