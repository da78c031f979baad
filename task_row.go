package taskorch

import "github.com/taskorch/taskorch/internal/taskrow"

// taskColumns is the select list that scanTask reads, in order.
const taskColumns = taskrow.Columns

// taskWithResultColumns is taskColumns and the result, which scanTaskWithResult reads.
const taskWithResultColumns = taskrow.WithResultColumns

type rowScanner interface {
	Scan(dest ...any) error
}

func scanTask(r rowScanner) (*Task, error) {
	var t Task
	if err := r.Scan(taskrow.Dest(&t)...); err != nil {
		return nil, err
	}
	return &t, nil
}

func scanTaskWithResult(r rowScanner) (*Task, error) {
	var t Task
	if err := r.Scan(taskrow.DestWithResult(&t)...); err != nil {
		return nil, err
	}
	return &t, nil
}
