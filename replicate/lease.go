package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	Expires int64  `json:"expires"` // Unix nanoseconds, by the holder's clock; 0: released
}

// held is a lease this node holds: its value and the key's revision.
type held struct {
	lease
	rev uint64
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
		var e jetstream.KeyValueEntry
		err := retry(ctx, c.Timeout, func(ctx context.Context) (err error) {
			e, err = kv.Get(ctx, c.Store)
			return err
		})
		var cur lease
		var rev uint64
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return held{}, fmt.Errorf("replicate: read lease of %s: %w", c.Store, err)
		default:
			if err := json.Unmarshal(e.Value(), &cur); err != nil {
				return held{}, fmt.Errorf("replicate: lease of %s (revision %d) does not decode: %w", c.Store, e.Revision(), err)
			}
			rev = e.Revision()
		}
		now := c.now()
		if rev != 0 && !takeover && cur.Node != c.Node && cur.Expires > now.UnixNano() {
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
		next := held{lease: lease{Node: c.Node, Epoch: cur.Epoch + 1, Expires: now.Add(c.LeaseTTL).UnixNano()}}
		b, _ := json.Marshal(next.lease)
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
		return next, nil
	}
}

// renew extends h by the TTL. errLeaseLost means another node changed the
// key: it took the lease.
func (c *Config) renew(ctx context.Context, kv jetstream.KeyValue, h held, expires time.Time) (held, error) {
	h.Expires = expires.UnixNano()
	b, _ := json.Marshal(h.lease)
	rev, err := kv.Update(ctx, c.Store, b, h.rev)
	if casConflict(err) {
		// Changed since our last update, by another node or by an update
		// of ours whose answer was lost (a timeout): the value says which.
		e, gerr := kv.Get(ctx, c.Store)
		if gerr != nil {
			return h, gerr
		}
		var cur lease
		if json.Unmarshal(e.Value(), &cur) != nil || cur.Node != h.Node || cur.Epoch != h.Epoch {
			return h, errLeaseLost
		}
		h.rev = e.Revision()
		return c.renew(ctx, kv, h, expires)
	}
	if err != nil {
		return h, err
	}
	h.rev = rev
	return h, nil
}

var errLeaseLost = errors.New("replicate: lease taken by another node")

// casConflict: a Create or Update refused because the key is not at the
// revision given (nats.go names it by two errors, by the server's code).
func casConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}
