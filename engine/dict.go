package engine

// Compression dictionaries: internal/dicttrain's, over dictHost.

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
	}, dictHost{db})
	return db.dict.Load()
}

// sample keeps a copy of a record body for dictionary training.
func (db *DB) sample(body []byte) { db.dict.Sample(body) }

// dictHost is the trainer's Host: the Replicator.
type dictHost struct{ db *DB }

func (h dictHost) Replicate(id uint32, data []byte) error {
	return replication.Dict(h.db.opts.Replicator, id, data)
}
