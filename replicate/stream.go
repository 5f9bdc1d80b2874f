package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The stream of a store and the checks that it keeps what it acknowledges.

// MinReplicas is the least replication factor a store's stream and lease
// bucket may have: with three replicas an acknowledged append is on two
// disks, and survives the loss of any one node.
const MinReplicas = 3

// ErrUnsafeStream is matched by the error of Open for a stream or lease
// bucket whose settings could lose an acknowledged append: fewer than
// MinReplicas replicas, memory storage, limits that delete messages, a
// stream that allows deletes, purges or rollups, or a server that does not
// fsync every write (sync_interval: always).
var ErrUnsafeStream = errors.New("replicate: stream could lose acknowledged appends")

var storeName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// streamName and subject name a store's stream and its subjects.
func streamName(store string) string { return "CONTINUUM_" + store }

func subject(store, kind string) string { return "continuum." + store + "." + kind }

// streamConfig is the configuration Open creates a store's stream with.
func (c *Config) streamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        streamName(c.Store),
		Description: "CONTINUUM store " + c.Store + ": its log, its files and its writers' fences",
		Subjects:    []string{subject(c.Store, ">")},
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
		Retention:   jetstream.LimitsPolicy,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		MaxAge:      0,
		Discard:     jetstream.DiscardNew,
		DenyDelete:  true,
		DenyPurge:   true,
		Duplicates:  2 * time.Minute, // covers Replicate's retries of a part
	}
}

// ensureStream creates the store's stream, or checks the one that exists.
// It returns the stream and its creation time.
func (c *Config) ensureStream(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, time.Time, error) {
	var s jetstream.Stream
	err := retry(ctx, c.Timeout, func(ctx context.Context) (err error) {
		s, err = js.Stream(ctx, streamName(c.Store))
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			s, err = js.CreateStream(ctx, c.streamConfig())
		}
		return err
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("replicate: stream %s: %w", streamName(c.Store), err)
	}
	var info *jetstream.StreamInfo
	err = retry(ctx, c.Timeout, func(ctx context.Context) (err error) {
		info, err = s.Info(ctx)
		return err
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("replicate: stream %s: %w", streamName(c.Store), err)
	}
	if err := checkStream(&info.Config); err != nil {
		return nil, time.Time{}, err
	}
	var servers []string
	if cl := info.Cluster; cl != nil {
		servers = append(servers, cl.Leader)
		for _, p := range cl.Replicas {
			servers = append(servers, p.Name)
		}
	}
	if err := c.checkSync(ctx, info.Config.Name, servers); err != nil {
		return nil, time.Time{}, err
	}
	return s, info.Created, nil
}

// checkStream refuses a stream configured so that it could lose or remove
// an acknowledged append.
func checkStream(cfg *jetstream.StreamConfig) error {
	var bad []string
	if cfg.Replicas < MinReplicas {
		bad = append(bad, fmt.Sprintf("%d replicas (at least %d needed)", cfg.Replicas, MinReplicas))
	}
	if cfg.Storage != jetstream.FileStorage {
		bad = append(bad, "memory storage")
	}
	if cfg.Retention != jetstream.LimitsPolicy {
		bad = append(bad, fmt.Sprintf("retention %s (limits needed)", cfg.Retention))
	}
	if cfg.MaxMsgs > 0 || cfg.MaxBytes > 0 || cfg.MaxAge > 0 || cfg.MaxMsgsPerSubject > 0 {
		bad = append(bad, "limits that remove old messages (max msgs, bytes, age or per subject)")
	}
	if !cfg.DenyDelete || !cfg.DenyPurge {
		bad = append(bad, "deletes or purges allowed")
	}
	if cfg.AllowRollup {
		bad = append(bad, "rollups allowed")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: stream %s has %s", ErrUnsafeStream, cfg.Name, strings.Join(bad, ", "))
	}
	return nil
}

// checkSync asks every server holding the stream whether it fsyncs every
// write (sync_interval: always), through the system account's server
// ping; without a SystemConn it trusts Config.AssumeSyncAlways. With the
// default interval a server acknowledges writes that a power loss of a
// majority can lose (Jepsen, NATS 2.12.1).
func (c *Config) checkSync(ctx context.Context, stream string, servers []string) error {
	if c.SystemConn == nil {
		if c.AssumeSyncAlways {
			return nil
		}
		return fmt.Errorf("%w: stream %s: no SystemConn to check that its servers run with sync_interval: always, and AssumeSyncAlways is not set", ErrUnsafeStream, stream)
	}
	if len(servers) == 0 {
		return fmt.Errorf("%w: stream %s reports no cluster peers", ErrUnsafeStream, stream)
	}
	// A server that does not answer may be one just restarted whose
	// system account's routes are not up yet (a failover right after a
	// node came back): it is asked again, until Config.Timeout, before it
	// counts against the stream. A server that answers "not always" fails
	// the check at once.
	sync := map[string]syncSetting{}
	deadline := time.Now().Add(c.Timeout)
	for {
		got, err := serverSync(ctx, c.SystemConn, servers)
		if err != nil {
			return fmt.Errorf("replicate: stream %s: asking its servers for their sync setting: %w", stream, err)
		}
		maps.Copy(sync, got)
		if all(servers, sync) || !syncAll(got) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	var bad []string
	for _, s := range servers {
		st, ok := sync[s]
		switch {
		case !ok:
			bad = append(bad, s+" did not answer")
		case !st.SyncAlways:
			bad = append(bad, fmt.Sprintf("%s syncs every %v, not always", s, st.SyncInterval))
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Errorf("%w: stream %s: %s", ErrUnsafeStream, stream, strings.Join(bad, "; "))
	}
	return nil
}

// syncSetting is the part of a server's VARZ that says how it syncs.
type syncSetting struct {
	SyncInterval time.Duration `json:"sync_interval"`
	SyncAlways   bool          `json:"sync_always"`
}

// serverSync asks every server for its VARZ and returns the sync settings
// of those named in want that answered before ctx (or a second) ended.
func serverSync(ctx context.Context, sys *nats.Conn, want []string) (map[string]syncSetting, error) {
	inbox := sys.NewRespInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := sys.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := sys.PublishRequest("$SYS.REQ.SERVER.PING.VARZ", inbox, nil); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	got := map[string]syncSetting{}
	for {
		select {
		case m := <-ch:
			var r struct {
				Server struct {
					Name string `json:"name"`
				} `json:"server"`
				Data struct {
					JetStream struct {
						Config syncSetting `json:"config"`
					} `json:"jetstream"`
				} `json:"data"`
			}
			if err := json.Unmarshal(m.Data, &r); err != nil {
				return nil, fmt.Errorf("VARZ reply: %w", err)
			}
			got[r.Server.Name] = r.Data.JetStream.Config
			if all(want, got) {
				return got, nil
			}
		case <-ctx.Done():
			return got, nil
		}
	}
}

// syncAll: every answer in got says sync_interval: always.
func syncAll(got map[string]syncSetting) bool {
	for _, st := range got {
		if !st.SyncAlways {
			return false
		}
	}
	return true
}

func all(want []string, got map[string]syncSetting) bool {
	for _, w := range want {
		if _, ok := got[w]; !ok {
			return false
		}
	}
	return true
}
