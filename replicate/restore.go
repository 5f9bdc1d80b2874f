package replicate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The restore: a store's directory rebuilt from its stream, up to this
// writer's fence. Crash safety: it is built in dir+".restore" (removed
// first if a crashed restore left it), every file and the log durable,
// then renamed to dir and the parent directory synced: after a crash dir
// is absent (restored again by the next Open) or whole.

// stallAfter is how long a restore waits for the next message before it
// reads again from a new consumer.
const stallAfter = 100 * time.Millisecond

// CorruptStreamError says which message of a store's stream breaks the
// stream's rules (format.go), and why.
type CorruptStreamError struct {
	Stream string
	Seq    uint64
	Reason string
}

func (e *CorruptStreamError) Error() string {
	return fmt.Sprintf("replicate: stream %s, message %d: %s", e.Stream, e.Seq, e.Reason)
}

// fileName checks a file name the stream carries: STORE or a dictionary,
// never a path out of the store.
func fileName(name string) bool {
	if name == layout.StoreName {
		return true
	}
	d, ok := strings.CutPrefix(name, layout.DictsDir+"/")
	return ok && d != "" && !strings.ContainsAny(d, `/\`) && d != ".." && strings.HasSuffix(d, layout.DictSuffix)
}

// item is what readStream gives: a file or a whole group, as the stream
// holds it.
type item struct {
	seq     uint64     // its message (a group's last part)
	first   uint64     // a group's first part
	file    string     // a file's name ("" for a group)
	data    []byte     // a file's content
	appends [][][]byte // a group's appends (aliasing the messages)
}

// readStream reads the store's stream from message from up to this
// writer's fence (excluded), checking the stream's rules (format.go), and
// calls fn with every file and every whole group in order. from must be
// the first message after one of epoch epoch with no group open (1 and 0
// for the whole stream). A group a fence cut is dropped (counted in
// Restored().Dropped).
func (r *Replicator) readStream(ctx context.Context, s jetstream.Stream, from, epoch uint64, each func(item) error) error {
	name := streamName(r.cfg.Store)
	if from >= r.fence {
		return nil
	}
	next, stop := r.streamSource(ctx, s, from)
	defer stop()
	corrupt := func(seq uint64, format string, args ...any) error {
		return &CorruptStreamError{Stream: name, Seq: seq, Reason: fmt.Sprintf(format, args...)}
	}
	var (
		parts   [][]byte // the parts of the group being read
		partsN  int
		firstAt uint64 // the stream sequence of its first part
		files   = map[string][]byte{}
	)
	for seq := from - 1; seq < r.fence-1; {
		m, err := next(seq)
		if err != nil {
			return fmt.Errorf("replicate: read %s past message %d (its fence is %d): %w", name, seq, r.fence, err)
		}
		seq = m.seq
		if seq >= r.fence {
			break // this writer's fence, or past it
		}
		r.restored.Messages++
		h := m.h
		e, err := strconv.ParseUint(h.Get(hdrEpoch), 10, 64)
		if err != nil {
			return corrupt(seq, "%s %q", hdrEpoch, h.Get(hdrEpoch))
		}
		kind := h.Get(hdrKind)
		if kind == kindFence {
			if e <= epoch {
				return corrupt(seq, "fence of epoch %d after epoch %d", e, epoch)
			}
			epoch = e
			if parts != nil {
				r.restored.Dropped += len(parts) // never acknowledged
				parts = nil
			}
			continue
		}
		if e != epoch {
			return corrupt(seq, "%s message of epoch %d in epoch %d: a writer the fence of epoch %d did not stop", kind, e, epoch, epoch)
		}
		switch kind {
		case kindFile:
			fname := h.Get(hdrFile)
			if !fileName(fname) {
				return corrupt(seq, "file %q is not a store file", fname)
			}
			data, err := openFile(m.data)
			if err != nil {
				return corrupt(seq, "file %s: %v", fname, err)
			}
			if old, ok := files[fname]; ok && !bytes.Equal(old, data) {
				return corrupt(seq, "file %s again with other content", fname)
			}
			files[fname] = data
			if err := each(item{seq: seq, first: seq, file: fname, data: data}); err != nil {
				return err
			}
		case kindLog:
			i, pn, err := parsePart(h.Get(hdrPart))
			if err != nil {
				return corrupt(seq, "%v", err)
			}
			if (i == 1) != (parts == nil) || (parts != nil && pn != partsN) || i != len(parts)+1 {
				return corrupt(seq, "part %d/%d of a group after %d parts of a group of %d (from message %d)", i, pn, len(parts), partsN, firstAt)
			}
			if i == 1 {
				partsN, firstAt = pn, seq
			}
			parts = append(parts, m.data)
			if i < pn {
				continue
			}
			appends, err := decodeGroup(bytes.Join(parts, nil))
			parts = nil
			if err != nil {
				return corrupt(firstAt, "group of messages %d-%d: %v", firstAt, seq, err)
			}
			if err := each(item{seq: seq, first: firstAt, appends: appends}); err != nil {
				return err
			}
		default:
			return corrupt(seq, "unknown %s %q", hdrKind, kind)
		}
	}
	if parts != nil {
		// The previous writer's last group, cut by this writer's fence.
		r.restored.Dropped += len(parts)
	}
	return nil
}

// restore rebuilds dir from the messages of the stream before r.fence, in
// dir+".restore", then renames it to dir (which must not exist). The
// directory gets REPLICA, at the log's end and the fence.
func (r *Replicator) restore(ctx context.Context, s jetstream.Stream, dir string) (rerr error) {
	tmp := dir + ".restore"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("replicate: remove a crashed restore's %s: %w", tmp, err)
	}
	if err := os.MkdirAll(filepath.Join(tmp, layout.DictsDir), 0o700); err != nil {
		return fmt.Errorf("replicate: restore: %w", err)
	}
	defer func() {
		if rerr != nil { // a refused or failed restore leaves nothing behind
			os.RemoveAll(tmp)
		}
	}()
	var log *wal.Log
	defer func() {
		if log != nil {
			log.Close()
		}
	}()
	log, err := wal.Open(filepath.Join(tmp, layout.WALDir), &wal.Options{FS: vfs.Default})
	if err != nil {
		return fmt.Errorf("replicate: restore: %w", err)
	}
	files := map[string][]byte{}
	var last *wal.Waiter
	err = r.readStream(ctx, s, 1, 0, func(it item) error {
		if it.file != "" {
			files[it.file] = it.data
			return nil
		}
		for _, a := range it.appends {
			last = log.AppendAsync(a...)
			r.restored.Appends++
			r.restored.Records += len(a)
		}
		r.restored.Groups++
		if r.restored.Appends%4096 < len(it.appends) { // bound what waits in memory
			if _, err := last.Wait(ctx); err != nil {
				return fmt.Errorf("replicate: restore: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if last != nil {
		if _, err := last.Wait(ctx); err != nil {
			return fmt.Errorf("replicate: restore: %w", err)
		}
	}
	end := log.End()
	if err := log.Close(); err != nil {
		log = nil
		return fmt.Errorf("replicate: restore: %w", err)
	}
	log = nil
	// A stream with no file and no group (a new store, or writers that
	// fenced and never wrote) gives an empty log and no STORE: engine.Open
	// creates the store. Otherwise STORE came first.
	var id [16]byte
	if sf, ok := files[layout.StoreName]; ok {
		st, err := layout.ParseStore(layout.StoreName, sf)
		if err != nil {
			return &CorruptStreamError{Stream: streamName(r.cfg.Store), Seq: r.fence, Reason: err.Error()}
		}
		id = st.ID
	} else if len(files) > 0 || r.restored.Appends > 0 {
		return &CorruptStreamError{Stream: streamName(r.cfg.Store), Seq: r.fence,
			Reason: fmt.Sprintf("no %s before the fence, but %d log appends", layout.StoreName, r.restored.Appends)}
	}
	for fn, data := range files {
		p := filepath.Join(append([]string{tmp}, strings.Split(fn, "/")...)...)
		if err := layout.WriteFileAtomic(vfs.Default, p, bytes.Clone(data), false); err != nil {
			return fmt.Errorf("replicate: restore: %w", err)
		}
		r.files[fn] = data
		r.restored.Files++
	}
	r.storeID = id
	m := mark{StoreID: id, Created: r.created, Epoch: r.epoch, Pos: end, Seq: r.fence}
	if err := writeMark(tmp, &m); err != nil {
		return err
	}
	r.mu.Lock()
	r.mu.mark = m
	r.mu.Unlock()
	for _, d := range []string{filepath.Join(tmp, layout.DictsDir), tmp} {
		if err := layout.SyncDir(vfs.Default, d); err != nil {
			return fmt.Errorf("replicate: restore: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("replicate: restore: %w", err)
	}
	if err := layout.SyncDir(vfs.Default, filepath.Dir(dir)); err != nil {
		return fmt.Errorf("replicate: restore: %w", err)
	}
	return nil
}

// replace sets dir, a copy of the store that the stream cannot bring up
// to date (it holds records the stream never acknowledged, or its log
// cannot be read from its REPLICA), aside as dir+".replaced", restores dir
// from the stream, and then removes the old copy. A crash in between
// leaves dir whole (old or new) or absent with both others present: the
// next Open then restores dir anew and removes what is left.
func (r *Replicator) replace(ctx context.Context, s jetstream.Stream, dir string) error {
	old := dir + ".replaced"
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("replicate: remove %s: %w", old, err)
	}
	if err := os.Rename(dir, old); err != nil {
		return fmt.Errorf("replicate: set the diverged copy aside: %w", err)
	}
	if err := layout.SyncDir(vfs.Default, filepath.Dir(dir)); err != nil {
		return fmt.Errorf("replicate: %w", err)
	}
	if err := r.restore(ctx, s, dir); err != nil {
		// The old copy comes back: the next Open decides again.
		if rerr := os.Rename(old, dir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("replicate: put %s back: %w", old, rerr))
		}
		return err
	}
	if err := os.RemoveAll(old); err != nil {
		r.cfg.Logger.Warn("replicate: the replaced copy could not be removed", "dir", old, "err", err)
	}
	return nil
}

// streamMsg is one message of the stream.
type streamMsg struct {
	seq  uint64
	h    nats.Header
	data []byte
}

// getAtMost is the longest read done by sequence (JetStream's message get,
// getWindow requests in flight); a longer one uses an ordered consumer.
const (
	getAtMost = 128
	getWindow = 32
)

// streamSource returns a function that gives the stream's messages in
// order from message from up to the fence (next(seq) is called with the
// last sequence given), and one that stops the reading.
//
// A short read (a catch-up) gets each message by its sequence: a request
// on the connection's reply subscription, which the cluster already knows
// (the fence's publish used it). A long one (a restore) uses an ordered
// consumer, whose first pull can be lost while its new delivery subject's
// interest crosses the cluster's routes (it then recovers only after two
// missed heartbeats, a second or more): a read that makes no progress for
// stallAfter starts a new consumer after the last message read.
func (r *Replicator) streamSource(ctx context.Context, s jetstream.Stream, from uint64) (next func(seq uint64) (streamMsg, error), stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	if r.fence-from <= getAtMost {
		type got struct {
			m   *jetstream.RawStreamMsg
			err error
		}
		var inFlight []chan got
		ahead := from // the next sequence to ask for
		return func(uint64) (streamMsg, error) {
			for len(inFlight) < getWindow && ahead < r.fence {
				ch, seq := make(chan got, 1), ahead
				go func() {
					var m *jetstream.RawStreamMsg
					err := retry(ctx, r.cfg.Timeout, func(ctx context.Context) (err error) {
						m, err = s.GetMsg(ctx, seq)
						return err
					})
					ch <- got{m, err}
				}()
				inFlight, ahead = append(inFlight, ch), ahead+1
			}
			if len(inFlight) == 0 {
				return streamMsg{}, fmt.Errorf("no message before the fence %d", r.fence)
			}
			g := <-inFlight[0]
			inFlight = inFlight[1:]
			if g.err != nil {
				return streamMsg{}, g.err
			}
			return streamMsg{seq: g.m.Sequence, h: g.m.Header, data: g.m.Data}, nil
		}, cancel
	}
	var it jetstream.MessagesContext
	reopen := func(from uint64) error {
		if it != nil {
			it.Stop()
		}
		cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{subject(r.cfg.Store, ">")},
			DeliverPolicy:  jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
		if err == nil {
			it, err = cons.Messages(jetstream.PullMaxMessages(4096), jetstream.PullHeartbeat(time.Second))
		}
		if err != nil {
			it = nil
			return fmt.Errorf("read from message %d: %w", from, err)
		}
		return nil
	}
	progress := time.Now() // when the last message came
	opened := false
	return func(seq uint64) (streamMsg, error) {
			for {
				if !opened {
					if err := reopen(seq + 1); err != nil {
						return streamMsg{}, err
					}
					opened = true
				}
				nctx, ncancel := context.WithTimeout(ctx, stallAfter)
				m, err := it.Next(jetstream.NextContext(nctx))
				ncancel()
				if err != nil && ctx.Err() == nil && time.Since(progress) < r.cfg.Timeout {
					r.restored.Rereads++
					opened = false
					continue
				}
				if err != nil {
					return streamMsg{}, err
				}
				progress = time.Now()
				md, err := m.Metadata()
				if err != nil {
					return streamMsg{}, err
				}
				return streamMsg{seq: md.Sequence.Stream, h: m.Headers(), data: m.Data()}, nil
			}
		}, func() {
			if it != nil {
				it.Stop()
			}
			cancel()
		}
}
