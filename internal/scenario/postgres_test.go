package scenario

// The scenarios again, on the PostgreSQL store. The server is
// $VIGIL_TEST_POSTGRES or a local one with trust authentication, as in
// store/pgstore's tests; without one these tests skip, except under CI=true,
// where they fail.

import (
	"context"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/store/pgstore"
)

func TestScenariosMatchTheReferenceOnPostgreSQL(t *testing.T) {
	requirePostgres(t)
	replayScenarios(t, postgresOptions)
}

func TestRestartOnPostgreSQLReopensTheSameSchema(t *testing.T) {
	requirePostgres(t)
	checkRestartRequeues(t, postgresOptions(t))
}

// postgresOptions opens the runner's store on a fresh schema that is
// dropped when t ends; every restart reopens that schema.
func postgresOptions(t *testing.T) Options {
	schema := freshSchema(t)
	return Options{OpenStore: func(ctx context.Context) (vigil.Store, error) {
		return pgstore.Open(ctx, postgresURL(), pgstore.Options{Schema: schema})
	}}
}

// The shared PostgreSQL test helpers, under the names this package uses.
var (
	postgresURL     = pgtest.URL
	requirePostgres = pgtest.Require
	freshSchema     = pgtest.FreshSchema
)
