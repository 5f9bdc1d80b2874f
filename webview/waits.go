package webview

// The waits and streams tab of a run: its waits (for an event or the
// clock) with how each ended and the event it took, the events no wait
// took yet, its streams out; and a stream's chunks, a page at a time, each
// with the atom attempt that appended it and that attempt's status.

import (
	"net/http"
	"strings"
	"time"

	"github.com/continuumdb/continuum/offline"
	"github.com/continuumdb/continuum/record"
)

// Bounds of the tab's pages (the package comment lists them).
const (
	maxWaits       = 200     // the run's latest waits shown
	maxPending     = 200     // its first events no wait took
	streamChunks   = 100     // chunks of a stream page
	streamMaxBytes = 1 << 20 // their data, at most, read for one page
)

type waitView struct {
	Seq                      uint64
	Name                     string // "" for a timer
	Declared, Deadline, Done time.Time
	Outcome, Class           string // Class: Outcome as a CSS class name
	Taken                    bool
	Event                    *eventView
}

type eventView struct {
	Name, Sender string
	Seq          uint64
	Sent         time.Time
	Payload      value
	Sealed       bool // not opened: no keyring, or the run's key erased
}

func viewEvent(e *offline.EventInfo) *eventView {
	if e == nil {
		return nil
	}
	v := &eventView{Name: e.Name, Sender: e.Sender, Seq: e.Seq, Sent: e.Sent, Sealed: e.Payload == nil && e.Sealed}
	if !v.Sealed {
		v.Payload = fold(e.Payload, 0)
	}
	return v
}

type streamRow struct {
	Name   string
	Chunks uint64
	Link   string
}

type waitsData struct {
	Waits       []waitView // newest first
	Older       int        // waits not shown
	Pending     []*eventView
	MorePend    int
	Streams     []streamRow // the first maxRows
	MoreStreams int
	StreamsErr  string
}

func (p *page) waitsPage() int {
	p.Title, p.Body = "waits and streams", "waits"
	in, r, code := p.runHeader("waits")
	if in == nil {
		return code
	}
	p.Title = "waits and streams of " + r.ID
	d := &waitsData{}
	for i := len(r.Waits) - 1; i >= 0 && len(d.Waits) < maxWaits; i-- {
		w := r.Waits[i]
		d.Waits = append(d.Waits, waitView{Seq: w.Seq, Name: w.Name, Declared: w.Declared, Deadline: w.Deadline,
			Done: w.Ended, Outcome: w.Outcome, Class: strings.ReplaceAll(w.Outcome, " ", "-"), Taken: w.Taken, Event: viewEvent(w.Event)})
	}
	d.Older = len(r.Waits) - len(d.Waits)
	for i := range r.PendingEvents {
		if len(d.Pending) == maxPending {
			d.MorePend = len(r.PendingEvents) - maxPending
			break
		}
		d.Pending = append(d.Pending, viewEvent(&r.PendingEvents[i]))
	}
	streams, err := in.Streams(r.ID)
	if err != nil {
		d.StreamsErr = clip(err.Error(), maxText)
	}
	streams, d.MoreStreams = firstN(streams, maxRows)
	for _, s := range streams {
		d.Streams = append(d.Streams, streamRow{Name: s.Name, Chunks: s.Chunks, Link: p.url("stream", "id", r.ID, "name", s.Name)})
	}
	p.Data = d
	return 0
}

type chunkView struct {
	Offset, Seq, Attempt uint64
	Status               string
	Data                 value
	Sealed               bool
}

type streamData struct {
	Name       string
	From, Next uint64
	Total      uint64
	Chunks     []chunkView
	First      string // a link to the stream's start, when From > 0
	More       string // a link to the chunks after these
	Statuses   map[string]int
}

func (p *page) streamPage() int {
	p.Title, p.Body = "stream", "stream"
	in, r, code := p.runHeader("waits")
	if in == nil {
		return code
	}
	name := p.r.URL.Query().Get("name")
	if err := record.CheckStreamName(name); err != nil {
		return p.fail(http.StatusBadRequest, "stream name %q: %v", name, err)
	}
	streams, err := in.Streams(r.ID)
	if err != nil {
		return p.failErr(err)
	}
	d := &streamData{Name: name, From: p.uintParam("from", 0), Statuses: map[string]int{}}
	found := false
	for _, s := range streams {
		if s.Name == name {
			found, d.Total = true, s.Chunks
		}
	}
	if !found {
		return p.fail(http.StatusNotFound, "run %q has no stream %q", r.ID, name)
	}
	p.Title = "stream " + name + " of " + r.ID
	chunks, next, err := in.StreamChunks(r.ID, name, d.From, streamChunks, streamMaxBytes)
	if err != nil {
		return p.failErr(err)
	}
	for _, c := range chunks {
		b := c.Bytes()
		v := chunkView{Offset: c.Offset, Seq: c.Seq, Attempt: c.Attempt, Status: c.Status, Sealed: b == nil}
		if b != nil {
			v.Data = fold(b, 0)
		}
		d.Statuses[c.Status]++
		d.Chunks = append(d.Chunks, v)
	}
	d.Next = next
	if d.From > 0 {
		d.First = p.url("stream", "id", r.ID, "name", name)
	}
	if next < d.Total {
		d.More = p.url("stream", "id", r.ID, "name", name, "from", next)
	}
	p.Data = d
	return 0
}
