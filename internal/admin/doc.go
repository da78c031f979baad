// Package admin is what operators' tools read and change of the fleet's state: the registered
// workers (ListWorkers), the task types' backlogs and pauses (ListQueues), the running tasks
// that have run longest (RunningLongest), retries, cancels and deletes of tasks by id or by filter,
// recorded with who did them (ActOnTaskIDs, ActOnMatching, CountMatching), and the periodic
// schedules (AddSchedule, RemoveSchedule, ListSchedules, PauseSchedule, ResumeSchedule,
// RunScheduleNow, BackfillSchedule, ScheduleEvents). The CLI (taskorch workers, taskorch tasks,
// taskorch queues list, taskorch schedules), the dashboard and the Client's schedule methods call
// it; the workers themselves never do.
//
// What a worker runs beside its task loop — registering, heartbeating, leadership and the
// leader's duties, among them enqueueing the schedules' ticks — is package maintenance. AddSchedule
// checks a cron expression with maintenance's parser, the one the leader computes the ticks
// with, so a schedule the leader cannot run is refused when it is added.
package admin
