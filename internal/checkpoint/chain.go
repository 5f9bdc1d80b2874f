package checkpoint

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// ChainRecord returns the log record of chain checkpoint c, signed by
// signer (nil: unsigned).
func ChainRecord(signer *chain.Signer, c chain.Checkpoint) ([]byte, error) {
	if signer == nil {
		return record.AppendNote(nil, record.KindCheckpoint, chain.MarshalCheckpoint(c)), nil
	}
	b, err := signer.SignCheckpoint(c)
	if err != nil {
		return nil, err
	}
	return record.AppendNote(nil, record.KindCheckpoint, b), nil
}

// StoreHeadRecord returns the log record of store head h, signed by
// signer (nil: unsigned).
func StoreHeadRecord(signer *chain.Signer, h chain.StoreHead) ([]byte, error) {
	if signer == nil {
		return record.AppendNote(nil, record.KindStoreHead, chain.MarshalStoreHead(h)), nil
	}
	b, err := signer.SignStoreHead(h)
	if err != nil {
		return nil, err
	}
	return record.AppendNote(nil, record.KindStoreHead, b), nil
}

// AppendChain appends the chain checkpoint c (signed by signer, nil:
// unsigned) to log without waiting for its fsync, and returns the
// record's size.
func AppendChain(log *wal.Log, signer *chain.Signer, c chain.Checkpoint) (int, error) {
	rec, err := ChainRecord(signer, c)
	if err != nil {
		return 0, fmt.Errorf("engine: sign checkpoint of run %q at %d: %w", c.RunID, c.Seq, err)
	}
	log.AppendAsync(rec)
	return len(rec), nil
}

// AppendStoreHead appends the store head h (signed by signer, nil:
// unsigned) to log, and waits for its fsync if wait is set. A head that
// lists no run is not written.
func AppendStoreHead(log *wal.Log, signer *chain.Signer, h chain.StoreHead, wait bool) error {
	if len(h.Runs) == 0 {
		return nil
	}
	rec, err := StoreHeadRecord(signer, h)
	if err != nil {
		return fmt.Errorf("engine: sign store head: %w", err)
	}
	w := log.AppendAsync(rec)
	if !wait {
		return nil
	}
	if _, err := w.Wait(context.Background()); err != nil {
		return fmt.Errorf("engine: store head: %w", err)
	}
	return nil
}
