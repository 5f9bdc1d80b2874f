package main

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/continuumdb/continuum/internal/workload"
)

// Step is one atom as the harness hands it to a store: the scripted atom,
// its three records already encoded, and the run's accumulated state after
// it. All of it is read-only and owned by the harness; a store that keeps
// any of it past the call must copy it.
type Step struct {
	Atom   workload.Atom
	Intent []byte // JSON: run, seq, tool, key, idempotent, args
	Cert   []byte // JSON: run, seq, key, result
	Delta  []byte // workload.EncodeDelta(Atom)
	// State is the run's whole state after this atom. Stores that write a
	// full checkpoint per step encode it; the others ignore it.
	State *workload.State
}

// Store is one way of making an agent durable. Atom and Snapshot are
// called concurrently for different runs, never for the same run.
type Store interface {
	// Atom makes the step durable: when it returns nil, a crash loses none
	// of it.
	Atom(ctx context.Context, s *Step) error
	// Snapshot makes the run's whole state at seq durable. Stores whose
	// recovery does not need application-level snapshots do nothing.
	Snapshot(ctx context.Context, run string, seq uint64, state *workload.State) error
	// Restore rebuilds the run's state as of its last durable atom. A run
	// with no atoms gives an error matching errNoRun.
	Restore(ctx context.Context, run string) (*workload.State, error)
	// Close releases the store; it must be called once.
	Close() error
}

// Options tell an opener how to open a store.
type Options struct {
	// NoSync turns durability off (no fsync). Only the history-size
	// experiment uses it, to build histories faster; it never measures
	// writes made with NoSync.
	NoSync bool
}

// opener opens (or creates) a store in dir, which exists.
type opener func(dir string, opts Options) (Store, error)

// peer is one entry of the registry.
type peer struct {
	name string
	open opener
	// quadratic marks a store that writes the whole state at every atom:
	// its write volume grows as atoms^2, which the history experiment
	// bounds with -maxwrite.
	quadratic bool
}

// registry lists the stores the harness knows, in the order of the tables
// and legends. Adding a store is one file and one line here (see
// continuum.go).
var registry = []peer{}

// register adds a store to the registry; stores call it from init.
func register(p peer) {
	registry = append(registry, p)
	sort.SliceStable(registry, func(i, j int) bool { return order(registry[i].name) < order(registry[j].name) })
}

// order fixes the position of the known stores in tables and legends.
func order(name string) int {
	for i, n := range []string{"continuum", "continuumrelaxed", "groupcommit", "pebbledirect", "bbolt", "sqlite", "sqlitecheckpoint"} {
		if n == name {
			return i
		}
	}
	return 100
}

// lookup returns the registered peers with the given names, in registry
// order; an unknown name is an error that lists the known ones.
func lookup(names []string) ([]peer, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []peer
	for _, p := range registry {
		if want[p.name] {
			out = append(out, p)
			delete(want, p.name)
		}
	}
	if len(want) > 0 {
		var unknown, known []string
		for n := range want {
			unknown = append(unknown, n)
		}
		for _, p := range registry {
			known = append(known, p.name)
		}
		sort.Strings(unknown)
		return nil, fmt.Errorf("peers: unknown store %q (known: %q)", unknown, known)
	}
	return out, nil
}

// errNoRun is returned by Restore for a run that has no atoms.
var errNoRun = errors.New("peers: run not found")

// errCorrupt is returned when a store gives back records that do not
// decode or do not follow one another.
var errCorrupt = errors.New("peers: corrupt record")
