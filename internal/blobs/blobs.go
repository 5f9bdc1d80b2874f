package blobs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/frame"
)

// Core is what the engine implements for a Set (doc.go).
type Core interface {
	// Sealers returns the data keys run's blobs are sealed under, the
	// one new blobs are written with first; sealed is false in a
	// plaintext store (s is then nil).
	Sealers(run string) (s []blob.Sealer, sealed bool)
	// Parent returns the parent of run ("" for a run that is no fork)
	// and whether the store holds run.
	Parent(run string) (parent string, held bool)
	// References calls fn with every blob reference the log's records of
	// live runs hold, and the run each is read as.
	References(ctx context.Context, fn func(run string, ref blob.Ref)) error
}

// Config is what a Set is given once, when it is made.
type Config struct {
	// FS and Dir are the store's filesystem and blob directory, where the
	// Set also keeps its mark of shipped blobs (MarkName).
	FS  vfs.FS
	Dir string
	// Threshold: values above it (if > 0) go to blobs.
	Threshold int
	// Ship gives the committed blob file name to the store's replica and
	// returns nil once the replica holds it durably; nil when the store
	// ships no blobs (no mark is then kept).
	Ship func(name string) error
}

// Holder is an atom in flight that writes or keeps blobs: Key is what it
// is held and released under; Run and Seq name it in errors.
type Holder struct {
	Key any
	Run string
	Seq uint64
}

// Set is the blob capability's state (doc.go, "Guarantees").
type Set struct {
	core  Core
	cfg   Config
	store *blob.Store

	mu sync.Mutex
	// pending counts, per blob file name, the atoms in flight that wrote
	// or kept the blob; held lists the names each such atom holds;
	// writing counts the writers between Create and their registration
	// (their temporary files are not a crash's); released, while a sweep
	// runs (non-nil), the names released since it began. Guarded by mu.
	pending  map[string]int
	held     map[any][]string
	writing  int
	released map[string]bool
	// commit orders writers' commits and registrations (RLock) against a
	// sweep's removals (Lock); taken before mu.
	commit sync.RWMutex
	// sweep serializes sweeps.
	sweep sync.Mutex

	// shipped holds the blob file names the replica holds: marked at Open
	// (ShipAll) or taken by Core.Ship since, so that a put of bytes
	// already stored ships nothing; a sweep forgets the names it removes.
	shipMu  sync.Mutex
	shipped map[string]bool
	// mark is the durable record of the names Core.Ship took (mark.go),
	// kept when Config.Ship is set.
	mark *mark
}

// New returns the Set over core and cfg.
func New(core Core, cfg Config) *Set {
	return &Set{core: core, cfg: cfg, store: blob.Open(cfg.FS, cfg.Dir), mark: &mark{fs: cfg.FS, dir: cfg.Dir}}
}

// sealer is the sealer run's new blobs are written with: nil in a
// plaintext store, an error if the run has no data key left.
func (s *Set) sealer(run string) (blob.Sealer, error) {
	sl, sealed := s.core.Sealers(run)
	if !sealed {
		return nil, nil
	}
	if len(sl) == 0 {
		return nil, fmt.Errorf("engine: run %q has no data key for its blobs (erased?)", run)
	}
	return sl[0], nil
}

// readers are the sealers a blob run references may be under: each data
// key of the run, then its ancestors' (one nil sealer in a plaintext
// store).
func (s *Set) readers(run string) []blob.Sealer {
	var out []blob.Sealer
	seen := map[string]bool{}
	for id := run; id != "" && !seen[id]; {
		seen[id] = true
		sl, sealed := s.core.Sealers(id)
		if !sealed {
			return []blob.Sealer{nil}
		}
		out = append(out, sl...)
		p, held := s.core.Parent(id)
		if !held {
			break
		}
		id = p
	}
	return out
}

// Write writes what src yields as a blob of media type media ("" when
// unknown) of h's run, in chunks, durably, and holds it for h until
// Release(h.Key).
func (s *Set) Write(ctx context.Context, h Holder, media string, src io.Reader) (blob.Ref, error) {
	sl, err := s.sealer(h.Run)
	if err != nil {
		return blob.Ref{}, err
	}
	// Counted as writing before its temporary file exists, under commit,
	// so that a sweep that removes temporary files sees none of a write
	// in progress.
	s.commit.RLock()
	s.mu.Lock()
	s.writing++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.writing--
		s.mu.Unlock()
	}()
	w, err := s.store.Create(sl, media)
	s.commit.RUnlock()
	if err != nil {
		return blob.Ref{}, fmt.Errorf("engine: run %q seq %d: %w", h.Run, h.Seq, err)
	}
	buf := make([]byte, 64<<10)
	for {
		if err := ctx.Err(); err != nil {
			_ = w.Abort()
			return blob.Ref{}, err
		}
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				_ = w.Abort()
				return blob.Ref{}, fmt.Errorf("engine: run %q seq %d: %w", h.Run, h.Seq, err)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			_ = w.Abort()
			return blob.Ref{}, fmt.Errorf("engine: run %q seq %d: read the blob's source: %w", h.Run, h.Seq, rerr)
		}
	}
	s.commit.RLock()
	ref, err := w.Commit()
	if err != nil {
		s.commit.RUnlock()
		return blob.Ref{}, fmt.Errorf("engine: run %q seq %d: %w", h.Run, h.Seq, err)
	}
	name := blob.Name(ref.Hash, sl)
	s.hold(h.Key, name)
	s.commit.RUnlock()
	// Held for h, the blob is safe from a sweep while it is shipped, with
	// no lock held: a slow replica stalls neither sweeps nor other
	// writers. On an error the Ref is never handed out: nothing will
	// reference the blob, which stays here until a sweep after h's
	// release.
	if err := s.ship(name); err != nil {
		return blob.Ref{}, fmt.Errorf("engine: run %q seq %d: blob %s: %w", h.Run, h.Seq, ref, err)
	}
	return ref, nil
}

// ship gives the blob file name to Core.Ship unless it took it already.
func (s *Set) ship(name string) error {
	s.shipMu.Lock()
	done := s.shipped[name]
	s.shipMu.Unlock()
	if done {
		return nil
	}
	if s.cfg.Ship != nil {
		if err := s.cfg.Ship(name); err != nil {
			return err
		}
		// Acknowledged: marked, so that no later Open ships it again.
		if err := s.mark.add(name); err != nil {
			return err
		}
	}
	s.shipMu.Lock()
	if s.shipped == nil {
		s.shipped = map[string]bool{}
	}
	s.shipped[name] = true
	s.shipMu.Unlock()
	return nil
}

// ShipAll gives Core.Ship every committed blob file of the store that
// the mark does not name (at Open, before the DB serves: the replica may
// lack a blob a crash kept from it between its commit here and the mark,
// or a store's from before it was replicated), and returns how many it
// gave. It lists the blob directory and reads the mark; a mark that names
// blobs no longer here, or is damaged, is rewritten first with the names
// it holds of blobs still here. It does nothing without a Config.Ship.
func (s *Set) ShipAll() (int, error) {
	if s.cfg.Ship == nil {
		return 0, nil
	}
	marked, rewrite, err := s.mark.read()
	if err != nil {
		return 0, err
	}
	var here, todo []string
	if err := s.store.Names(func(n string) error {
		if marked[n] {
			here = append(here, n)
		} else {
			todo = append(todo, n)
		}
		return nil
	}); err != nil {
		return 0, err
	}
	if len(here) == 0 && len(todo) == 0 {
		return 0, nil // no blob: the mark waits for the first
	}
	s.shipMu.Lock()
	if s.shipped == nil {
		s.shipped = map[string]bool{}
	}
	for _, n := range here {
		s.shipped[n] = true
	}
	s.shipMu.Unlock()
	s.mark.mu.Lock()
	if rewrite || len(here) != len(marked) {
		err = s.mark.rewriteLocked(here)
	} else {
		s.mark.size = int64(markHeaderLen + len(here)*markEntryLen)
	}
	s.mark.mu.Unlock()
	if err != nil {
		return 0, err
	}
	for _, n := range todo {
		if err := s.ship(n); err != nil {
			return 0, err
		}
	}
	return len(todo), nil
}

// Release forgets the blobs held for key, whose atom committed (its
// record holds their references) or failed.
func (s *Set) Release(key any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.held[key] {
		if s.pending[n]--; s.pending[n] <= 0 {
			delete(s.pending, n)
		}
		if s.released != nil {
			s.released[n] = true
		}
	}
	delete(s.held, key)
}

// keep reports whether the blob ref names exists (its header and trailer
// agreeing with ref) for h's run, and if so holds it for h as Write's are
// held: a reference copied from elsewhere in the state may be the last
// one left to a blob once another run's deletion is collected, and a
// sweep between this check and h's record must not remove it.
func (s *Set) keep(h Holder, ref blob.Ref) bool {
	s.commit.RLock()
	defer s.commit.RUnlock()
	st := s.store
	for _, sl := range s.readers(h.Run) {
		br, err := st.Open(ref, sl)
		if err != nil {
			continue
		}
		_ = br.Close()
		s.hold(h.Key, blob.Name(ref.Hash, sl))
		return true
	}
	return false
}

// hold registers the blob file name as pending for key.
func (s *Set) hold(key any, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		s.pending, s.held = map[string]int{}, map[any][]string{}
	}
	s.pending[name]++
	s.held[key] = append(s.held[key], name)
}

// Value is the value v becomes in a record of h's, and whether it
// changed: a reference value kept as it is if it names a blob of the run
// (held for h), else, if v is above the threshold or merely starts as a
// reference value does (so that it reads back as the bytes it was), the
// reference value of a new blob of v's bytes.
func (s *Set) Value(ctx context.Context, h Holder, v []byte) (string, bool, error) {
	prefixed := blob.HasValuePrefix(v)
	if !prefixed && (s.cfg.Threshold <= 0 || len(v) <= s.cfg.Threshold) {
		return "", false, nil
	}
	if prefixed {
		if ref, ok := blob.ParseValueBytes(v); ok && s.keep(h, ref) {
			return "", false, nil
		}
	}
	ref, err := s.Write(ctx, h, "", bytes.NewReader(v))
	if err != nil {
		return "", false, err
	}
	return blob.Value(ref), true, nil
}

// Delta returns d with each value Value puts in a blob for h replaced by
// its reference value.
func (s *Set) Delta(h Holder, d *frame.Delta) (*frame.Delta, error) {
	return d.MapValues(func(v []byte) (string, bool, error) {
		return s.Value(context.Background(), h, v)
	})
}

// Result is a Do result res of h's as its certificate holds it: the
// reference value of a blob if Value puts res in one, else res.
func (s *Set) Result(ctx context.Context, h Holder, res []byte) ([]byte, error) {
	v, ok, err := s.Value(ctx, h, res)
	if err != nil || !ok {
		return res, err
	}
	return []byte(v), nil
}

// Sweep removes the blobs no record of the log references and no atom in
// flight holds, and the temporary files of blob writes a crash
// interrupted that are not in progress now. It returns how many files it
// removed and their bytes.
func (s *Set) Sweep(ctx context.Context) (files int, n int64, err error) {
	s.sweep.Lock()
	defer s.sweep.Unlock()
	live := map[string]bool{}
	s.mu.Lock()
	for n := range s.pending {
		live[n] = true
	}
	s.released = map[string]bool{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.released = nil
		s.mu.Unlock()
	}()
	if err := s.Live(ctx, live); err != nil {
		return 0, 0, err
	}
	s.commit.Lock()
	defer s.commit.Unlock()
	s.mu.Lock()
	for n := range s.pending {
		live[n] = true
	}
	for n := range s.released {
		live[n] = true
	}
	// With no write in progress every temporary file is a crash's or an
	// aborted write's; with one, they wait for a later sweep.
	temps := s.writing == 0
	s.mu.Unlock()
	return s.store.Sweep(func(name string) bool {
		if live[name] {
			return true
		}
		s.shipMu.Lock()
		delete(s.shipped, name) // removed: a later put of its bytes ships it again
		s.shipMu.Unlock()
		return false
	}, temps)
}

// Live adds to live the file names of the blobs the log's records
// reference, under each sealer of each referencing run.
func (s *Set) Live(ctx context.Context, live map[string]bool) error {
	readers := map[string][]blob.Sealer{}
	return s.core.References(ctx, func(run string, ref blob.Ref) {
		sl, ok := readers[run]
		if !ok {
			sl = s.readers(run)
			readers[run] = sl
		}
		for _, x := range sl {
			live[blob.Name(ref.Hash, x)] = true
		}
	})
}
