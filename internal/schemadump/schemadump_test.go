package schemadump_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/schemadump"
)

// What changes between runs and minor versions goes; the rest is kept as pg_dump printed it.
func TestNormalize(t *testing.T) {
	t.Parallel()
	raw := "--\n-- PostgreSQL database dump\n--\n\n\\restrict AbC123\n\n" +
		"-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)\n" +
		"-- Dumped by pg_dump version 16.4\n\n" +
		"SET lock_timeout = 0;\n\nCREATE SCHEMA queues;\n\n\n--\n-- PostgreSQL database dump complete\n--\n\n\\unrestrict AbC123\n\n"
	got, err := schemadump.Normalize([]byte(raw))
	require.NoError(t, err)
	require.NotContains(t, string(got), "restrict")
	require.NotContains(t, string(got), "15.18")
	require.Equal(t, "-- Made from PostgreSQL 15 with pg_dump 16.", schemadump.Versions(got))
	require.Contains(t, string(got), "\n\n--\n-- PostgreSQL database dump\n--\n\nSET lock_timeout = 0;\n\nCREATE SCHEMA queues;\n\n\n--\n-- PostgreSQL database dump complete\n--\n")
	require.True(t, len(got) > 0 && got[len(got)-1] == '\n' && got[len(got)-2] != '\n', "ends with one newline")

	again, err := schemadump.Normalize([]byte(raw))
	require.NoError(t, err)
	require.Equal(t, got, again)

	_, err = schemadump.Normalize([]byte("CREATE SCHEMA queues;\n"))
	require.ErrorContains(t, err, "no version lines")
}
