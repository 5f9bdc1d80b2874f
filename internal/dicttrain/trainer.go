package dicttrain

import (
	"bytes"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
)

// MaxSample is the most of a record body a training sample keeps.
const MaxSample = 4 << 10

// Host is what the Trainer needs of the engine (see the package's doc).
type Host interface {
	Replicate(id uint32, data []byte) error
}

// Config is a Trainer's store and settings.
type Config struct {
	FS     vfs.FS
	Dir    string // the store's directory (dictionaries are in layout.DictsDir)
	NoSync bool
	Logger *slog.Logger
	// Samples is how many record bodies are collected before training
	// (< 0: never train); Size the size of the trained dictionary.
	Samples, Size int
	// Encrypted stores train no dictionary.
	Encrypted bool
	// Dicts receives every dictionary of the store; Current is the one
	// new records are compressed with (0: none), read by the engine's
	// commit path.
	Dicts   *frame.Dicts
	Current *atomic.Uint32
	// OnFailure, if set, is called when a write of the Trainer failed and
	// was only logged (the engine then leaves no clean-close mark).
	OnFailure func()
}

// Trainer collects samples and trains the store's dictionary once.
type Trainer struct {
	cfg  Config
	host Host

	mu struct {
		sync.Mutex
		samples  [][]byte // copies of the first record bodies, for training
		bytes    int
		training bool          // a training goroutine is running or has finished, or none ever will
		done     chan struct{} // closed when training ends; nil if it never started
	}
}

// New returns a Trainer of cfg's store.
func New(cfg Config, h Host) *Trainer {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Trainer{cfg: cfg, host: h}
}

// Load registers every dictionary of the store in Config.Dicts and
// selects the newest for new records.
func (t *Trainer) Load() error {
	newest, err := layout.LoadDicts(t.cfg.FS, t.cfg.Dir, t.cfg.Dicts)
	if err != nil {
		return err
	}
	if t.cfg.Encrypted && newest != 0 {
		// A dictionary trained by an engine older than the rule of the
		// package's doc holds agent text in the clear. The records
		// compressed with it need it, so it stays (compressing new records
		// with it adds nothing to the file), and the log says so.
		t.cfg.Logger.Warn("engine: this encrypted store holds a compression dictionary that an older engine trained on its "+
			"first records, in the clear; the records compressed with it need it, so it stays",
			"dir", t.cfg.FS.PathJoin(t.cfg.Dir, layout.DictsDir), "newest", newest)
	}
	t.cfg.Current.Store(newest)
	if newest != 0 || t.cfg.Samples < 0 || t.cfg.Encrypted {
		t.mu.Lock()
		t.mu.training = true // trained once per store, never in an encrypted one
		t.mu.Unlock()
	}
	return nil
}

// CheckNewest refuses a store whose CHECKPOINT (cp, read from the file
// name; nil: none) was written while a dictionary newer than every one
// Load found existed: the log may hold records compressed with it, so
// its loss is log damage (a *record.CorruptionError naming the missing
// file), not a derived file's. Call it after Load.
func (t *Trainer) CheckNewest(cp *layout.Checkpoint, name string) error {
	if cp == nil || cp.Dict <= t.cfg.Current.Load() {
		return nil
	}
	return record.Corruptf(t.cfg.FS.PathJoin(t.cfg.FS.PathJoin(t.cfg.Dir, layout.DictsDir), layout.DictFileName(cp.Dict)),
		"missing: %s (generation %d) was written after it existed, and the log's records may need it", name, cp.Gen)
}

// Sample keeps a copy of a record body for training, until enough are
// collected; then it starts training in the background. The caller keeps
// body.
func (t *Trainer) Sample(body []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.training {
		return
	}
	// A dictionary serves small records; a large one compresses well on
	// its own. Samples are cut to MaxSample bytes, so that training
	// (whose cost grows faster than its input) stays short even for an
	// agent whose records are 100 KB, and Close, which waits for it, stays
	// prompt.
	body = body[:min(len(body), MaxSample)]
	t.mu.samples = append(t.mu.samples, append([]byte(nil), body...))
	t.mu.bytes += len(body)
	if len(t.mu.samples) < t.cfg.Samples {
		return
	}
	t.mu.training = true
	samples := t.mu.samples
	t.mu.samples = nil
	t.mu.done = make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		if err := t.train(samples); err != nil {
			// Not fatal: records stay compressed without a dictionary.
			if t.cfg.OnFailure != nil {
				t.cfg.OnFailure()
			}
			t.cfg.Logger.Warn("engine: dictionary training failed", "err", err)
		}
	}(t.mu.done)
}

// Started reports whether training has started (it may have ended).
func (t *Trainer) Started() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.done != nil
}

// Wait waits for a training in progress to end.
func (t *Trainer) Wait() {
	t.mu.Lock()
	done := t.mu.done
	t.mu.Unlock()
	if done != nil {
		<-done
	}
}

func (t *Trainer) train(samples [][]byte) error {
	dict, err := frame.TrainDict(samples, t.cfg.Size)
	if err != nil {
		return err
	}
	id := t.cfg.Current.Load() + 1
	name := t.cfg.FS.PathJoin(t.cfg.FS.PathJoin(t.cfg.Dir, layout.DictsDir), layout.DictFileName(id))
	// Durable before any record uses it.
	data := layout.MarshalDict(id, dict)
	// A filesystem may use the buffer it is given to write (pebble's MemFS
	// scribbles over it in race builds): the Host gets data intact.
	if err := layout.WriteFileAtomic(t.cfg.FS, name, bytes.Clone(data), t.cfg.NoSync); err != nil {
		return err
	}
	// Replicated before any record uses it; refused, it stays unused until
	// the next Open ships it.
	if err := t.host.Replicate(id, data); err != nil {
		return err
	}
	if err := t.cfg.Dicts.Add(id, dict); err != nil {
		return err
	}
	t.cfg.Current.Store(id)
	t.cfg.Logger.Debug("engine: trained compression dictionary", "id", id, "bytes", len(dict), "samples", len(samples))
	return nil
}
