package browser_test

import (
	"testing"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// The test databases have the core schema and the comms process (its email flow is shown end
// to end on the processes page).
func TestMain(m *testing.M) { dbtest.Main(m, dbtest.SetsOptions("core", "comms")) }
