package engine

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/continuumdb/continuum/frame"
)

// Compression dictionaries. Records of an agent are small (a few hundred
// bytes) and alike; per-record compression barely helps them without a
// dictionary. The engine collects the bodies of a store's first records,
// trains a dictionary from them in the background, writes it durably under
// dicts/, and only then compresses new records with it. Dictionaries are
// never removed, so every record stays readable.

const dictSuffix = ".dict"

// maxDictSample is the most of a record body a training sample keeps.
const maxDictSample = 4 << 10

func dictFileName(id uint32) string { return fmt.Sprintf("%08x%s", id, dictSuffix) }

// loadDicts registers every dictionary of the store and selects the newest
// for new records.
func (db *DB) loadDicts() error {
	dir := db.path(dictsDir)
	names, err := db.fs.List(dir)
	if err != nil && !notExist(err) {
		return fmt.Errorf("engine: list %s: %w", dir, unwrapPathErr(err))
	}
	sort.Strings(names)
	var newest uint32
	for _, n := range names {
		if !strings.HasSuffix(n, dictSuffix) {
			continue // a temporary file of an interrupted write
		}
		name := db.fs.PathJoin(dir, n)
		b, err := readFile(db.fs, name)
		if err != nil {
			return fmt.Errorf("engine: read %s: %w", name, unwrapPathErr(err))
		}
		id, dict, err := parseDictFile(name, b)
		if err != nil {
			return err
		}
		if want, err := strconv.ParseUint(strings.TrimSuffix(n, dictSuffix), 16, 32); err != nil || uint32(want) != id {
			return corruptf(name, "holds dictionary %d under another name", id)
		}
		if err := db.dicts.Add(id, dict); err != nil {
			return corruptf(name, "%v", err)
		}
		newest = max(newest, id)
	}
	// Ids are given in order from 1 and never removed: a gap is a missing
	// dictionary, which records of the log may need.
	for id := uint32(1); id < newest; id++ {
		if _, ok := db.dicts.Get(id); ok {
			continue
		}
		return corruptf(db.fs.PathJoin(dir, dictFileName(id)), "missing, but dictionary %d exists: records of the log may need it", newest)
	}
	db.curDict.Store(newest)
	if newest != 0 || db.opts.DictSamples < 0 {
		db.dict.training = true // trained once per store
	}
	return nil
}

// dictNamed returns the dictionary file that compressed record names
// when it is not loaded (a missing dictionary), or "".
func (db *DB) dictNamed(compressed []byte) string {
	if len(compressed) < 2 {
		return ""
	}
	id, n := binary.Uvarint(compressed[1:])
	if n <= 0 || id == 0 || id > 0xffffffff {
		return ""
	}
	if _, ok := db.dicts.Get(uint32(id)); ok {
		return ""
	}
	return db.fs.PathJoin(db.path(dictsDir), dictFileName(uint32(id)))
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
	name := db.fs.PathJoin(db.path(dictsDir), dictFileName(id))
	// Durable before any record uses it.
	if err := writeFileAtomic(db.fs, name, marshalDictFile(id, dict), db.opts.NoSync); err != nil {
		return err
	}
	if err := db.dicts.Add(id, dict); err != nil {
		return err
	}
	db.curDict.Store(id)
	db.logger.Debug("engine: trained compression dictionary", "id", id, "bytes", len(dict), "samples", len(samples))
	return nil
}
