package runview

import (
	"context"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
)

// Run is one run of the store as a capability reads it (see the package's
// doc).
type Run interface {
	ID() string
	Base() uint64
	ChainHead() (seq uint64, head chain.Hash, ended bool)
	StateAt(ctx context.Context, seq uint64) (*frame.Frame, error)
}
