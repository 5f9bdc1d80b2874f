package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/continuumdb/continuum/internal/workload"
	bolt "go.etcd.io/bbolt"
)

func init() { register(peer{name: "bbolt", open: openBolt}) }

// boltStore keeps each record kind in its own bucket, keyed by <run> 0x00
// <seq big-endian>; every record is its own Update (one synced
// transaction: bbolt writes the dirty pages, fdatasyncs, then writes and
// fdatasyncs the meta page). bbolt runs one writer at a time.
type boltStore struct {
	db *bolt.DB
}

var boltBuckets = [][]byte{[]byte("intent"), []byte("cert"), []byte("delta"), []byte("snap")}

func openBolt(dir string, opts Options) (Store, error) {
	path := filepath.Join(dir, "bolt.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("bbolt: open %s: %w", path, err)
	}
	db.NoSync = opts.NoSync
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range boltBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("bbolt: create buckets in %s: %w", path, err)
	}
	return &boltStore{db: db}, nil
}

func boltPrefix(run string) []byte { return append([]byte(run), 0) }

func (s *boltStore) put(bucket int, run string, seq uint64, v []byte) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(boltBuckets[bucket]).Put(seqKey(boltPrefix(run), seq), v)
	})
	if err != nil {
		return fmt.Errorf("bbolt: run %q seq %d %s: %w", run, seq, boltBuckets[bucket], err)
	}
	return nil
}

func (s *boltStore) Atom(ctx context.Context, st *Step) error {
	for i, v := range [][]byte{st.Intent, st.Cert, st.Delta} {
		if err := s.put(i, st.Atom.Run, st.Atom.Seq, v); err != nil {
			return err
		}
	}
	return nil
}

func (s *boltStore) Snapshot(ctx context.Context, run string, seq uint64, state *workload.State) error {
	b, err := state.Encode()
	if err != nil {
		return err
	}
	return s.put(3, run, seq, b)
}

func (s *boltStore) Restore(ctx context.Context, run string) (*workload.State, error) {
	var st *workload.State
	err := s.db.View(func(tx *bolt.Tx) error {
		p := boltPrefix(run)
		// The latest snapshot: the last key with prefix p.
		c := tx.Bucket(boltBuckets[3]).Cursor()
		k, v := c.Seek(append([]byte(run), 1))
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		var snap []byte
		var snapSeq uint64
		if k != nil && bytes.HasPrefix(k, p) {
			var err error
			if snapSeq, err = keySeq(k, len(p)); err != nil {
				return err
			}
			snap = v
		}
		var err error
		if st, err = startState(run, snap); err != nil {
			return err
		}
		if snap != nil && st.Seq != snapSeq {
			return fmt.Errorf("%w: snapshot key %d of run %q holds seq %d", errCorrupt, snapSeq, run, st.Seq)
		}
		c = tx.Bucket(boltBuckets[2]).Cursor()
		for k, v := c.Seek(seqKey(p, snapSeq+1)); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			seq, err := keySeq(k, len(p))
			if err != nil {
				return err
			}
			if err := applyDelta(st, seq, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bbolt: restore %q: %w", run, err)
	}
	if st.Seq == 0 {
		return nil, fmt.Errorf("bbolt: %w: %q", errNoRun, run)
	}
	return st, nil
}

func (s *boltStore) Close() error { return s.db.Close() }
