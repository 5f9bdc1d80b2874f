package engine

import (
	"bytes"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
)

// Compression dictionaries. Records of an agent are small (a few hundred
// bytes) and alike; per-record compression barely helps them without a
// dictionary. The engine collects the bodies of a store's first records,
// trains a dictionary from them in the background, writes it durably under
// dicts/, and only then compresses new records with it. Dictionaries are
// never removed, so every record stays readable.
//
// An encrypted store (Options.Keyring) trains none: a dictionary is made
// of the text of the records it was trained on, which an encrypted store
// must not hold in the clear, and no key can seal it in a way erasure
// reaches. Sealed with the store's key, it would keep an erased run's
// text for whoever holds the keyring; sealed with a run's key, it would
// serve that run alone, and a run's first records are few (docs/DESIGN.md,
// "Encryption at rest", has the reasons and the cost in bytes).

// maxDictSample is the most of a record body a training sample keeps.
const maxDictSample = 4 << 10

// loadDicts registers every dictionary of the store and selects the newest
// for new records.
func (db *DB) loadDicts() error {
	newest, err := layout.LoadDicts(db.fs, db.dir, db.dicts)
	if err != nil {
		return err
	}
	if db.opts.Keyring != nil && newest != 0 {
		// A dictionary trained by an engine older than the rule above
		// holds agent text in the clear. The records compressed with it
		// need it, so it stays (compressing new records with it adds
		// nothing to the file), and the log says so.
		db.logger.Warn("engine: this encrypted store holds a compression dictionary that an older engine trained on its "+
			"first records, in the clear; the records compressed with it need it, so it stays",
			"dir", db.path(layout.DictsDir), "newest", newest)
	}
	db.curDict.Store(newest)
	if newest != 0 || db.opts.DictSamples < 0 || db.opts.Keyring != nil {
		db.dict.training = true // trained once per store, never in an encrypted one
	}
	return nil
}

// sample keeps a copy of a record body for dictionary training, until
// enough are collected; then it starts training in the background.
func (db *DB) sample(body []byte) {
	db.dict.Lock()
	defer db.dict.Unlock()
	if db.dict.training {
		return
	}
	// A dictionary serves small records; a large one compresses well on
	// its own. Samples are cut to maxDictSample bytes, so that training
	// (whose cost grows faster than its input) stays short even for an
	// agent whose records are 100 KB, and Close, which waits for it, stays
	// prompt.
	body = body[:min(len(body), maxDictSample)]
	db.dict.samples = append(db.dict.samples, append([]byte(nil), body...))
	db.dict.bytes += len(body)
	if len(db.dict.samples) < db.opts.DictSamples {
		return
	}
	db.dict.training = true
	samples := db.dict.samples
	db.dict.samples = nil
	db.dict.done = make(chan struct{})
	go func() {
		defer close(db.dict.done)
		if err := db.trainDict(samples); err != nil {
			// Not fatal: records stay compressed without a dictionary.
			db.unclean.Store(true)
			db.logger.Warn("engine: dictionary training failed", "err", err)
		}
	}()
}

func (db *DB) trainDict(samples [][]byte) error {
	dict, err := frame.TrainDict(samples, db.opts.DictSize)
	if err != nil {
		return err
	}
	id := db.curDict.Load() + 1
	name := db.fs.PathJoin(db.path(layout.DictsDir), layout.DictFileName(id))
	// Durable before any record uses it.
	data := layout.MarshalDict(id, dict)
	// A filesystem may use the buffer it is given to write (pebble's MemFS
	// scribbles over it in race builds): the Replicator gets data intact.
	if err := layout.WriteFileAtomic(db.fs, name, bytes.Clone(data), db.opts.NoSync); err != nil {
		return err
	}
	// Replicated before any record uses it; refused, it stays unused until
	// the next Open ships it.
	if err := db.replicateDict(id, data); err != nil {
		return err
	}
	if err := db.dicts.Add(id, dict); err != nil {
		return err
	}
	db.curDict.Store(id)
	db.logger.Debug("engine: trained compression dictionary", "id", id, "bytes", len(dict), "samples", len(samples))
	return nil
}
