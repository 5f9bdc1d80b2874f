package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/ledger"
)

// fencedService is a downstream that checks fencing tokens: it remembers
// the largest token it has seen and refuses a request with a smaller one,
// so that a writer another has replaced can never act through it, however
// late its request arrives.
type fencedService struct {
	mu      sync.Mutex
	highest uint64
	effects map[string]int
}

var errStaleToken = errors.New("stale fencing token")

func (s *fencedService) charge(token uint64, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.highest {
		return fmt.Errorf("%w: %d, the service has seen %d", errStaleToken, token, s.highest)
	}
	s.highest = token
	s.effects[key]++
	return nil
}

// An exec passes its writer's fencing token beside the idempotency key; the
// downstream refuses the requests of a writer older than one it has heard
// from.
func ExampleFencingToken() {
	dir, err := os.MkdirTemp("", "continuum-fencing")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	svc := &fencedService{effects: map[string]int{}}
	exec := func(ctx context.Context, key string) ([]byte, error) {
		token, _ := engine.FencingToken(ctx)
		if err := svc.charge(token, key); err != nil {
			return nil, err
		}
		return []byte("charged"), nil
	}

	db, err := engine.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	run, _ := db.Run(ctx, "r")
	atom, _ := run.Begin(ctx)
	if _, err := atom.Do(ctx, ledger.Action{Tool: "charge", Args: []byte(`{"cents":100}`)}, exec); err != nil {
		log.Fatal(err)
	}
	old := db.FencingToken()
	if err := atom.Fail(ctx, "handing over"); err != nil {
		log.Fatal(err)
	}
	db.Close()

	// The next writer of the store has a larger token.
	db, err = engine.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	fmt.Println("the new writer's token is larger:", db.FencingToken() > old)
	run, _ = db.Run(ctx, "r")
	atom, _ = run.Begin(ctx)
	if _, err := atom.Do(ctx, ledger.Action{Tool: "charge", Args: []byte(`{"cents":200}`)}, exec); err != nil {
		log.Fatal(err)
	}
	// A request of the old writer that arrives late is refused.
	err = svc.charge(old, "late request")
	fmt.Println("late request of the old writer refused:", errors.Is(err, errStaleToken))
	// Output:
	// the new writer's token is larger: true
	// late request of the old writer refused: true
}
