package main

import (
	"context"
	"testing"

	"github.com/continuumdb/continuum/internal/wireframe"
)

// TestFramesBudget: a frames connection holds at most its budget of
// request bytes read and not yet served (not 128 bodies of --max-body):
// a frame that would pass it waits until a handler gives bytes back, one
// frame of the largest size is always taken when none are held, and a
// wait ends with the connection.
func TestFramesBudget(t *testing.T) {
	fs := &framesServer{maxBody: 1 << 20}
	fc := &framesConn{fs: fs, freed: make(chan struct{}, 1)}
	fc.ctx, fc.cancel = context.WithCancel(context.Background())
	defer fc.cancel()
	largest := int64(wireframe.MaxHead) + fs.maxBody + 8
	if !fc.take(largest) {
		t.Fatal("the largest frame refused with nothing held")
	}
	small := (fs.budget() - largest) / 4
	for i := range 4 {
		if !fc.take(small) {
			t.Fatalf("small frame %d refused within the budget", i)
		}
	}
	if fc.take(largest) || fc.take(small) {
		t.Fatalf("taken past the budget: %d bytes held, budget %d", fc.mu.held, fs.budget())
	}
	for range 4 {
		fc.free(small)
	}
	if fc.take(largest) {
		t.Fatal("a second largest frame taken beside one held")
	}
	fc.free(largest)
	if !fc.take(largest) {
		t.Fatal("refused once nothing was held")
	}
	// hold waits for bytes given back, and for the connection's end.
	if !fc.take(4 * small) {
		t.Fatal("the budget's rest refused")
	}
	granted := make(chan bool)
	go func() { granted <- fc.hold(small) }()
	fc.free(4 * small)
	if !<-granted {
		t.Fatal("hold refused after bytes were given back")
	}
	go func() { granted <- fc.hold(largest) }()
	fc.cancel()
	if <-granted {
		t.Fatal("hold granted on a connection that ended")
	}
}
