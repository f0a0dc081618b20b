package vigil_test

import (
	"context"
	"path/filepath"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/internal/scenario"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// testEnv is an engine on a fresh SQLite file with a manual clock.
type testEnv struct {
	t     testing.TB
	path  string
	clk   *clock.Manual
	store *sqlitestore.Store
	eng   *vigil.Engine
	opts  vigil.Options
}

// newEnv opens an engine on a fresh store. Automatic pruning is off unless
// opts asks for it; the clock starts at scenario.Start.
func newEnv(t testing.TB, opts vigil.Options) *testEnv {
	t.Helper()
	env := &testEnv{t: t, path: filepath.Join(t.TempDir(), "vigil.db"), clk: clock.NewManual(scenario.Start)}
	if opts.Clock == nil {
		opts.Clock = env.clk
	}
	if opts.PruneInterval == 0 {
		opts.PruneInterval = -1
	}
	env.opts = opts
	env.open()
	t.Cleanup(env.close)
	return env
}

func (env *testEnv) open() {
	env.t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, env.path, sqlitestore.Options{Synchronous: "NORMAL"})
	if err != nil {
		env.t.Fatal(err)
	}
	eng, err := vigil.Open(ctx, st, env.opts)
	if err != nil {
		st.Close()
		env.t.Fatal(err)
	}
	env.store, env.eng = st, eng
}

func (env *testEnv) close() {
	if env.eng != nil {
		env.eng.Close()
		env.store.Close()
		env.eng, env.store = nil, nil
	}
}

// restart drops every in-memory queue and reopens engine and store.
func (env *testEnv) restart() {
	env.t.Helper()
	env.close()
	env.open()
}
