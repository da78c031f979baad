package bench

import (
	"context"
	"fmt"
	"time"
)

// notifyCoalesce reads queues.notify_coalesce_ms() and, when want is set and differs, sets
// queues.settings.notify_coalesce_ms for the run. restore puts the previous value back, unless
// someone changed the setting meanwhile (it is a no-op when nothing was changed); it runs even
// when ctx is done.
func (e *Env) notifyCoalesce(ctx context.Context, want *int) (ms int, restore func(), err error) {
	restore = func() {}
	var prev int
	if err := e.admin.QueryRow(ctx, `select coalesce(queues.notify_coalesce_ms(), 0)`).Scan(&prev); err != nil {
		return 0, restore, fmt.Errorf("bench: read queues.notify_coalesce_ms(): %w", err)
	}
	if want == nil || *want == prev {
		return prev, restore, nil
	}
	if *want < 0 {
		return 0, restore, fmt.Errorf("bench: a notify coalescing window is 0 ms or more, got %d", *want)
	}
	if err := e.setNotifyCoalesce(ctx, prev, *want); err != nil {
		return 0, restore, err
	}
	restore = func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := e.setNotifyCoalesce(ctx, *want, prev); err != nil {
			e.log.Warn("bench: could not restore queues.settings.notify_coalesce_ms", "value", prev, "error", err)
		}
	}
	return *want, restore, nil
}

// setNotifyCoalesce changes queues.settings.notify_coalesce_ms from from to to; a value someone
// else set meanwhile is left alone.
func (e *Env) setNotifyCoalesce(ctx context.Context, from, to int) error {
	_, err := e.admin.Exec(ctx,
		`update queues.settings set notify_coalesce_ms = $2 where notify_coalesce_ms = $1`, from, to)
	if err != nil {
		return fmt.Errorf("bench: set queues.settings.notify_coalesce_ms to %d ms (the bench's user needs UPDATE on queues.settings): %w", to, err)
	}
	return nil
}
