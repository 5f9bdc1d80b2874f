package main

// The agent: what a program on CONTINUUM writes to run an LLM agent with
// tools through agentloop. Everything else in this directory is the
// harness that kills it and checks what it did.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/continuumdb/continuum/agentloop"
	"github.com/continuumdb/continuum/agentloop/openai"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

// runID is the agent's run: one errand.
const runID = "office-errand"

// prompt is how the errand begins.
var prompt = []frame.Message{
	{Role: frame.RoleSystem, Content: "You are the office assistant. Use the tools to do what you are asked: " +
		"check stock before ordering, order only what is in stock, and mail ops@example.com a receipt with the order ids. " +
		"Answer with a one-sentence summary when done."},
	{Role: frame.RoleUser, Content: "We are out of coffee: order 2 bags of coffee beans and 1 pack of paper filters, and send ops the receipt."},
}

// shopTools are the tools, each a call of the shop's API (the downstream).
var shopTools = []struct {
	name, description, parameters string
	idempotent                    bool
}{
	{"lookup_stock", "How many of an item the shop has in stock.",
		`{"type":"object","properties":{"item":{"type":"string"}},"required":["item"]}`, true},
	{"place_order", "Order a quantity of an item. Charges the office account.",
		`{"type":"object","properties":{"item":{"type":"string"},"quantity":{"type":"integer","minimum":1}},"required":["item","quantity"]}`, false},
	{"send_email", "Send an email.",
		`{"type":"object","properties":{"to":{"type":"string"},"subject":{"type":"string"},"body":{"type":"string"}},"required":["to","subject","body"]}`, false},
}

// agentEnv names the environment the agent reads its model's key from, so
// that it never appears in a command line.
const agentEnv = "OPENAI_API_KEY"

func runAgent(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("llmagent agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "store `directory`")
	modelURL := fs.String("url", "", "chat completions base `URL` (…/v1)")
	model := fs.String("model", "", "model `name`")
	shopURL := fs.String("downstream", "", "the shop's base `URL`")
	hook := fs.String("hook", "", "harness `URL` told of each step before its commit (optional)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" || *modelURL == "" || *model == "" || *shopURL == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "llmagent agent: want --dir, --url, --model and --downstream")
		return 2
	}
	ev := &events{w: stdout}
	st, err := agent(context.Background(), *dir, *modelURL, os.Getenv(agentEnv), *model, *shopURL, *hook, ev)
	if err != nil {
		fmt.Fprintf(stderr, "llmagent agent: %v\n", err)
		return 1
	}
	if st != engine.StatusCompleted {
		return 1
	}
	return 0
}

func agent(ctx context.Context, dir, modelURL, key, model, shopURL, hook string, ev *events) (engine.Status, error) {
	db, err := engine.Open(dir, &engine.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	run, err := db.Run(ctx, runID)
	if err != nil {
		return 0, err
	}
	interrupted, _, err := run.Interrupted(ctx)
	if err != nil {
		return 0, err
	}
	ev.emit("open", map[string]any{"last_seq": run.LastSeq(), "interrupted": interrupted, "status": run.Status().String()})

	llm, err := openai.New(openai.Options{BaseURL: modelURL, APIKey: key, Model: model, Temperature: new(0.0), Timeout: 90 * time.Second})
	if err != nil {
		return 0, err
	}
	s := &shop{base: strings.TrimRight(shopURL, "/"), hc: &http.Client{Timeout: 30 * time.Second}}
	tools := map[string]agentloop.Tool{}
	for _, t := range shopTools {
		tools[t.name] = agentloop.Tool{
			Description: t.description, Parameters: []byte(t.parameters), Idempotent: t.idempotent,
			Func: func(ctx context.Context, call frame.ToolCall, key string) ([]byte, error) {
				return s.call(ctx, call.Name, call.Arguments, key, t.idempotent)
			},
		}
	}
	loop := &agentloop.Loop{
		Run:     run,
		Model:   llm.Complete,
		ModelID: llm.ID(),
		Tools:   tools,
		Reconcile: func(ctx context.Context, call frame.ToolCall, key string) ([]byte, bool, error) {
			res, happened, err := s.lookup(ctx, key)
			if err == nil {
				ev.emit("reconciled", map[string]any{"tool": call.Name, "key": key, "happened": happened})
			}
			return res, happened, err
		},
		Prompt:   prompt,
		MaxSteps: 12,
		Retry:    agentloop.Retry{Attempts: 4},
		Extend: func(ctx context.Context, st *agentloop.Step, d *frame.Delta) error {
			names := make([]string, 0, len(st.Results))
			for _, m := range st.Results {
				names = append(names, m.Tool)
			}
			ev.emit("step", map[string]any{"seq": st.Seq, "calls": names, "final": st.Final, "interrupted": st.Interrupted})
			d.Set("steps", fmt.Appendf(nil, "%d", st.Seq))
			if hook != "" {
				return tell(ctx, hook, fmt.Sprintf("commit:%d", st.Seq))
			}
			return nil
		},
	}
	st, res, err := loop.Drive(ctx)
	if err != nil {
		return 0, err
	}
	ev.emit("done", map[string]any{"status": st.String(), "result": string(res), "last_seq": run.LastSeq()})
	return st, db.Close()
}

// shop is the client of the shop's API (internal/downstream's protocol):
// POST /call performs a call under an idempotency key, GET /lookup?key=
// says whether a call under a key took effect.
type shop struct {
	base string
	hc   *http.Client
}

func (s *shop) call(ctx context.Context, tool string, args []byte, key string, idempotent bool) ([]byte, error) {
	body, err := json.Marshal(map[string]any{"tool": tool, "args": json.RawMessage(args), "key": key, "idempotent": idempotent})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tool, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/call", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		// The request may have reached the shop: say so, and the loop
		// asks the shop (Reconcile) before anything is done again.
		return nil, fmt.Errorf("%s: %w: %v", tool, agentloop.ErrUnknownOutcome, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w: reading the reply: %v", tool, agentloop.ErrUnknownOutcome, err)
	}
	if resp.StatusCode != http.StatusOK {
		// Refused: no effect. The model is told.
		return nil, fmt.Errorf("%s: the shop refused the call: HTTP %d: %s", tool, resp.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}

func (s *shop) lookup(ctx context.Context, key string) ([]byte, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/lookup?key="+url.QueryEscape(key), nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, false, fmt.Errorf("lookup %q: %w", key, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case err != nil:
		return nil, false, fmt.Errorf("lookup %q: %w", key, err)
	case resp.StatusCode == http.StatusOK:
		return b, true, nil
	case resp.StatusCode == http.StatusNotFound:
		return nil, false, nil
	}
	return nil, false, fmt.Errorf("lookup %q: HTTP %d: %s", key, resp.StatusCode, bytes.TrimSpace(b))
}

// tell tells the harness that the agent reached point, and waits for its
// answer (the harness may kill the agent there).
func tell(ctx context.Context, hook, point string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(hook, "/")+"/hook?point="+url.QueryEscape(point), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("hook %s: %w", point, err)
	}
	resp.Body.Close()
	return nil
}

// events prints the agent's events, one a line: "llmagent NAME {json}".
type events struct{ w io.Writer }

const eventPrefix = "llmagent "

func (e *events) emit(name string, kv map[string]any) {
	b, _ := json.Marshal(kv)
	fmt.Fprintf(e.w, "%s%s %s\n", eventPrefix, name, b)
}
