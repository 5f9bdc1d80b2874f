package webview_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/webview"
	"github.com/continuumdb/continuum/webview/internal/demo"
)

// TestWaitsAndStreams checks the waits and streams tab and a stream's
// page against what the store's own inspector reads: every wait with its
// outcome and event, the events no wait took, every stream and each
// chunk with its attempt's status.
func TestWaitsAndStreams(t *testing.T) {
	dir := demoStore(t)
	v, _ := newView(t, webview.Options{Dir: dir})
	ctx := context.Background()
	in, err := engine.Inspect(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	r, ok := in.Run(demo.WaitsRun)
	if !ok || len(r.Waits) != 3 || len(r.PendingEvents) != 1 {
		t.Fatalf("the demo's run %q: %+v", demo.WaitsRun, r)
	}

	code, body, _ := get(t, v, "/waits?id="+demo.WaitsRun)
	if code != 200 {
		t.Fatalf("waits: %d %s", code, body)
	}
	outcomes := map[string]int{}
	for _, w := range r.Waits {
		outcomes[w.Outcome]++
		row := regexp.MustCompile(fmt.Sprintf(`(?s)<tr class="wait out-[a-z-]+" data-seq="%d">.*?</tr>`, w.Seq)).FindString(body)
		if !strings.Contains(row, `<span class="status outcome">`+w.Outcome+`</span>`) {
			t.Errorf("wait after seq %d: row %q lacks outcome %q", w.Seq, row, w.Outcome)
		}
		// the payload is JSON, shown indented: its XSS note as text
		if w.Event != nil && (!strings.Contains(row, `<span class="sender">`+esc(w.Event.Sender)+`</span>`) || !strings.Contains(row, "&gt;&lt;img src=x onerror=")) {
			t.Errorf("wait after seq %d: row %q lacks its event from %q", w.Seq, row, w.Event.Sender)
		}
	}
	if outcomes["delivered"] != 1 || outcomes["timed out"] != 1 || outcomes["open"] != 1 {
		t.Errorf("the demo's waits ended %v, want one delivered, timed out and open each", outcomes)
	}
	pend := body[strings.Index(body, `id="pending"`):]
	pend = pend[:strings.Index(pend, "</section>")]
	if e := r.PendingEvents[0]; !strings.Contains(pend, esc(e.Sender)) || !strings.Contains(pend, esc(string(e.Payload))) {
		t.Errorf("pending events: %q lacks the event from %q", pend, e.Sender)
	}
	streams, err := in.Streams(demo.WaitsRun)
	if err != nil || len(streams) != 2 {
		t.Fatalf("streams: %v %v", streams, err)
	}
	for _, s := range streams {
		if !regexp.MustCompile(fmt.Sprintf(`<tr data-stream="%s"><td><a href="[^"]*name=%s">%s</a></td><td class="num">%d</td>`, s.Name, s.Name, s.Name, s.Chunks)).MatchString(body) {
			t.Errorf("stream %q of %d chunks not listed", s.Name, s.Chunks)
		}
	}

	// the stream's page: each chunk, its attempt and status, its data as text
	_, body, _ = get(t, v, "/stream?id="+demo.WaitsRun+"&name=tokens")
	chunks, _, err := in.StreamChunks(demo.WaitsRun, "tokens", 0, 0, 0)
	if err != nil || len(chunks) != 7 {
		t.Fatalf("chunks: %d %v", len(chunks), err)
	}
	status := map[string]int{}
	for _, c := range chunks {
		status[c.Status]++
		want := fmt.Sprintf(`<li class="chunk st-%s" data-offset="%d"><span class="off">#%d</span> <span class="status st-%s">%s</span> <span class="note">atom %d, attempt %d</span> <code class="val">%s</code>`,
			c.Status, c.Offset, c.Offset, c.Status, c.Status, c.Seq, c.Attempt, esc(string(c.Bytes())))
		if !strings.Contains(body, want) {
			t.Errorf("stream page lacks chunk %d: %s", c.Offset, want)
		}
	}
	if status["failed"] != 2 || status["committed"] != 5 {
		t.Errorf("chunk statuses %v, want 2 failed (the first attempt) and 5 committed", status)
	}

	// the runs page and the run's header say what the run waits for
	_, body, _ = get(t, v, "/")
	if !strings.Contains(body, `<span class="tag wait" title="an open wait">waits for review</span>`) {
		t.Errorf("runs page: the waiting run is not marked")
	}
	_, body, _ = get(t, v, "/run?id="+demo.WaitsRun)
	if !strings.Contains(body, `<dd id="run-waitsfor">review</dd>`) || !strings.Contains(body, `id="tab-waits"`) {
		t.Errorf("run header: no wait or no tab")
	}

	for target, want := range map[string]int{
		"/stream?id=" + demo.WaitsRun + "&name=no-such":                          404,
		"/stream?id=" + demo.WaitsRun + "&name=a%20b":                            400,
		"/stream?id=" + demo.WaitsRun:                                            400,
		"/stream?id=no-such-run&name=tokens":                                     404,
		"/waits?id=no-such-run":                                                  404,
		"/stream?id=" + demo.WaitsRun + "&name=tokens&from=99999999999999999999": 200, // from 0, as other pages
		"/stream?id=" + demo.WaitsRun + "&name=tokens&from=last":                 200,
		"/stream?id=" + demo.WaitsRun + "&name=tokens&from=500":                  200,
	} {
		if code, body, _ := get(t, v, target); code != want {
			t.Errorf("%s: %d, want %d: %s", target, code, want, body)
		}
	}
}

// TestStreamPages pages through a stream longer than a page.
func TestStreamPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	ctx := context.Background()
	db, err := engine.Open(dir, &engine.Options{Durability: engine.Relaxed})
	if err != nil {
		t.Fatal(err)
	}
	r, err := db.Run(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 250
	for i := range n {
		if _, err := a.Append(ctx, "log", fmt.Appendf(nil, "line %03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("k", []byte("v"))); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	v, _ := newView(t, webview.Options{Dir: dir})
	next := regexp.MustCompile(`<a href="([^"]+)" class="next">`)
	target, seen := "/stream?id=long&name=log", 0
	for pages := 1; ; pages++ {
		code, body, _ := get(t, v, target)
		if code != 200 {
			t.Fatalf("%s: %d %s", target, code, body)
		}
		for i := range strings.Count(body, `<li class="chunk`) {
			if !strings.Contains(body, fmt.Sprintf("line %03d</code>", seen+i)) {
				t.Fatalf("page %d lacks line %d", pages, seen+i)
			}
		}
		seen += strings.Count(body, `<li class="chunk`)
		m := next.FindStringSubmatch(body)
		if m == nil {
			if seen != n || pages != 3 {
				t.Fatalf("%d chunks over %d pages, want %d over 3", seen, pages, n)
			}
			return
		}
		target = strings.ReplaceAll(m[1], "&amp;", "&")
	}
}
