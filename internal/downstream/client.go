package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// LookupTimeout bounds how long Client.Lookup retries a failing server.
const LookupTimeout = 5 * time.Second

// Client calls a Server over HTTP. It implements agent.Downstream. It is
// safe for concurrent use.
type Client struct {
	base string
	hc   *http.Client
}

// NewClient returns a client of the server at base (Server.URL).
func NewClient(base string) *Client {
	return &Client{base: strings.TrimRight(base, "/"), hc: &http.Client{Timeout: 30 * time.Second}}
}

// Exec performs a call and returns its result. An error means the call may
// or may not have taken effect (the connection broke after sending), unless
// it is a refusal (HTTP 4xx/5xx), which took no effect.
func (c *Client) Exec(ctx context.Context, tool string, args []byte, key string, idempotent bool) ([]byte, error) {
	if len(args) == 0 {
		args = []byte("null")
	}
	body, err := json.Marshal(callRequest{Tool: tool, Args: json.RawMessage(args), Key: key, Idempotent: idempotent})
	if err != nil {
		return nil, fmt.Errorf("downstream: call %s (key %q): args: %w", tool, key, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/call", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("downstream: call %s: %w", tool, err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, status, err := c.do(req)
	if err != nil {
		return nil, fmt.Errorf("downstream: call %s (key %q): %w", tool, key, err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("downstream: call %s (key %q): HTTP %d: %s", tool, key, status, strings.TrimSpace(string(res)))
	}
	return res, nil
}

// LookupContext asks whether a call under key took effect, and its result.
// An error means the server could not tell (it is unreachable, say); it
// never stands for "no effect".
func (c *Client) LookupContext(ctx context.Context, key string) ([]byte, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/lookup?key="+url.QueryEscape(key), nil)
	if err != nil {
		return nil, false, fmt.Errorf("downstream: lookup %q: %w", key, err)
	}
	res, status, err := c.do(req)
	switch {
	case err != nil:
		return nil, false, fmt.Errorf("downstream: lookup %q: %w", key, err)
	case status == http.StatusOK:
		return res, true, nil
	case status == http.StatusNotFound:
		return nil, false, nil
	}
	return nil, false, fmt.Errorf("downstream: lookup %q: HTTP %d: %s", key, status, strings.TrimSpace(string(res)))
}

// Lookup implements agent.Downstream: LookupContext, retried for up to
// LookupTimeout while the server cannot answer; then the error, so that the
// action stays in doubt rather than being taken for one that never ran.
func (c *Client) Lookup(ctx context.Context, key string) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, LookupTimeout)
	defer cancel()
	for wait := 10 * time.Millisecond; ; wait *= 2 {
		res, ok, err := c.LookupContext(ctx, key)
		if err == nil {
			return res, ok, nil
		}
		select {
		case <-ctx.Done():
			return nil, false, err
		case <-time.After(wait):
		}
	}
}

// Effects fetches the effects the server recorded per key.
func (c *Client) Effects(ctx context.Context) ([]Effect, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/effects", nil)
	if err != nil {
		return nil, fmt.Errorf("downstream: effects: %w", err)
	}
	res, status, err := c.do(req)
	if err != nil {
		return nil, fmt.Errorf("downstream: effects: %w", err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("downstream: effects: HTTP %d: %s", status, strings.TrimSpace(string(res)))
	}
	var out struct {
		Effects []Effect `json:"effects"`
	}
	if err := json.Unmarshal(res, &out); err != nil {
		return nil, fmt.Errorf("downstream: effects: bad reply: %w", err)
	}
	return out.Effects, nil
}

func (c *Client) do(req *http.Request) ([]byte, int, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, 0, fmt.Errorf("reading the reply: %w", err)
	}
	return b, resp.StatusCode, nil
}
