package replicate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrFenced is engine.ErrFenced: the error of a write refused because
// another node took the store over matches it, as does every write after.
var ErrFenced = engine.ErrFenced

// The DB tells a Replicator where each group begins in its log, and asks
// it for the writer's fence (its epoch, its lease, its call bound).
var (
	_ engine.PositionedReplicator = (*Replicator)(nil)
	_ engine.FencedReplicator     = (*Replicator)(nil)
)

// Config says which store to replicate where, and as whom. The zero value
// of every field but Conn, Store and Node is the default, documented
// field by field.
type Config struct {
	// Conn is a connection to the JetStream cluster (required). The
	// Replicator publishes and reads on it; the caller closes it, after
	// Replicator.Close.
	Conn *nats.Conn
	// Store names the replicated store across nodes (required): 1 to 64
	// of A-Z, a-z, 0-9, '_' and '-'. Its stream is CONTINUUM_<Store>, its
	// subjects continuum.<Store>.{fence,file,log}, its lease the key
	// <Store> of LeaseBucket.
	Store string
	// Node names this node in the lease and in every message it publishes
	// (required, 1 to 64 bytes).
	Node string
	// Replicas is the replication factor Open creates the stream and the
	// lease bucket with. Default and minimum MinReplicas (3).
	Replicas int
	// LeaseBucket is the key-value bucket of the leases. Default
	// "CONTINUUM_LEASES".
	LeaseBucket string
	// LeaseTTL is how long a lease lasts unless renewed; the holder renews
	// it every LeaseTTL/3. Another node takes it over once it expired by
	// that node's clock. Default 2 s.
	LeaseTTL time.Duration
	// Takeover makes Open take the lease at once, even when another node
	// holds it unexpired (an operator's failover, or a node that knows the
	// holder is dead). The old holder is fenced: its next write fails with
	// ErrFenced.
	Takeover bool
	// HolderDead, with Takeover, says that the holder of the lease is
	// known to be dead (its process or machine is gone): an action it
	// left in doubt is then executed again without waiting for its lease
	// to expire plus its CallBound. A takeover without it shortens the
	// wait for the lease, not that one (see Failure semantics).
	HolderDead bool
	// CallBound bounds the duration of this writer's tool calls: the DB
	// cancels an exec's context CallBound after it called exec, and
	// certifies nothing the exec returns after that (the action stays in
	// doubt). The lease records it, and the next writer executes an
	// action this one left in doubt only once this one's lease expired
	// plus CallBound. Default 10 s.
	CallBound time.Duration
	// Timeout bounds the wait for the stream's acknowledgement of one
	// message, retries included: a leader election of the stream after
	// its leader died takes 5 to 15 s (the servers' election timeouts).
	// Default 30 s.
	Timeout time.Duration
	// SystemConn, a connection to the cluster's system account, lets Open
	// check that every server holding the stream fsyncs every write
	// (sync_interval: always). Without it Open refuses the stream, unless
	// AssumeSyncAlways says that the operator checked.
	SystemConn       *nats.Conn
	AssumeSyncAlways bool
	// Logger receives lease and fencing reports; nil discards them.
	Logger *slog.Logger
	// now is the clock of leases (tests).
	now func() time.Time
	// noQuiet: in-doubt actions do not wait for the previous writer's
	// calls (tests: the behaviour before Quiet, to show the duplicates).
	noQuiet bool
	// maxPart, if positive, caps the body of a log message below the
	// connection's limit (tests: groups split into parts).
	maxPart int
}

func (c *Config) validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("replicate: Config.Conn is required")
	case !storeName.MatchString(c.Store):
		return fmt.Errorf("replicate: Config.Store %q must be 1 to 64 of A-Z, a-z, 0-9, '_', '-'", c.Store)
	case c.Node == "" || len(c.Node) > 64:
		return fmt.Errorf("replicate: Config.Node %q must be 1 to 64 bytes", c.Node)
	case c.Replicas != 0 && c.Replicas < MinReplicas:
		return fmt.Errorf("%w: Config.Replicas %d (at least %d needed)", ErrUnsafeStream, c.Replicas, MinReplicas)
	case c.LeaseTTL < 0 || c.Timeout < 0 || c.CallBound < 0:
		return errors.New("replicate: negative Config.LeaseTTL, Config.Timeout or Config.CallBound")
	case c.HolderDead && !c.Takeover:
		return errors.New("replicate: Config.HolderDead needs Config.Takeover")
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Replicas == 0 {
		c.Replicas = MinReplicas
	}
	if c.LeaseBucket == "" {
		c.LeaseBucket = "CONTINUUM_LEASES"
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 2 * time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	if c.CallBound == 0 {
		c.CallBound = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
}

// Replicator ships one store's log to its stream for the one node that
// holds the store's lease: it is the engine.Replicator of that node's DB.
// Open makes one; the DB calls Replicate and ReplicateFile; Close, after
// the DB's Close, releases the lease.
type Replicator struct {
	cfg    Config
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	epoch  uint64 // the epoch of this writer (its fence's); immutable
	fence  uint64 // the stream sequence of its fence; immutable
	maxMsg int    // largest body of one message

	// last is the stream sequence of the last message this writer had
	// acknowledged; owned by whoever publishes (the DB's log writer, or
	// ReplicateFile under pubMu).
	pubMu sync.Mutex
	last  uint64
	// files are the files the stream holds, by name (under pubMu).
	files map[string][]byte
	// storeID is STORE's store id once known (from the stream, the local
	// copy or ReplicateFile; under pubMu after Open): REPLICA names it.
	storeID [16]byte

	dir     string // the store's directory
	created int64  // the stream's creation time (Unix ns): REPLICA names it
	// markWrite serialises the writes of REPLICA (markLoop and Close).
	markWrite sync.Mutex
	markDone  chan struct{} // closed when markLoop returns

	// mu guards the lease and the fenced state, shared with the renewer.
	mu struct {
		sync.Mutex
		lease  held
		fenced error // set once: every later publish fails with it
		// mark is the newest REPLICA: true of the local log as it is;
		// markDirty says it is not yet written.
		mark      mark
		markDirty bool
		// lost is closed when this writer stops being able to prove it
		// holds the lease (lease.until passed, the lease was taken, the
		// writer was fenced or closed); replaced by a new one when a
		// late renewal goes through. expiry closes it at lease.until.
		lost   chan struct{}
		expiry *time.Timer
		closed bool // Close or Abandon began
	}
	// inDoubtAfter is when the execs of every earlier writer are over
	// (engine.Fence.InDoubtAfter); zero: none can run. Immutable.
	inDoubtAfter time.Time
	// noRenew stops the renewals (tests: a writer whose renewals stall).
	noRenew atomic.Bool
	stop    chan struct{}
	stopped chan struct{}
	closed  sync.Once

	restored RestoreInfo

	// blobMu serialises ReplicateBlob; blobs is the store's blob bucket
	// once opened, blobHeld the size of each object this Replicator put
	// or found whole (blobs.go).
	blobMu   sync.Mutex
	blobs    jetstream.ObjectStore
	blobHeld map[string]int64
}

// RestoreInfo is what Open did to bring the local directory up to the
// stream.
type RestoreInfo struct {
	Epoch uint64 // this writer's epoch
	Fence uint64 // the stream sequence of its fence
	// Path is how the directory was brought up to the stream: PathCurrent,
	// PathCaughtUp, PathRestored or PathReplaced (then Replaced says why).
	Path     string
	Replaced string
	Messages int // messages read from the stream
	Rereads  int // reads of the stream started again after it stalled (stallAfter)
	Matched  int // groups of the stream found in the local copy's log after its mark
	Groups   int // groups written to the directory's log
	Appends  int // log appends among them
	Records  int // log records among them
	Files    int // files written (STORE, dictionaries)
	Blobs    int // blob files fetched from the store's blob bucket
	// BlobsDamaged counts the objects of the blob bucket skipped for not
	// holding the blob their name says (a failed put's leftovers).
	BlobsDamaged int
	Cut          int // records the stream never acknowledged, cut from the local copy's log
	Dropped      int // parts of groups a fence cut, dropped
	// InDoubtAfter is when every exec of the earlier writers is over: an
	// action they left in doubt is executed again only from then on
	// (zero: at once; see Failure semantics).
	InDoubtAfter time.Time
	Local        time.Duration // reading the local copy (its REPLICA and its log after the mark)
	Lease        time.Duration // taking the lease (waiting for it included)
	Read         time.Duration // fencing, reading the stream and writing the directory
}

// How Open brought its directory up to the stream (RestoreInfo.Path).
const (
	// PathCurrent: the directory's copy of the store held every group the
	// stream had; its log was left as it was.
	PathCurrent = "current"
	// PathCaughtUp: the copy lacked the stream's last groups, which were
	// appended to its log, or it ended with records the stream never
	// acknowledged, which were cut (RestoreInfo.Cut), or both.
	PathCaughtUp = "caught up"
	// PathRestored: there was no copy; the directory was built from the
	// whole stream (empty for a new store).
	PathRestored = "restored"
	// PathReplaced: the copy could not be caught up (its log cannot be
	// read from its mark, or holds records the stream never acknowledged
	// that cannot be cut); it was set aside, the directory built from the
	// whole stream, and the old copy removed.
	PathReplaced = "replaced"
)

// Open takes the store's lease (waiting for it to expire, unless
// Config.Takeover), fences the stream against the previous writer, and
// brings dir up to the stream: dir then holds exactly what the stream
// acknowledged, and engine.Open of dir with Options.Replicator = the
// Replicator resumes the store. A dir that is absent or empty is built from
// the whole stream (for a new store: only its REPLICA; engine.Open creates
// the store). A dir that holds this node's earlier copy of the store (its
// REPLICA names the store and the stream) is caught up: only the stream's
// messages after its mark are read, and those groups appended; a copy
// whose log holds records the stream does not is replaced by a restore
// (RestoreInfo.Path says which). Any other non-empty dir is refused.
func Open(ctx context.Context, dir string, cfg Config) (*Replicator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("replicate: %w", err)
	}
	s, created, err := cfg.ensureStream(ctx, js)
	if err != nil {
		return nil, err
	}
	kv, err := cfg.leaseBucket(ctx, js)
	if err != nil {
		return nil, err
	}
	// The local copy is read before the lease is taken: a wait for the
	// lease hides it.
	tl := time.Now()
	lc, err := readLocal(dir)
	if err != nil {
		return nil, err
	}
	if lc != nil && lc.mark.Created != created.UnixNano() {
		return nil, fmt.Errorf("replicate: %s is a copy of an earlier stream %s (created %s; this one %s): remove it",
			dir, streamName(cfg.Store), time.Unix(0, lc.mark.Created).UTC().Format(time.RFC3339Nano), created.UTC().Format(time.RFC3339Nano))
	}
	local := time.Since(tl)
	t0 := time.Now()
	h, err := cfg.acquire(ctx, kv, cfg.Takeover)
	if err != nil {
		return nil, err
	}
	r := &Replicator{cfg: cfg, js: js, kv: kv, epoch: h.Epoch, files: map[string][]byte{},
		dir: dir, created: created.UnixNano(),
		stop: make(chan struct{}), stopped: make(chan struct{}), markDone: make(chan struct{})}
	r.mu.lease = h
	r.mu.lost = make(chan struct{})
	if h.Quiet > 0 && !cfg.noQuiet {
		r.inDoubtAfter = time.Unix(0, h.Quiet)
		r.restored.InDoubtAfter = r.inDoubtAfter
	}
	r.restored.Local = local
	r.restored.Lease = time.Since(t0)
	r.restored.Epoch = h.Epoch
	// The body of one message: the server's payload limit less room for
	// the headers.
	r.maxMsg = int(cfg.Conn.MaxPayload()) - 1024
	if r.maxMsg < 4096 {
		return nil, fmt.Errorf("replicate: the server's max_payload is %d bytes: at least 5 KiB needed", cfg.Conn.MaxPayload())
	}
	t1 := time.Now()
	err = r.publishFence(ctx, s)
	if err == nil {
		err = r.bringUp(ctx, s, dir, lc)
	}
	if err != nil {
		// Released, so that another node need not wait for it to expire.
		if _, rerr := cfg.renew(ctx, kv, h, time.Unix(0, 0)); rerr != nil {
			err = errors.Join(err, fmt.Errorf("replicate: release lease of %s: %w", cfg.Store, rerr))
		}
		return nil, err
	}
	r.restored.Read = time.Since(t1)
	r.last = r.fence
	// Renewed now: bringing dir up may have taken longer than the lease
	// (a restore of a long stream), and the DB's execs run only while it
	// is proven held (Fence).
	nh, err := cfg.renew(ctx, kv, h, cfg.now().Add(cfg.LeaseTTL))
	switch {
	case errors.Is(err, errLeaseLost):
		return nil, fmt.Errorf("%w: store %s: the lease of epoch %d was taken by another node while Open brought %s up",
			ErrFenced, cfg.Store, h.Epoch, dir)
	case err != nil:
		cfg.Logger.Warn("replicate: lease renewal failed", "store", cfg.Store, "node", cfg.Node, "err", err)
	default:
		h = nh
	}
	r.mu.Lock()
	r.mu.lease = h
	r.armLocked()
	r.mu.Unlock()
	go r.renewLoop()
	go r.markLoop()
	cfg.Logger.Info("replicate: took the store", "store", cfg.Store, "node", cfg.Node, "epoch", h.Epoch,
		"fence", r.fence, "path", r.restored.Path, "messages", r.restored.Messages, "appends", r.restored.Appends)
	return r, nil
}

// bringUp brings dir up to the stream before this writer's fence: from
// the local copy lc when there is one (nil: none), else from the whole
// stream.
//
// Then dir gets every blob of the store's blob bucket it lacks
// (fetchBlobs): a crash before that ends leaves a whole local copy that
// the next Open catches up and fetches the rest into.
func (r *Replicator) bringUp(ctx context.Context, s jetstream.Stream, dir string, lc *localCopy) error {
	if err := r.bringUpLog(ctx, s, dir, lc); err != nil {
		return err
	}
	return r.fetchBlobs(ctx, dir)
}

// bringUpLog is bringUp but for the blobs.
func (r *Replicator) bringUpLog(ctx context.Context, s jetstream.Stream, dir string, lc *localCopy) error {
	if lc == nil {
		r.restored.Path = PathRestored
		return r.restore(ctx, s, dir)
	}
	reason := lc.problem
	if reason == "" {
		err := r.catchUp(ctx, s, dir, lc)
		var de *divergedError
		if !errors.As(err, &de) {
			if err == nil {
				r.restored.Path = PathCaughtUp
				if r.restored.Groups == 0 && r.restored.Cut == 0 {
					r.restored.Path = PathCurrent
				}
			}
			return err
		}
		reason = de.reason
	}
	r.cfg.Logger.Warn("replicate: the local copy is replaced by a restore from the stream", "store", r.cfg.Store, "dir", dir, "why", reason)
	// What the comparison counted is of the copy set aside.
	r.restored = RestoreInfo{Epoch: r.restored.Epoch, Fence: r.restored.Fence, Local: r.restored.Local, Lease: r.restored.Lease,
		InDoubtAfter: r.restored.InDoubtAfter, Path: PathReplaced, Replaced: reason}
	r.files = map[string][]byte{}
	r.storeID = [16]byte{}
	return r.replace(ctx, s, dir)
}

// Restored says what Open did.
func (r *Replicator) Restored() RestoreInfo { return r.restored }

// Epoch is this writer's epoch.
func (r *Replicator) Epoch() uint64 { return r.epoch }

// publishFence opens this writer's epoch: a fence message whose expected
// last sequence is the stream's last, so that everything before it is
// what the restore reads, and every later publish of an earlier writer,
// which expects a sequence before the fence, is rejected.
func (r *Replicator) publishFence(ctx context.Context, s jetstream.Stream) error {
	for {
		var info *jetstream.StreamInfo
		err := retry(ctx, r.cfg.Timeout, func(ctx context.Context) (err error) {
			info, err = s.Info(ctx)
			return err
		})
		if err != nil {
			return fmt.Errorf("replicate: fence %s: %w", streamName(r.cfg.Store), err)
		}
		m := r.msg(kindFence, nil)
		m.Header.Set(hdrNode, r.cfg.Node)
		var ack *jetstream.PubAck
		err = retry(ctx, r.cfg.Timeout, func(ctx context.Context) (err error) {
			ack, err = r.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequence(info.State.LastSeq),
				jetstream.WithMsgID(r.msgID(info.State.LastSeq+1)), jetstream.WithRetryAttempts(0))
			return err
		})
		if isWrongLastSeq(err) {
			continue // the previous writer appended meanwhile: fence after it
		}
		if err != nil {
			return fmt.Errorf("replicate: fence %s at sequence %d: %w", streamName(r.cfg.Store), info.State.LastSeq+1, err)
		}
		r.fence = ack.Sequence
		r.restored.Fence = ack.Sequence
		return nil
	}
}

// msg is a message of kind carrying this writer's epoch.
func (r *Replicator) msg(kind string, body []byte) *nats.Msg {
	subj := subjLog
	switch kind {
	case kindFence:
		subj = subjFence
	case kindFile:
		subj = subjFile
	}
	m := nats.NewMsg(subject(r.cfg.Store, subj))
	m.Header.Set(hdrKind, kind)
	m.Header.Set(hdrEpoch, strconv.FormatUint(r.epoch, 10))
	m.Data = body
	return m
}

// msgID names the message this writer publishes at stream sequence seq,
// so that a retried publish that had landed is recognised as a duplicate.
func (r *Replicator) msgID(seq uint64) string {
	return r.cfg.Store + "-" + strconv.FormatUint(r.epoch, 10) + "-" + strconv.FormatUint(seq, 10)
}

// Replicate publishes the records of one group commit of the DB's log
// (engine.Replicator) and returns once the stream's quorum acknowledged
// every part. An error matching ErrFenced: another writer fenced the
// stream, or took the lease; nothing of the group is acknowledged.
func (r *Replicator) Replicate(appends [][][]byte) error {
	r.pubMu.Lock()
	defer r.pubMu.Unlock()
	return r.replicateLocked(appends)
}

// ReplicateAt is Replicate told where the group begins in the local log
// (engine.PositionedReplicator): once the group is acknowledged, REPLICA
// can say that the log up to start is the stream up to the message before
// the group, and that the group's records follow.
func (r *Replicator) ReplicateAt(start wal.Pos, appends [][][]byte) error {
	r.pubMu.Lock()
	defer r.pubMu.Unlock()
	before := r.last
	if err := r.replicateLocked(appends); err != nil {
		return err
	}
	r.setMark(r.groupMark(start, before, r.last, appends))
	return nil
}

func (r *Replicator) replicateLocked(appends [][][]byte) error {
	body := encodeGroup(appends)
	part := r.maxMsg
	if r.cfg.maxPart > 0 {
		part = min(part, r.cfg.maxPart)
	}
	n := max(1, (len(body)+part-1)/part)
	for i := range n {
		m := r.msg(kindLog, body[i*len(body)/n:(i+1)*len(body)/n])
		m.Header.Set(hdrPart, formatPart(i+1, n))
		if err := r.publishLocked(m); err != nil {
			return err
		}
	}
	return nil
}

// ReplicateFile publishes a file of the store (engine.Replicator) unless
// the stream has it already with the same content.
func (r *Replicator) ReplicateFile(name string, data []byte) error {
	r.pubMu.Lock()
	defer r.pubMu.Unlock()
	if old, ok := r.files[name]; ok {
		if !bytes.Equal(old, data) {
			return fmt.Errorf("replicate: file %s of store %s differs from the stream's (%d bytes, the stream's %d)", name, r.cfg.Store, len(data), len(old))
		}
		return nil
	}
	if len(data)+4 > r.maxMsg {
		return fmt.Errorf("replicate: file %s of store %s is %d bytes, a message holds %d", name, r.cfg.Store, len(data), r.maxMsg)
	}
	m := r.msg(kindFile, sealFile(data))
	m.Header.Set(hdrFile, name)
	if err := r.publishLocked(m); err != nil {
		return err
	}
	r.files[name] = bytes.Clone(data)
	if name == layout.StoreName {
		if st, err := layout.ParseStore(name, data); err == nil {
			r.storeID = st.ID // a new store's: REPLICA names it from now on
		}
	}
	return nil
}

// publishLocked publishes m as the stream's next message, expecting the
// last one to be this writer's, retrying until Config.Timeout (a retry of
// a message that landed is acknowledged as a duplicate). A rejection for
// a wrong last sequence means another writer fenced the stream.
func (r *Replicator) publishLocked(m *nats.Msg) error {
	if err := r.fencedErr(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
	defer cancel()
	seq := r.last + 1
	for {
		actx, acancel := context.WithTimeout(ctx, attemptTimeout)
		ack, err := r.js.PublishMsg(actx, m, jetstream.WithExpectLastSequence(r.last), jetstream.WithMsgID(r.msgID(seq)),
			jetstream.WithRetryAttempts(0))
		acancel()
		if err == nil && ack.Sequence != seq {
			err = fmt.Errorf("replicate: store %s: the stream acknowledged sequence %d, expected %d", r.cfg.Store, ack.Sequence, seq)
			return r.setFenced(fmt.Errorf("%w: %w", ErrFenced, err))
		}
		if err == nil {
			r.last = seq
			return nil
		}
		if isWrongLastSeq(err) {
			return r.setFenced(fmt.Errorf("%w: store %s: the stream's last message is not this writer's sequence %d (epoch %d of %s): %w",
				ErrFenced, r.cfg.Store, r.last, r.epoch, r.cfg.Node, err))
		}
		if !retryable(err) || ctx.Err() != nil {
			return fmt.Errorf("replicate: store %s: publish sequence %d: %w", r.cfg.Store, seq, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replicate: store %s: publish sequence %d: %w (last error: %w)", r.cfg.Store, seq, ctx.Err(), err)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// errCodeDuplicateInProcess is JetStream's "duplicate message id is in
// process" (JSStreamDuplicateMessageConflict), which nats.go does not name.
const errCodeDuplicateInProcess jetstream.ErrorCode = 10158

// attemptTimeout bounds the wait for one publish's acknowledgement: one
// sent to a leader that died meanwhile is never answered, and is sent
// again (with its message id) to the next.
const attemptTimeout = 2 * time.Second

// apiAttempt bounds one attempt of a JetStream API call (stream and
// bucket lookups, the lease's reads and updates, the fence).
const apiAttempt = 5 * time.Second

func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// retryable: the stream may not have the message, and a retry may land it
// (no responders during a leader election, a timeout).
func retryable(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// 503: the stream has no leader now; 10158: the same message id
		// is being proposed (an earlier try of this message).
		return apiErr.Code == 503 || apiErr.ErrorCode == errCodeDuplicateInProcess
	}
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrConnectionReconnecting)
}

// retry calls fn until it returns nil or an error that is not retryable,
// or until timeout passed (a stream or bucket without a leader yet, just
// created or electing one).
func retry(ctx context.Context, timeout time.Duration, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		// One attempt may go to a server that died meanwhile and is never
		// answered: each gets at most apiAttempt of the time.
		actx, acancel := context.WithTimeout(ctx, apiAttempt)
		err := fn(actx)
		acancel()
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(25 * time.Millisecond):
		}
	}
}

func (r *Replicator) fencedErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.fenced
}

// setFenced records err as final and returns it (or the first one).
func (r *Replicator) setFenced(err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.fenced == nil {
		r.mu.fenced = err
		r.cfg.Logger.Warn("replicate: fenced", "store", r.cfg.Store, "node", r.cfg.Node, "epoch", r.epoch, "err", err)
	}
	r.loseLocked()
	return r.mu.fenced
}

// renewLoop renews the lease every LeaseTTL/3 until Close or until
// another node took it (then this writer is fenced at once, before its
// next publish meets the new writer's fence).
func (r *Replicator) renewLoop() {
	defer close(r.stopped)
	t := time.NewTicker(r.cfg.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		if r.noRenew.Load() {
			continue // tests: a writer whose renewals stall
		}
		r.mu.Lock()
		h := r.mu.lease
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.LeaseTTL/2)
		nh, err := r.cfg.renew(ctx, r.kv, h, r.cfg.now().Add(r.cfg.LeaseTTL))
		cancel()
		switch {
		case errors.Is(err, errLeaseLost):
			r.setFenced(fmt.Errorf("%w: store %s: the lease of epoch %d was taken by another node", ErrFenced, r.cfg.Store, r.epoch))
			return
		case err != nil:
			// The stream still fences this writer if another takes over.
			r.cfg.Logger.Warn("replicate: lease renewal failed", "store", r.cfg.Store, "node", r.cfg.Node, "err", err)
		default:
			r.mu.Lock()
			r.mu.lease = nh
			r.armLocked()
			r.mu.Unlock()
		}
	}
}

// Close stops renewing the lease, writes the newest REPLICA, and releases
// the lease, so that another node can take the store at once. Call it
// after the DB's Close (which writes through the Replicator): the REPLICA
// it leaves then covers the whole local log, and this node's next Open of
// the directory reads nothing from the stream unless another node wrote
// meanwhile. A fenced Replicator releases nothing (its REPLICA is still
// written: it names only what the stream acknowledged).
func (r *Replicator) Close() error {
	var err error
	r.closed.Do(func() {
		close(r.stop)
		<-r.stopped
		<-r.markDone
		r.mu.Lock()
		r.mu.closed = true
		r.loseLocked() // an exec still running is cancelled, and not certified
		h := r.mu.lease
		r.mu.Unlock()
		if e := r.persistMark(); e != nil {
			err = e
		}
		if r.fencedErr() != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
		defer cancel()
		// Released now, with the bound: the next writer waits for the
		// bound past this moment before it executes what is in doubt.
		h.Released = true
		if _, e := r.cfg.renew(ctx, r.kv, h, r.cfg.now()); e != nil {
			err = errors.Join(err, fmt.Errorf("replicate: release lease of %s: %w", r.cfg.Store, e))
		}
	})
	return err
}

// Abandon stops renewing the lease and writing REPLICA, releasing
// nothing and writing nothing more: what a crashed node leaves behind
// (tests and failover drills).
func (r *Replicator) Abandon() {
	r.closed.Do(func() {
		close(r.stop)
		<-r.stopped
		<-r.markDone
		r.mu.Lock()
		r.mu.closed = true
		if r.mu.expiry != nil {
			r.mu.expiry.Stop() // a crashed node's timers do not run
		}
		r.mu.Unlock()
	})
}

// Fence is this writer's fence (engine.FencedReplicator): its epoch for
// a token, its lease, its call bound, and when the execs of the writers
// before it are over.
func (r *Replicator) Fence() engine.Fence {
	return engine.Fence{Token: r.epoch, Lost: r.lostCh, Held: r.Held, CallBound: r.cfg.CallBound, InDoubtAfter: r.inDoubtAfter}
}

// Held reports whether this writer can prove now that it holds the
// store's lease: its last renewal has not expired by this process's
// monotonic clock (which runs on while the process is stopped), and it
// was neither fenced nor closed.
func (r *Replicator) Held() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.fenced == nil && !r.mu.closed && time.Now().Before(r.mu.lease.until)
}

// lostCh is the channel closed when the lease held now is lost.
func (r *Replicator) lostCh() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.lost
}

// armLocked sets the timer that closes lost once the lease's proof
// expires, after a renewal (or the lease's taking) moved lease.until; a
// lost lease whose late renewal went through is held again.
func (r *Replicator) armLocked() {
	if r.mu.fenced != nil || r.mu.closed {
		return
	}
	select {
	case <-r.mu.lost:
		r.mu.lost = make(chan struct{})
	default:
	}
	if r.mu.expiry != nil {
		r.mu.expiry.Stop()
	}
	until := r.mu.lease.until
	r.mu.expiry = time.AfterFunc(time.Until(until), func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.mu.lease.until.Equal(until) && !r.mu.closed {
			r.cfg.Logger.Warn("replicate: lease not renewed in time: execs stopped", "store", r.cfg.Store, "node", r.cfg.Node, "epoch", r.epoch)
			r.loseLocked()
		}
	})
}

// loseLocked closes lost.
func (r *Replicator) loseLocked() {
	select {
	case <-r.mu.lost:
	default:
		close(r.mu.lost)
	}
}
