package orders_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Every test's client, worker, pools and connections are closed by the time the tests end: no
// goroutine is left behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serverURL is the PostgreSQL server the tests create their databases on: a URL whose user may
// create databases, from TASKORCH_TEST_DATABASE_URL (make test starts a private server and sets
// it). The tests fail without it.
func serverURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("TASKORCH_TEST_DATABASE_URL")
	if u == "" {
		t.Fatal("set TASKORCH_TEST_DATABASE_URL to a postgres:// URL whose user may create databases " +
			"(make test does: it starts a private PostgreSQL)")
	}
	return u
}
