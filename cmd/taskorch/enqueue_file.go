package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch"
)

// enqueueBatch is how many tasks one statement of a bulk enqueue carries.
const enqueueBatch = 1000

// enqueueFile enqueues one task of taskType per line of path (- for standard input), in one
// transaction, a statement per enqueueBatch lines. Progress goes to a terminal only.
func enqueueFile(cmd *cobra.Command, g *globals, taskType, path string, opts *taskorch.EnqueueOpts, maxPayload int) error {
	in := cmd.InOrStdin()
	if path != "-" {
		f, err := os.Open(path) //nolint:gosec // the operator names the file to read
		if err != nil {
			return usageErrorf("--file: %v", err)
		}
		defer func() { _ = f.Close() }()
		in = f
	}
	c, closeFn, err := g.clientWith(cmd.Context(), &taskorch.ClientConfig{MaxPayloadBytes: maxPayload})
	if err != nil {
		return err
	}
	defer closeFn()

	var progress io.Writer
	if isTTY(cmd.ErrOrStderr()) {
		progress = cmd.ErrOrStderr()
	}
	ctx := cmd.Context()
	var total int
	var first, last int64
	start, lastReport := time.Now(), time.Now()
	err = pgx.BeginFunc(ctx, c.Pool(), func(tx pgx.Tx) error {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64*1024), 16<<20)
		batch := make([]taskorch.EnqueueParams, 0, enqueueBatch)
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			results, err := c.EnqueueManyTx(ctx, tx, batch)
			if err != nil {
				return fmt.Errorf("lines %d to %d: %w", total-len(batch)+1, total, err)
			}
			if first == 0 {
				first = results[0].TaskID
			}
			last = results[len(results)-1].TaskID
			batch = batch[:0]
			if progress != nil && time.Since(lastReport) > time.Second {
				lastReport = time.Now()
				fmt.Fprintf(progress, "\renqueued %d tasks (%.0f/s)", total, float64(total)/time.Since(start).Seconds())
			}
			return nil
		}
		line := 0
		for sc.Scan() {
			line++
			text := sc.Text()
			if len(text) == 0 {
				continue
			}
			payload, err := parsePayload(text)
			if err == nil {
				err = checkPayloadSize(len(payload), maxPayload)
			}
			if err != nil {
				return usageErrorf("line %d: %v", line, err)
			}
			total++
			batch = append(batch, taskorch.EnqueueParams{Args: taskorch.RawArgs{Type: taskType, Payload: payload}, Opts: opts})
			if len(batch) == enqueueBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := sc.Err(); err != nil {
			return usageErrorf("--file: line %d: %v", line+1, err)
		}
		return flush()
	})
	if progress != nil && total > 0 {
		fmt.Fprintln(progress)
	}
	if err != nil {
		return err
	}
	if g.jsonOut {
		return writeJSON(cmd.OutOrStdout(), map[string]any{"enqueued": total, "first_task_id": first, "last_task_id": last})
	}
	fmt.Fprintf(cmd.OutOrStdout(), "enqueued %d tasks\n", total)
	return nil
}
