package vigil_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// The story of the README, embedded: a manager spawns a worker, a person
// writes into the worker, and the manager's next turn carries exactly one
// notice, whose changesSince gives exactly what changed.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "vigil-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	st, err := sqlitestore.Open(ctx, filepath.Join(dir, "vigil.db"), sqlitestore.Options{}) // synchronous=FULL; holds the file alone
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	woken := make(chan string, 1)
	eng, err := vigil.Open(ctx, st, vigil.Options{
		// Wakes come on their own goroutine: a runtime starts the watcher's turn.
		OnWake: func(watcher string) {
			select {
			case woken <- watcher:
			default:
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()

	worker := vigil.MustRef("agent:main:subagent:alpha")
	// The spawn seeds the manager's cursor on the worker.
	if _, err := eng.Record(ctx, vigil.Record{
		Session: worker, Parent: "agent:main:main", Kind: vigil.KindChildSpawned,
		ActorType: vigil.ActorAgent, ActorID: "agent:main:main", RunID: "run-1", DedupeKey: "child-spawned:run-1",
	}); err != nil {
		log.Fatal(err)
	}
	// A person writes into the worker behind the manager's back.
	if _, err := eng.Record(ctx, vigil.Record{
		Session: worker, Parent: "agent:main:main",
		Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman,
		ActorID: "telegram:42", Summary: "human message via telegram",
	}); err != nil {
		log.Fatal(err)
	}

	// The manager is woken; its turn consumes (and acknowledges) its notice...
	fmt.Println("woken:", <-woken)
	turn, err := eng.Drain(ctx, "agent:main:main")
	if err != nil {
		log.Fatal(err)
	}
	for _, n := range turn.Events {
		fmt.Println(n.Text)
	}
	// ...and reconciles exactly, from the version the notice names.
	delta, err := eng.ChangesSince(ctx, worker, 1, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("state version:", delta.StateVersion)
	for _, e := range delta.Events {
		fmt.Println(e.Sequence, e.Kind, e.ActorType, e.ActorID, e.Summary)
	}
	// Output:
	// woken: agent:main:main
	// Session "agent:main:subagent:alpha" changed (other actor). Reconcile before acting: session_status sessionKey "agent:main:subagent:alpha" changesSince 1.
	// state version: 2
	// 2 human_direct_message human telegram:42 human message via telegram
}
