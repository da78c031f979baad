package otel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

func scalar[T any](t testing.TB, db taskorch.DBTX, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, db.QueryRow(context.Background(), sql, args...).Scan(&v))
	return v
}
