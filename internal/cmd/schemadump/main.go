// Command schemadump writes schema.sql, taskorch's schema after every migration of every set,
// as pg_dump prints it (internal/schemadump):
//
//	go run ./internal/cmd/withpg -- go run ./internal/cmd/schemadump -o schema.sql
//
// which is `make schema`. First it brings each set's definitions.sum up to date (a function or
// view file that changed gets its next version: internal/migrate.UpdateSums); run it from the
// repository's root. Then it migrates a scratch database on the server of
// TASKORCH_TEST_DATABASE_URL (withpg starts a private one), dumps it and drops it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/taskorch/taskorch/internal/migrate"
	"github.com/taskorch/taskorch/internal/schemadump"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/migrations"
)

func main() {
	out := flag.String("o", schemadump.FileName, "where to write the dump (- for stdout)")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintf(os.Stderr, "schemadump: %v\n", err)
		os.Exit(1)
	}
}

func run(out string) error {
	for _, set := range migrations.Sets {
		dir := migrations.Dir(set)
		changed, err := migrate.UpdateSums(dir)
		if err != nil {
			return fmt.Errorf("%s: %w (run from the repository's root)", dir, err)
		}
		if changed {
			fmt.Fprintf(os.Stderr, "schemadump: wrote %s/%s\n", dir, migrate.SumsFile)
		}
	}
	server := os.Getenv(dbtest.EnvDatabaseURL)
	if server == "" {
		return fmt.Errorf("%s is not set: run `make schema`, or this under `go run ./internal/cmd/withpg --`", dbtest.EnvDatabaseURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dump, err := schemadump.Generate(ctx, server)
	if err != nil {
		return err
	}
	if out == "-" {
		_, err = os.Stdout.Write(dump)
		return err
	}
	if err := os.WriteFile(out, dump, 0o644); err != nil { //nolint:gosec // a source file, world-readable like the others
		return err
	}
	fmt.Fprintf(os.Stderr, "schemadump: wrote %s (%d bytes)\n", out, len(dump))
	return nil
}
