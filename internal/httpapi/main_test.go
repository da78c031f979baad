package httpapi_test

import (
	"testing"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m, dbtest.CoreOptions()) }
