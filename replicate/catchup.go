package replicate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
	"github.com/nats-io/nats.go/jetstream"
)

// Catching up a node's own copy of the store. Open reads the copy's
// REPLICA and its log from the mark on (before it takes the lease: the
// read costs the failover nothing when Open waits for the lease), then,
// after its fence, reads the stream only after the message the mark names
// and compares: the local log's records after the mark must be the
// stream's next groups, whole and in order. What the stream has beyond
// them is appended to the local log; when the local log has records the
// stream does not (the group a fenced or crashed writer had made durable
// here but never had acknowledged: the wal writes locally before it
// replicates), they are cut first (cut.go), never kept; a copy that
// cannot be read from its mark, or cut, is replaced by a restore from the
// whole stream. A copy whose mark is current needs no read of the stream.

// maxTail bounds the bytes of local log that Open reads after the mark
// and keeps for the comparison; a longer tail (a mark far behind its
// log) is restored from the stream instead.
const maxTail = 256 << 20

// localCopy is what Open found in a directory that holds a copy of the
// store.
type localCopy struct {
	mark  *mark
	store []byte // STORE; nil if the store was not created yet
	// at is the stream message whose groups the local log holds up to
	// prefix, of epoch epoch: the mark's seq, or its pending seq when the
	// records after the mark hash as its pending group.
	at     uint64
	epoch  uint64
	prefix wal.Pos
	// tail are the log's records after prefix, and where each starts.
	tail    [][]byte
	tailPos []wal.Pos
	end     wal.Pos // the log's end (where an append goes)
	// newestSealed: the log's newest segment is sealed (no cut there).
	newestSealed bool
	noLog        bool // the log directory does not exist (a store not created yet)
	// problem, if not "", says why the copy cannot be caught up: Open
	// replaces it.
	problem string
}

// readLocal reads the copy of the store in dir: nil if dir is absent or
// empty; an error if it holds something that is not a copy of a
// replicated store (no REPLICA, a damaged one, a STORE that is not the
// mark's).
func readLocal(dir string) (*localCopy, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(ents) == 0) {
		// What a replacement interrupted by a crash left.
		if err := os.RemoveAll(dir + ".replaced"); err != nil {
			return nil, fmt.Errorf("replicate: remove %s: %w", dir+".replaced", err)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replicate: %s: %w", dir, err)
	}
	m, err := readMark(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s holds %d entries but is not a copy of a replicated store: open a new directory, or remove it", errNoMark, dir, len(ents))
	}
	if err != nil {
		return nil, err
	}
	os.Remove(filepath.Join(dir, markTemp)) // a write a crash interrupted
	lc := &localCopy{mark: m, at: m.Seq, epoch: m.Epoch, prefix: m.Pos}
	storeName := filepath.Join(dir, layout.StoreName)
	switch b, err := os.ReadFile(storeName); {
	case err == nil:
		st, err := layout.ParseStore(storeName, b)
		if err != nil {
			return nil, fmt.Errorf("replicate: %w", err)
		}
		if m.StoreID != ([16]byte{}) && st.ID != m.StoreID {
			return nil, fmt.Errorf("replicate: %s is store %x, its %s says %x: not the copy the mark is of", storeName, st.ID, markName, m.StoreID)
		}
		lc.store = b
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("replicate: %w", err)
	case m.StoreID != ([16]byte{}):
		lc.problem = fmt.Sprintf("%s is missing", storeName)
		return lc, nil
	}
	lc.readLog(filepath.Join(dir, layout.WALDir))
	return lc, nil
}

// readLog reads the local log after the mark; what stops it is a problem.
func (lc *localCopy) readLog(dir string) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) && lc.store == nil && lc.mark.Pos == (wal.Pos{}) {
		lc.noLog = true
		return
	}
	l, err := wal.Open(dir, &wal.Options{FS: vfs.Default, ReadOnly: true, ScanFrom: lc.mark.Pos})
	if err != nil {
		lc.problem = fmt.Sprintf("its log does not open: %v", err)
		return
	}
	defer l.Close()
	lc.end = l.End()
	segs := l.Segments()
	lc.newestSealed = len(segs) > 0 && segs[len(segs)-1].Sealed
	rd, err := l.NewReader(lc.mark.Pos)
	if err != nil {
		lc.problem = fmt.Sprintf("its log cannot be read from %s's position %v: %v", markName, lc.mark.Pos, err)
		return
	}
	defer rd.Close()
	var size int
	h := newRecordsHash()
	for rd.Next() {
		if size += len(rd.Record()); size > maxTail {
			lc.problem = fmt.Sprintf("its log holds more than %d MiB after %s's position %v", maxTail>>20, markName, lc.mark.Pos)
			return
		}
		if h.n < lc.mark.PendingRecords {
			h.add(rd.Record())
		}
		lc.tail = append(lc.tail, bytes.Clone(rd.Record()))
		lc.tailPos = append(lc.tailPos, rd.Pos())
	}
	if err := rd.Err(); err != nil {
		lc.problem = fmt.Sprintf("its log after %v: %v", lc.mark.Pos, err)
		return
	}
	// The pending group is believed only if the records say so.
	if n := lc.mark.PendingRecords; n > 0 && h.n == n && h.sum() == lc.mark.PendingHash {
		lc.at = lc.mark.PendingSeq
		if int(n) < len(lc.tail) {
			lc.prefix = lc.tailPos[n]
		} else {
			lc.prefix = lc.end
		}
		lc.tail, lc.tailPos = lc.tail[n:], lc.tailPos[n:]
	}
}

// divergedError says why a local copy cannot be caught up.
type divergedError struct{ reason string }

func (e *divergedError) Error() string { return "replicate: the local copy diverged: " + e.reason }

// catchUp brings the local copy lc in dir up to this writer's fence: it
// reads the stream after lc.at, checks that lc's tail is its first
// groups, cuts what of the tail is not, and appends the rest to the local
// log. A *divergedError: the tail could not be cut; nothing was appended
// then.
func (r *Replicator) catchUp(ctx context.Context, s jetstream.Stream, dir string, lc *localCopy) (rerr error) {
	if lc.store != nil && lc.mark.StoreID != ([16]byte{}) {
		r.files[layout.StoreName] = lc.store
		r.storeID = lc.mark.StoreID
	}
	var (
		i      int // records of lc.tail matched so far
		log    *wal.Log
		last   *wal.Waiter
		synced = map[string]bool{} // directories that got a file
	)
	defer func() {
		if log != nil {
			if err := log.Close(); rerr == nil && err != nil {
				rerr = fmt.Errorf("replicate: catch up: %w", err)
			}
		}
	}()
	err := r.readStream(ctx, s, lc.at+1, lc.epoch, func(it item) error {
		if it.file != "" {
			return r.catchUpFile(dir, it, synced)
		}
		if i < len(lc.tail) {
			i0, why := i, ""
		compare:
			for _, a := range it.appends {
				for _, rec := range a {
					if i == len(lc.tail) {
						why = fmt.Sprintf("its log ends at %v, inside the stream's group of messages %d-%d", lc.end, it.first, it.seq)
						break compare
					}
					if !bytes.Equal(rec, lc.tail[i]) {
						why = fmt.Sprintf("its records from %v on are not the stream's group of messages %d-%d there: the stream never acknowledged them",
							lc.tailPos[i0], it.first, it.seq)
						break compare
					}
					i++
				}
			}
			if why == "" {
				r.restored.Matched++
				return nil
			}
			// The group goes in whole, after what the copy has of the
			// stream.
			if err := r.cutTail(dir, lc, i0, why); err != nil {
				return err
			}
			i = i0
		}
		if log == nil {
			var err error
			if log, err = wal.Open(filepath.Join(dir, layout.WALDir), &wal.Options{FS: vfs.Default, ScanFrom: lc.end}); err != nil {
				return fmt.Errorf("replicate: catch up: %w", err)
			}
		}
		for _, a := range it.appends {
			last = log.AppendAsync(a...)
			r.restored.Appends++
			r.restored.Records += len(a)
		}
		r.restored.Groups++
		if r.restored.Appends%4096 < len(it.appends) { // bound what waits in memory
			if _, err := last.Wait(ctx); err != nil {
				return fmt.Errorf("replicate: catch up: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if i < len(lc.tail) {
		why := fmt.Sprintf("its log holds %d records from %v on that the stream never acknowledged (it has nothing after them before message %d, this writer's fence)",
			len(lc.tail)-i, lc.tailPos[i], r.fence)
		if err := r.cutTail(dir, lc, i, why); err != nil {
			return err
		}
	}
	end := lc.end
	if log != nil {
		if last != nil {
			if _, err := last.Wait(ctx); err != nil {
				return fmt.Errorf("replicate: catch up: %w", err)
			}
		}
		end = log.End()
	}
	for d := range synced {
		if err := layout.SyncDir(vfs.Default, d); err != nil {
			return fmt.Errorf("replicate: catch up: %w", err)
		}
	}
	// Persisted by markLoop: until then the old mark holds, and costs a
	// crash only the comparison again.
	r.setMark(mark{StoreID: r.storeID, Created: r.created, Epoch: r.epoch, Pos: end, Seq: r.fence})
	return nil
}

// catchUpFile writes a file the stream holds into the local copy, or
// checks the copy's. A dictionary the copy has with other content was
// trained here and never published (its writer was fenced first, and no
// acknowledged record uses it): the stream's replaces it. A different
// STORE is another store: diverged.
func (r *Replicator) catchUpFile(dir string, it item, synced map[string]bool) error {
	p := filepath.Join(append([]string{dir}, strings.Split(it.file, "/")...)...)
	old, err := os.ReadFile(p)
	switch {
	case err == nil && bytes.Equal(old, it.data):
	case err == nil && it.file == layout.StoreName:
		return &divergedError{fmt.Sprintf("its %s is not the stream's (message %d)", p, it.seq)}
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("replicate: catch up: %w", err)
	default:
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("replicate: catch up: %w", err)
		}
		if err := layout.WriteFileRenamed(vfs.Default, p, bytes.Clone(it.data), false); err != nil {
			return fmt.Errorf("replicate: catch up: %w", err)
		}
		synced[filepath.Dir(p)], synced[dir] = true, true // dicts/ may be new
		r.restored.Files++
	}
	r.files[it.file] = it.data
	if it.file == layout.StoreName {
		if st, err := layout.ParseStore(it.file, it.data); err == nil {
			r.storeID = st.ID
		}
	}
	return nil
}

// cutTail cuts the local log back to lc.tail[k], the first of its records
// the stream does not hold (why says how that was found; cut.go), so that
// the catch-up can go on from there; a *divergedError if it cannot be cut.
func (r *Replicator) cutTail(dir string, lc *localCopy, k int, why string) error {
	at := lc.tailPos[k]
	reason, err := cutLog(dir, at, lc.end, lc.newestSealed, lc.mark.Pos)
	if err != nil {
		return err
	}
	if reason != "" {
		return &divergedError{why + "; it cannot be cut back: " + reason}
	}
	r.restored.Cut += len(lc.tail) - k
	r.cfg.Logger.Warn("replicate: the local copy's records the stream never acknowledged were cut", "store", r.cfg.Store, "dir", dir,
		"records", len(lc.tail)-k, "from", at, "why", why)
	lc.tail, lc.tailPos, lc.end = lc.tail[:k], lc.tailPos[:k], at
	return nil
}
