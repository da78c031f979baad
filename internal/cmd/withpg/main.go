// Command withpg runs a command with a private PostgreSQL cluster:
//
//	go run ./internal/cmd/withpg -- go test ./...
//
// It starts one throwaway cluster (internal/pgcluster, with
// pgcluster.TestSettings) in a temporary directory, runs the command with
// TASKORCH_TEST_DATABASE_URL set to the URL of the cluster's "postgres"
// database and stdin, stdout and stderr passed through, then stops and
// deletes the cluster and exits with the command's exit code. SIGINT and
// SIGTERM are forwarded to the command; the cluster is stopped once the
// command has exited.
//
// With -durable the cluster keeps PostgreSQL's default durability (fsync and synchronous_commit
// on) and gets shared_buffers=512MB: the settings benchmarks are measured with (make bench).
//
// If TASKORCH_TEST_DATABASE_URL is already set, withpg just runs the command.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/taskorch/taskorch/internal/pgcluster"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "-durable" {
		durable = true
		args = args[1:]
	}
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: withpg [-durable] -- command [args...]")
		os.Exit(2)
	}
	os.Exit(run(args))
}

// durable selects benchmark settings instead of the fast, non-durable test settings.
var durable bool

// run runs the command args with a cluster and returns the exit code.
func run(args []string) int {
	// Catch the signals from the start so that an early Ctrl-C cannot
	// leave a cluster behind (the cluster's watchdog would clean up, too).
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	if os.Getenv(dbtest.EnvDatabaseURL) != "" {
		return runCommand(args, nil, sigs)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "taskorch-withpg-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "withpg: %v\n", err)
		return 1
	}
	settings := pgcluster.TestSettings()
	if durable {
		settings = map[string]string{"max_connections": "300", "shared_buffers": "512MB"}
	}
	cluster, err := pgcluster.Start(ctx, pgcluster.Config{
		DataDir:   dir,
		Settings:  settings,
		Ephemeral: true,
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		fmt.Fprintf(os.Stderr, "withpg: %v\n", err)
		return 1
	}
	code := runCommand(args, []string{dbtest.EnvDatabaseURL + "=" + cluster.URL("postgres")}, sigs)

	stopCtx, stopCancel := context.WithTimeout(context.Background(), time.Minute)
	defer stopCancel()
	if err := cluster.Stop(stopCtx); err != nil {
		fmt.Fprintf(os.Stderr, "withpg: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// runCommand runs args with extra environment variables env, forwarding the
// signals arriving on sigs, and returns its exit code (128+n if it was killed
// by signal n).
func runCommand(args, env []string, sigs <-chan os.Signal) int {
	cmd := exec.Command(args[0], args[1:]...) //nolint:gosec // running the given command is the tool's job
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "withpg: %v\n", err)
		return 127
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-sigs:
			// A Ctrl-C in a terminal reaches the command directly as
			// well; forwarding covers signals sent to withpg alone.
			_ = cmd.Process.Signal(sig)
		case err := <-done:
			return exitCode(err)
		}
	}
}

// exitCode converts the result of exec.Cmd.Wait into an exit code.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		fmt.Fprintf(os.Stderr, "withpg: %v\n", err)
		return 1
	}
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return exitErr.ExitCode()
}
