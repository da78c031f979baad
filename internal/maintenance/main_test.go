package maintenance

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch/internal/dbtest"
	"github.com/taskorch/taskorch/internal/migrate"
	"github.com/taskorch/taskorch/migrations"
)

func TestMain(m *testing.M) {
	ms, err := migrate.LoadSets(migrations.FS, "core")
	if err != nil {
		panic(err)
	}
	dbtest.Main(m, dbtest.Options{
		Fingerprint: migrate.Fingerprint(ms),
		Migrate: func(ctx context.Context, conn *pgx.Conn) error {
			_, err := migrate.Up(ctx, conn, ms)
			return err
		},
	})
}
