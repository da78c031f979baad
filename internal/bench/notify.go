package bench

import (
	"context"
	"fmt"
	"time"
)

// notifyCoalesce reads queues.notify_coalesce_ms() and, when want is set and differs, replaces
// the function for the run. restore puts the previous value back (it is a no-op when
// nothing was changed); it runs even when ctx is done.
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
	if err := e.setNotifyCoalesce(ctx, *want); err != nil {
		return 0, restore, err
	}
	restore = func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := e.setNotifyCoalesce(ctx, prev); err != nil {
			e.log.Warn("bench: could not restore queues.notify_coalesce_ms()", "value", prev, "error", err)
		}
	}
	return *want, restore, nil
}

// setNotifyCoalesce replaces queues.notify_coalesce_ms() with one returning ms. DDL takes no
// parameters; ms is an int, formatted as a number.
func (e *Env) setNotifyCoalesce(ctx context.Context, ms int) error {
	_, err := e.admin.Exec(ctx, fmt.Sprintf(`create or replace function queues.notify_coalesce_ms() returns integer
		language sql stable parallel safe as $$ select %d $$`, ms))
	if err != nil {
		return fmt.Errorf("bench: replace queues.notify_coalesce_ms() with %d ms (the bench's user must own it): %w", ms, err)
	}
	return nil
}
