package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The lease: one key per store in a JetStream key-value bucket, changed
// only by compare-and-set on its revision. Its value names the holder, the
// epoch and when it expires. The lease decides who may start writing; the
// stream's expected-last-sequence check is what stops a stale writer (see
// the package documentation), so a wrong clock delays a failover but never
// lets two writers both be acknowledged.

// ErrLeaseHeld is matched by the error of Open when another node holds an
// unexpired lease on the store and Config.Takeover is not set, once ctx
// ends before the lease expires.
var ErrLeaseHeld = errors.New("replicate: the store's lease is held by another node")

// lease is the value of a store's key in the lease bucket.
type lease struct {
	Node    string `json:"node"`
	Epoch   uint64 `json:"epoch"`
	Expires int64  `json:"expires"` // Unix nanoseconds, by the holder's clock; 0: released before any exec
	// Released: the holder closed and gave the lease up at Expires.
	Released bool `json:"released,omitempty"`
	// Bound is the holder's bound on a call's duration (Config.CallBound,
	// nanoseconds): every exec it starts ends, or is no longer certified,
	// that long after it started, and it starts none after Expires. 0: a
	// holder that predates the bound (the next holder assumes its own).
	Bound int64 `json:"bound,omitempty"`
	// Quiet is when the execs of every earlier holder are over (Unix
	// nanoseconds; 0: none can run): the holder took it from the lease it
	// replaced, and an action an earlier holder left in doubt is not
	// executed again before it.
	Quiet int64 `json:"quiet,omitempty"`
}

// held is a lease this node holds: its value and the key's revision.
type held struct {
	lease
	rev uint64
	// until is when this node can no longer prove that it holds the
	// lease: LeaseTTL after the update that set Expires was sent, by this
	// process's monotonic clock.
	until time.Time
}

// quiet is when every exec of cur's holder and of the holders before it
// is over: cur's expiry plus its bound, or its Quiet if later. dead says
// that cur's holder is known dead (Config.HolderDead): its own execs are
// over. bound is assumed for a holder that recorded none.
func (cur lease) quiet(dead bool, bound time.Duration) int64 {
	q := cur.Quiet
	if dead || cur.Epoch == 0 || cur.Expires == 0 {
		return q
	}
	b := cur.Bound
	if b <= 0 {
		b = int64(bound)
	}
	return max(q, cur.Expires+b)
}

// leaseBucket opens or creates the lease bucket and checks its durability.
func (c *Config) leaseBucket(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := retry(ctx, c.Timeout, func(ctx context.Context) (err error) {
		kv, err = js.KeyValue(ctx, c.LeaseBucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket: c.LeaseBucket, Description: "CONTINUUM stores' writer leases",
				History: 1, Storage: jetstream.FileStorage, Replicas: c.Replicas,
			})
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("replicate: lease bucket %s: %w", c.LeaseBucket, err)
	}
	var st jetstream.KeyValueStatus
	err = retry(ctx, c.Timeout, func(ctx context.Context) (err error) {
		st, err = kv.Status(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("replicate: lease bucket %s: %w", c.LeaseBucket, err)
	}
	if cfg := st.Config(); cfg.Replicas < MinReplicas || cfg.Storage != jetstream.FileStorage {
		return nil, fmt.Errorf("%w: lease bucket %s has %d replicas on %s storage (at least %d on file needed)",
			ErrUnsafeStream, c.LeaseBucket, cfg.Replicas, cfg.Storage, MinReplicas)
	}
	return kv, nil
}

// acquire takes the store's lease with the next epoch: at once if it is
// free (absent, released or expired by this node's clock) or takeover is
// set, otherwise once it expires, waiting until then (ctx bounds the wait).
func (c *Config) acquire(ctx context.Context, kv jetstream.KeyValue, takeover bool) (held, error) {
	for {
		var value []byte
		var rev uint64
		err := retry(ctx, c.Timeout, func(ctx context.Context) (err error) {
			value, rev, err = c.readLease(ctx)
			return err
		})
		var cur lease
		switch {
		case err != nil:
			return held{}, fmt.Errorf("replicate: read lease of %s: %w", c.Store, err)
		case value != nil:
			if err := json.Unmarshal(value, &cur); err != nil {
				return held{}, fmt.Errorf("replicate: lease of %s (revision %d) does not decode: %w", c.Store, rev, err)
			}
		}
		now := c.now()
		if rev != 0 && !takeover && cur.Node != c.Node && !cur.Released && cur.Expires > now.UnixNano() {
			wait := time.Duration(cur.Expires-now.UnixNano()) + time.Millisecond
			t := time.NewTimer(min(wait, c.LeaseTTL))
			select {
			case <-ctx.Done():
				t.Stop()
				return held{}, fmt.Errorf("%w: %s holds it at epoch %d until %s: %w", ErrLeaseHeld, cur.Node, cur.Epoch,
					time.Unix(0, cur.Expires).UTC().Format(time.RFC3339Nano), context.Cause(ctx))
			case <-t.C:
			}
			continue
		}
		next := held{lease: lease{Node: c.Node, Epoch: cur.Epoch + 1, Expires: now.Add(c.LeaseTTL).UnixNano(),
			Bound: int64(c.CallBound), Quiet: cur.quiet(c.HolderDead, c.CallBound)}}
		b, _ := json.Marshal(next.lease)
		sent := time.Now()
		err = retry(ctx, c.Timeout, func(ctx context.Context) (err error) {
			if rev == 0 {
				next.rev, err = kv.Create(ctx, c.Store, b)
			} else {
				next.rev, err = kv.Update(ctx, c.Store, b, rev)
			}
			return err
		})
		if casConflict(err) {
			continue // another node changed it since we read it: look again
		}
		if err != nil {
			return held{}, fmt.Errorf("replicate: take lease of %s: %w", c.Store, err)
		}
		next.until = sent.Add(c.LeaseTTL)
		return next, nil
	}
}

// renew extends h by the TTL. errLeaseLost means another node changed the
// key: it took the lease.
func (c *Config) renew(ctx context.Context, kv jetstream.KeyValue, h held, expires time.Time) (held, error) {
	h.Expires = expires.UnixNano()
	b, _ := json.Marshal(h.lease)
	sent := time.Now()
	rev, err := kv.Update(ctx, c.Store, b, h.rev)
	if casConflict(err) {
		// Changed since our last update, by another node or by an update
		// of ours whose answer was lost (a timeout): the value says which.
		value, rev, gerr := c.readLease(ctx)
		if gerr != nil {
			return h, gerr
		}
		var cur lease
		if value == nil || json.Unmarshal(value, &cur) != nil || cur.Node != h.Node || cur.Epoch != h.Epoch {
			return h, errLeaseLost
		}
		h.rev = rev
		return c.renew(ctx, kv, h, expires)
	}
	if err != nil {
		return h, err
	}
	h.rev = rev
	h.until = sent.Add(c.LeaseTTL)
	return h, nil
}

var errLeaseLost = errors.New("replicate: lease taken by another node")

// casConflict: a Create or Update refused because the key is not at the
// revision given (nats.go names it by two errors, by the server's code).
func casConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// readLease reads the store's lease from the leader of the lease bucket's
// stream: its value and revision, or nil and 0 if the key is absent (or
// deleted). A key-value Get is a direct get, which any replica may answer,
// and a replica that lags shows a lease its holder has just released as
// held: Open would wait for it to expire (Config.LeaseTTL) although it is
// free.
func (c *Config) readLease(ctx context.Context) ([]byte, uint64, error) {
	req, _ := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{"$KV." + c.LeaseBucket + "." + c.Store})
	m, err := c.Conn.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+c.LeaseBucket, req)
	if err != nil {
		return nil, 0, err
	}
	var resp struct {
		Message *struct {
			Seq     uint64 `json:"seq"`
			Headers []byte `json:"hdrs"`
			Data    []byte `json:"data"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, 0, fmt.Errorf("message get reply: %w", err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, 0, nil
	case resp.Error != nil:
		return nil, 0, resp.Error
	case resp.Message == nil:
		return nil, 0, errors.New("message get reply without a message")
	}
	if op := kvOperation(resp.Message.Headers); op == "DEL" || op == "PURGE" {
		return nil, 0, nil
	}
	if resp.Message.Data == nil {
		resp.Message.Data = []byte{}
	}
	return resp.Message.Data, resp.Message.Seq, nil
}

// kvOperation is the KV-Operation header of a message's raw headers
// ("NATS/1.0\r\nKV-Operation: DEL\r\n\r\n"), or "".
func kvOperation(hdrs []byte) string {
	for _, line := range strings.Split(string(hdrs), "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "KV-Operation") {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
