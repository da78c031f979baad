package taskorch

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/taskorch/taskorch/internal/maintenance"
	"github.com/taskorch/taskorch/internal/worker"
)

// PeriodicTask is a schedule declared in code (WorkerConfig.Periodic): at every tick of Cron the
// leader enqueues one task of Args, as a schedule added with AddSchedule does (docs/worker.md,
// "Periodic tasks declared in code").
type PeriodicTask struct {
	// Name identifies the schedule: 1 to 128 letters, digits, "_", ".", ":" or "-", starting
	// with a letter or digit.
	Name string

	// Cron is when it fires, as ScheduleParams.Cron (parsed with the leader's parser).
	Cron string

	// Args is the payload of every task, and its TaskType their type: a Go handler's type (a
	// type that names a function, db_function or a channel, is refused: add that schedule with
	// AddSchedule). Of the args' default options only Priority and MaxAttempts apply.
	Args TaskArgs

	// Priority of the tasks: nil means the args' default, else 0.
	Priority *int

	// MaxAttempts of the tasks: 0 means the args' default, else the database's (25).
	MaxAttempts int
}

var scheduleNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)

// maxPeriodic bounds WorkerConfig.Periodic (queues.declare_schedules takes at most 1,000).
const maxPeriodic = 1000

// periodicSchedules checks the code's periodic tasks and makes them what the leader declares:
// each name once, a cron expression the leader can parse and that fires, args that encode as
// Enqueue would encode them.
func periodicSchedules(list []PeriodicTask) ([]maintenance.Periodic, error) {
	if len(list) > maxPeriodic {
		return nil, &InputError{Msg: fmt.Sprintf("WorkerConfig.Periodic has %d tasks, over %d", len(list), maxPeriodic)}
	}
	out := make([]maintenance.Periodic, 0, len(list))
	seen := map[string]bool{}
	enc := &Client{}
	for i, p := range list {
		bad := func(format string, args ...any) error {
			return &InputError{Msg: fmt.Sprintf("WorkerConfig.Periodic[%d] (%q): ", i, p.Name) + fmt.Sprintf(format, args...)}
		}
		if !scheduleNameRE.MatchString(p.Name) || len(p.Name) > 128 {
			return nil, bad(`the name must be 1 to 128 letters, digits, "_", ".", ":" or "-", starting with a letter or digit`)
		}
		if seen[p.Name] {
			return nil, bad("the name is declared twice")
		}
		seen[p.Name] = true
		c, err := maintenance.ParseCron(p.Cron)
		if err != nil {
			return nil, bad("cron: %v", err)
		}
		if c.Next(time.Now()).IsZero() {
			return nil, bad("cron %q never fires", p.Cron)
		}
		row, err := enc.prepare(p.Args, &EnqueueOpts{Priority: p.Priority, MaxAttempts: p.MaxAttempts}, "")
		if err != nil {
			return nil, bad("%v", err)
		}
		if row.taskType == TypeDBFunction || worker.IsChannelType(row.taskType) {
			return nil, bad("task type %s names a function: add that schedule with AddSchedule", row.taskType)
		}
		mp := maintenance.Periodic{Name: p.Name, Cron: p.Cron, TaskType: row.taskType, Payload: json.RawMessage(row.payload), Priority: int(row.priority)}
		if row.maxAttempts != nil {
			mp.MaxAttempts = int(*row.maxAttempts)
		}
		out = append(out, mp)
	}
	return out, nil
}
