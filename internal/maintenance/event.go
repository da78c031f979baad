package maintenance

import "time"

// EventKind says what happened; see Event.
type EventKind int

// The kinds of Event, with the fields each sets.
const (
	// EventRegistered: the worker's row was written, at start or again (Reregistered) after a
	// leader reaped the worker or its session was lost: then the tasks it held may have been
	// recovered, and its outcomes for them will be refused. Tasks: the tasks of a previous
	// process under the same id that the registration recovered (taking the id over).
	EventRegistered EventKind = iota + 1
	// EventHeartbeat: one heartbeat was written. Quiet: an operator quieted this process
	// (queues.quiet_worker): the worker claims nothing more until a heartbeat says otherwise.
	EventHeartbeat
	// EventElected: this worker became the leader (Term).
	EventElected
	// EventDeposed: this worker is no longer the leader (Term: the one it held), because another
	// took over, its lease lapsed unrenewed, or it resigned at shutdown.
	EventDeposed
	// EventReaped: a reaper pass as leader (Term) removed Workers, recovering Tasks tasks.
	EventReaped
	// EventPruned: a retention pass as leader (Term) deleted Tasks tasks and their history.
	EventPruned
	// EventScheduled: the leader (Term) enqueued task TaskID for tick Tick of Schedule (or found
	// it enqueued already); Late when that was more than Config.ScheduleLateAfter after the tick
	// (the leader caught it up after a handover or an outage).
	EventScheduled
	// EventError: Op failed with Err; it is retried at its next interval.
	EventError
	// EventHistory: a retention pass as leader (Term) maintained the partitioned history
	// (queues.maintain_history): History says what it created, moved and dropped.
	EventHistory
	// EventSessionLost: this worker's session connection was lost (Err); it registers again on
	// a new one.
	EventSessionLost
	// EventSessionCheck: a pass of the session reaper as leader (Term), which recovered the
	// tasks of Workers (none, mostly; each recovery is also an EventReaped).
	EventSessionCheck
	// EventTicksMissed: the leader (Term) skipped Missed ticks of Schedule, the oldest at Tick,
	// because they were older than Config.ScheduleCatchUp when it found them (the catch-up
	// policy); they will never be enqueued (docs/operations.md, "Periodic schedules").
	EventTicksMissed
)

var eventKindNames = map[EventKind]string{
	EventRegistered:   "registered",
	EventHeartbeat:    "heartbeat",
	EventElected:      "elected",
	EventDeposed:      "deposed",
	EventReaped:       "reaped",
	EventPruned:       "pruned",
	EventScheduled:    "scheduled",
	EventError:        "error",
	EventHistory:      "history",
	EventSessionLost:  "session_lost",
	EventSessionCheck: "session_check",
	EventTicksMissed:  "ticks_missed",
}

func (k EventKind) String() string {
	if s, ok := eventKindNames[k]; ok {
		return s
	}
	return "unknown"
}

// Event is something a Maintainer did, passed to Config.OnEvent. Kind says which fields are set.
type Event struct {
	Kind         EventKind
	Reregistered bool           // EventRegistered
	Quiet        bool           // EventHeartbeat
	Term         int64          // leadership and leader actions
	Workers      []ReapedWorker // EventReaped, EventSessionCheck
	Tasks        int            // EventReaped (recovered), EventPruned (deleted), EventRegistered (taken over)
	Schedule     string         // EventScheduled, EventTicksMissed
	Tick         time.Time      // EventScheduled, EventTicksMissed (the oldest skipped)
	TaskID       int64          // EventScheduled
	Late         bool           // EventScheduled
	Missed       int            // EventTicksMissed
	History      HistoryResult  // EventHistory
	Op           string         // EventError: register, session, heartbeat, leadership, reap, session_reap, prune, history, schedule, resign, deregister
	Err          error          // EventError, EventSessionLost
}
