package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/continuumdb/continuum/agentloop"
	"github.com/continuumdb/continuum/frame"
)

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1"

// MaxResponseBytes bounds the body of a response that Complete reads.
const MaxResponseBytes = 16 << 20

// Options configure a Client.
type Options struct {
	// BaseURL is the API's base, up to and without "/chat/completions".
	// Default DefaultBaseURL.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer KEY"; empty sends none (a
	// local server).
	APIKey string
	// Model is the model's name. Required.
	Model string
	// Temperature, Seed and MaxCompletionTokens are sent when set.
	Temperature         *float64
	Seed                *int64
	MaxCompletionTokens int
	// ParallelToolCalls, when set, is sent with the tools.
	ParallelToolCalls *bool
	// Header holds extra headers for every request (an organization, a
	// gateway's routing).
	Header http.Header
	// HTTPClient makes the requests. Default: a client with Timeout.
	HTTPClient *http.Client
	// Timeout bounds one request when HTTPClient is nil. Default 120 s.
	Timeout time.Duration
}

// Client calls a chat completions endpoint. It is safe for concurrent use.
type Client struct {
	opts Options
	url  string
	hc   *http.Client
}

// New returns a client for opts.
func New(opts Options) (*Client, error) {
	if opts.Model == "" {
		return nil, errors.New("openai: no Model")
	}
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(opts.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: BaseURL %q is not an http or https URL", opts.BaseURL)
	}
	if opts.MaxCompletionTokens < 0 {
		return nil, fmt.Errorf("openai: MaxCompletionTokens %d is negative", opts.MaxCompletionTokens)
	}
	hc := opts.HTTPClient
	if hc == nil {
		t := opts.Timeout
		if t <= 0 {
			t = 120 * time.Second
		}
		hc = &http.Client{Timeout: t}
	}
	return &Client{opts: opts, url: strings.TrimRight(opts.BaseURL, "/") + "/chat/completions", hc: hc}, nil
}

// ID names the model and the settings that change its answers, for
// agentloop.Loop.ModelID: "MODEL", then " temperature=T", " seed=S",
// " max_completion_tokens=N" for those set.
func (c *Client) ID() string {
	id := c.opts.Model
	if t := c.opts.Temperature; t != nil {
		id += " temperature=" + strconv.FormatFloat(*t, 'g', -1, 64)
	}
	if s := c.opts.Seed; s != nil {
		id += " seed=" + strconv.FormatInt(*s, 10)
	}
	if n := c.opts.MaxCompletionTokens; n > 0 {
		id += " max_completion_tokens=" + strconv.Itoa(n)
	}
	return id
}

// APIError is a response other than 2xx.
type APIError struct {
	StatusCode int
	// Type, Code and Message are the API's error object's, when the body
	// has one; Message is otherwise the start of the body.
	Type, Code, Message string
	// RetryAfter is the Retry-After header's wait, 0 if none.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("openai: HTTP %d", e.StatusCode)
	if e.Type != "" {
		s += " " + e.Type
	}
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Complete asks the model for the next turn of req's conversation: an
// agentloop.ModelFunc.
func (c *Client) Complete(ctx context.Context, req *agentloop.Request) (frame.Message, error) {
	body, err := c.encodeRequest(req)
	if err != nil {
		return frame.Message{}, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return frame.Message{}, fmt.Errorf("openai: %w", err)
	}
	for k, vs := range c.opts.Header {
		for _, v := range vs {
			hr.Header.Add(k, v)
		}
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	if c.opts.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+c.opts.APIKey)
	}
	if req.Key != "" {
		hr.Header.Set("Idempotency-Key", req.Key)
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		return frame.Message{}, fmt.Errorf("openai: POST %s: %w", c.url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return frame.Message{}, fmt.Errorf("openai: POST %s: reading the response: %w", c.url, err)
	}
	if len(b) > MaxResponseBytes {
		return frame.Message{}, fmt.Errorf("openai: POST %s: the response is larger than %d bytes", c.url, MaxResponseBytes)
	}
	if resp.StatusCode/100 != 2 {
		return frame.Message{}, apiError(resp, b)
	}
	m, err := decodeResponse(b)
	if err != nil {
		return frame.Message{}, fmt.Errorf("openai: POST %s: %w", c.url, err)
	}
	return m, nil
}

func apiError(resp *http.Response, b []byte) *APIError {
	e := &APIError{StatusCode: resp.StatusCode}
	var body struct {
		Error struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"` // a string, a number or null
		} `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && body.Error.Message != "" {
		e.Message, e.Type = body.Error.Message, body.Error.Type
		var s string
		if json.Unmarshal(body.Error.Code, &s) == nil {
			e.Code = s
		} else if len(body.Error.Code) > 0 && string(body.Error.Code) != "null" {
			e.Code = string(body.Error.Code)
		}
	} else {
		e.Message = strings.TrimSpace(string(b[:min(len(b), 512)]))
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		} else if t, err := http.ParseTime(s); err == nil {
			e.RetryAfter = max(0, time.Until(t))
		}
	}
	return e
}
