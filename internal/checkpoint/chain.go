package checkpoint

import (
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
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
