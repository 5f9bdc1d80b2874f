package engine

// Compression dictionaries: internal/dicttrain's, over bgCore.

import (
	"github.com/continuumdb/continuum/internal/dicttrain"
	"github.com/continuumdb/continuum/internal/replication"
)

// loadDicts registers every dictionary of the store and selects the newest
// for new records.
func (db *DB) loadDicts() error {
	db.dict = dicttrain.New(dicttrain.Config{
		FS: db.fs, Dir: db.dir, NoSync: db.opts.NoSync, Logger: db.logger,
		Samples: db.opts.DictSamples, Size: db.opts.DictSize, Encrypted: db.opts.Keyring != nil,
		Dicts: db.dicts, Current: &db.curDict, OnFailure: func() { db.unclean.Store(true) },
	}, bgCore{db})
	return db.dict.Load()
}

// sample keeps a copy of a record body for dictionary training.
func (db *DB) sample(body []byte) { db.dict.Sample(body) }

// Replicate is the trainer's Host's: the Replicator.
func (h bgCore) Replicate(id uint32, data []byte) error {
	return replication.Dict(h.db.opts.Replicator, id, data)
}
