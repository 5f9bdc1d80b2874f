package main

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/continuumdb/continuum/internal/workload"
)

func init() { register(peer{name: "pebbledirect", open: openPebbleDirect}) }

// pebbleDirect is Pebble used directly the way a user would: each of
// intent, certificate and delta a synced Set, and every 50 atoms the whole
// state as a synced Set. Keys: <run> 0x00 <kind> <seq big-endian>, kind
// 'i' intent, 'c' certificate, 'd' delta, 's' snapshot. Pebble's commit
// pipeline shares one WAL fsync among concurrent synced writes.
type pebbleDirect struct {
	db   *pebble.DB
	sync *pebble.WriteOptions
}

// quietLogger drops Pebble's informational logs, which would interleave
// with the harness's output; errors still surface as returned errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}

func openPebbleDirect(dir string, opts Options) (Store, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, fmt.Errorf("pebbledirect: open %s: %w", dir, err)
	}
	s := &pebbleDirect{db: db, sync: pebble.Sync}
	if opts.NoSync {
		s.sync = pebble.NoSync
	}
	return s, nil
}

// pebblePrefix returns the key prefix of kind in run.
func pebblePrefix(run string, kind byte) []byte {
	return append([]byte(run), 0, kind)
}

func (s *pebbleDirect) Atom(ctx context.Context, st *Step) error {
	a := st.Atom
	for _, rec := range []struct {
		kind byte
		v    []byte
	}{{'i', st.Intent}, {'c', st.Cert}, {'d', st.Delta}} {
		if err := s.db.Set(seqKey(pebblePrefix(a.Run, rec.kind), a.Seq), rec.v, s.sync); err != nil {
			return fmt.Errorf("pebbledirect: run %q seq %d record %c: %w", a.Run, a.Seq, rec.kind, err)
		}
	}
	return nil
}

func (s *pebbleDirect) Snapshot(ctx context.Context, run string, seq uint64, state *workload.State) error {
	b, err := state.Encode()
	if err != nil {
		return err
	}
	if err := s.db.Set(seqKey(pebblePrefix(run, 's'), seq), b, s.sync); err != nil {
		return fmt.Errorf("pebbledirect: run %q snapshot %d: %w", run, seq, err)
	}
	return nil
}

func (s *pebbleDirect) Restore(ctx context.Context, run string) (*workload.State, error) {
	// The latest snapshot: the last key under the run's 's' prefix.
	sp := pebblePrefix(run, 's')
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: sp, UpperBound: pebblePrefix(run, 's'+1)})
	if err != nil {
		return nil, err
	}
	var snap []byte
	var snapSeq uint64
	if it.Last() {
		if snapSeq, err = keySeq(it.Key(), len(sp)); err != nil {
			it.Close()
			return nil, err
		}
		snap = append([]byte(nil), it.Value()...)
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	st, err := startState(run, snap)
	if err != nil {
		return nil, err
	}
	if snap != nil && st.Seq != snapSeq {
		return nil, fmt.Errorf("%w: pebbledirect: run %q snapshot key %d holds seq %d", errCorrupt, run, snapSeq, st.Seq)
	}
	dp := pebblePrefix(run, 'd')
	it, err = s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: seqKey(dp, snapSeq+1), UpperBound: pebblePrefix(run, 'd'+1)})
	if err != nil {
		return nil, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		seq, err := keySeq(it.Key(), len(dp))
		if err == nil {
			err = applyDelta(st, seq, it.Value())
		}
		if err != nil {
			it.Close()
			return nil, fmt.Errorf("pebbledirect: %w", err)
		}
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	if st.Seq == 0 {
		return nil, fmt.Errorf("pebbledirect: %w: %q", errNoRun, run)
	}
	return st, nil
}

func (s *pebbleDirect) Close() error { return s.db.Close() }
