package webview

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/offline"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

var tmpl = template.Must(template.New("").Funcs(template.FuncMap{
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12]
		}
		return s
	},
	"add": func(a, b uint64) uint64 { return a + b },
	"sub": func(a, b uint64) uint64 {
		if b > a {
			return 0
		}
		return a - b
	},
	"age":     age,
	"isolate": isolate,
	"lanex":   func(i int) int { return 40 + i*150 - 10 },
	"plus":    func(a, b int) int { return a + b },
	"node":    func(p string, n *treeNode) treeArg { return treeArg{P: p, N: n} },
	"when": func(t time.Time) string {
		if t.IsZero() || t.UnixNano() == 0 {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
}).ParseFS(templateFS, "templates/*.tmpl"))

// Page sizes: the rows, atoms and nodes one page reads and shows. Each
// list a page cuts short says how many it left out.
const (
	runsPerPage   = 100
	atomsPerPage  = 50
	dagPerPage    = 200
	ledgerAtoms   = 100
	ledgerActions = 500  // actions of a ledger page (its counts count them all)
	maxMessages   = 300  // messages of a frame shown (the latest)
	maxMemory     = 1000 // memory keys of a frame shown
	maxRows       = 1000 // subgoals, pending actions and erased keys of a frame; changes of a diff; streams of a run
	maxTreeNodes  = 2000 // runs of the lineage page
	maxForks      = 100  // forks named in a run's header
	maxAtomOps    = 200  // ops of an atom on the timeline
	// maxItems bounds the other lists of an atom on the timeline (its
	// actions, messages sent and received, and branch reads), the undos
	// of a rollback, a run's rollbacks on the ledger page, and the actions
	// in doubt or of an unfinished atom in a run's header.
	maxItems = 100
	// maxPage bounds the HTML of a page: a page that would be larger
	// (values of 16 KiB on every row of it, from a hostile store) is not
	// sent, and the answer says why. It bounds the memory of rendering.
	maxPage = 32 << 20
)

// firstN returns the first n elements of s and how many it left out.
func firstN[T any](s []T, n int) ([]T, int) {
	if len(s) <= n {
		return s, 0
	}
	return s[:n], len(s) - n
}

// page is one request's page: what the layout template needs, and the
// content.
type page struct {
	v   *View
	s   *snap
	r   *http.Request
	ctx context.Context

	Prefix  string
	Dir     string
	Gen     uint64
	Title   string
	Body    string // the content's template
	Data    any
	Error   string
	Run     *runHeader // the run the page is about, for the run tabs
	Tab     string
	Live    bool // a live process holds the store open
	PID     int
	StoreID string
	Events  string // the SSE URL: the page updates in place
}

func (p *page) fail(status int, format string, args ...any) int {
	p.Error = clip(fmt.Sprintf(format, args...), maxText)
	if p.Title == "" {
		p.Title = "error"
	}
	p.Body = ""
	return status
}

// failErr turns an error of the store into the page's message.
func (p *page) failErr(err error) int {
	switch {
	case errors.Is(err, offline.ErrKeyring):
		return p.fail(http.StatusForbidden, "This store is encrypted and the view has no keyring for it, or a keyring that does not fit: "+
			"start the view with --keyring FILE (the keyring the store was written with). Only verify works without it. (%v)", err)
	case errors.Is(err, offline.ErrSeqOutOfRange):
		return p.fail(http.StatusNotFound, "%v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return p.fail(http.StatusServiceUnavailable, "this page took longer than %s to read from the store, and stopped: ask for fewer atoms", p.v.opts.RequestTimeout)
	case errors.Is(err, frame.ErrBudget):
		return p.fail(http.StatusUnprocessableEntity, "the store's records decompress to more than the reader's budget allows (a decompression bomb?): %v", err)
	}
	return p.fail(http.StatusInternalServerError, "%v", err)
}

// inspector returns the store's Inspector, or answers the page with why
// there is none.
func (p *page) inspector() (*offline.Inspector, int) {
	if p.s.err != nil {
		return nil, p.failErr(p.s.err)
	}
	h := p.s.in.Holder()
	p.Live, p.PID, p.StoreID = h.Live, h.PID, p.s.in.StoreID()
	return p.s.in, 0
}

// errPageTooLarge stops the rendering of a page past maxPage bytes.
var errPageTooLarge = errors.New("webview: page too large")

// pageBuffer is a page's HTML: at most maxPage bytes.
type pageBuffer struct{ bytes.Buffer }

func (b *pageBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxPage {
		return 0, errPageTooLarge
	}
	return b.Buffer.Write(p)
}

func (p *page) render(w http.ResponseWriter, status int) {
	if status == 0 {
		status = http.StatusOK
	}
	var buf pageBuffer
	err := tmpl.ExecuteTemplate(&buf, "layout", p)
	if errors.Is(err, errPageTooLarge) {
		// Say why, on a page without the content nor the run's header.
		p.Run, p.Data = nil, nil
		status = p.fail(http.StatusUnprocessableEntity, "this page would be larger than %d MiB (the store holds many large values "+
			"or names where it shows them), so it is not sent: ask for another page, or read the store with continuumctl", maxPage>>20)
		buf.Reset()
		err = tmpl.ExecuteTemplate(&buf, "layout", p)
	}
	if err != nil {
		p.v.opts.Log.Error("webview: template", "err", err)
		http.Error(w, "internal error: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if p.r.Method != http.MethodHead {
		w.Write(buf.Bytes())
	}
}

func (p *page) url(name string, kv ...any) string {
	u := p.Prefix + name
	sep := "?"
	for i := 0; i+1 < len(kv); i += 2 {
		u += sep + fmt.Sprint(kv[i]) + "=" + url.QueryEscape(fmt.Sprint(kv[i+1]))
		sep = "&"
	}
	return u
}

func (p *page) uintParam(name string, def uint64) uint64 {
	s := p.r.URL.Query().Get(name)
	if s == "" {
		return def
	}
	if s == "last" {
		return ^uint64(0)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return def
	}
	return n
}

func age(t time.Time) string {
	if t.IsZero() || t.UnixNano() == 0 {
		return ""
	}
	d := time.Since(t)
	switch {
	case d < 0:
		return "in the future"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// runRow is one run of the runs page.
type runRow struct {
	ID, Status, Parent string
	ForkedAt, LastSeq  uint64
	Atoms              uint64
	Created, Ended     time.Time
	InDoubt            int
	Waiting            int    // actions of the running or interrupted atom
	Unfinished         string // "running 7", "interrupted 7" or ""
	Rollbacks          int
	// WaitsFor names the event the run's open wait waits for ("the
	// clock" for a timer); Ready says how its wait ended when no atom took
	// it yet ("delivered", "timed out", "cancelled"): the run is to resume.
	WaitsFor, Ready string
}

func newRunRow(r offline.RunSummary) runRow {
	row := runRow{ID: r.ID, Status: r.Status, Parent: r.Parent, ForkedAt: r.ForkedAt, LastSeq: r.LastSeq, Atoms: r.Atoms,
		Created: r.Created, Ended: r.Ended, InDoubt: len(r.InDoubt), Waiting: len(r.AtomActions), Rollbacks: len(r.Rollbacks)}
	if row.LastSeq == 0 && r.Parent != "" {
		row.LastSeq = r.ForkedAt
	}
	if n := len(r.Waits); n > 0 && !r.Waits[n-1].Taken {
		switch w := r.Waits[n-1]; {
		case w.Outcome == "open" && w.Name == "":
			row.WaitsFor = "the clock"
		case w.Outcome == "open":
			row.WaitsFor = w.Name
		case w.Outcome != "withdrawn":
			row.Ready = w.Outcome
		}
	}
	switch {
	case r.Running != 0:
		row.Unfinished = fmt.Sprintf("running %d", r.Running)
	case r.Interrupted != 0:
		row.Unfinished = fmt.Sprintf("interrupted %d", r.Interrupted)
	}
	return row
}

type runsData struct {
	Rows              []runRow
	Total, Matched    int
	Page, Pages       int
	Q, Status, Sort   string
	Prev, Next        string
	Warnings          []string
	Statuses          []string
	Atoms, Records    int64
	Created           time.Time
	InDoubt, Unfinish int
}

func (p *page) runsPage() int {
	p.Title, p.Body, p.Events = "runs", "runs", p.url("events")
	in, code := p.inspector()
	if in == nil {
		return code
	}
	q := p.r.URL.Query()
	ws := in.Warnings()
	d := &runsData{Q: q.Get("q"), Status: q.Get("status"), Sort: q.Get("sort"), Warnings: clipEach(ws, maxRows, maxText), Created: in.Created(),
		Statuses: []string{"", "active", "completed", "failed", "cancelled", "in-doubt", "unfinished", "forks"}}
	if len(ws) > maxRows {
		d.Warnings = append(d.Warnings, fmt.Sprintf("and %d more warnings", len(ws)-maxRows))
	}
	st := in.Stats()
	d.Atoms, d.Records = st.Atoms, st.Records
	runs := in.Runs()
	d.Total = len(runs)
	needle := strings.ToLower(d.Q)
	kept := runs[:0]
	for _, r := range runs {
		if len(r.InDoubt) > 0 {
			d.InDoubt++
		}
		if r.Running != 0 || r.Interrupted != 0 {
			d.Unfinish++
		}
		if needle != "" && !strings.Contains(strings.ToLower(r.ID), needle) && !strings.Contains(strings.ToLower(r.Parent), needle) {
			continue
		}
		switch d.Status {
		case "", "any":
		case "in-doubt":
			if len(r.InDoubt) == 0 {
				continue
			}
		case "unfinished":
			if r.Running == 0 && r.Interrupted == 0 {
				continue
			}
		case "forks":
			if r.Parent == "" {
				continue
			}
		default:
			if r.Status != d.Status {
				continue
			}
		}
		kept = append(kept, r)
	}
	switch d.Sort {
	case "newest":
		sort.SliceStable(kept, func(i, j int) bool { return kept[i].Created.After(kept[j].Created) })
	case "seq":
		sort.SliceStable(kept, func(i, j int) bool { return kept[i].LastSeq > kept[j].LastSeq })
	}
	d.Matched = len(kept)
	d.Pages = max(1, (len(kept)+runsPerPage-1)/runsPerPage)
	d.Page = min(max(1, int(min(p.uintParam("page", 1), 1<<30))), d.Pages)
	from := (d.Page - 1) * runsPerPage
	for _, r := range kept[from:min(len(kept), from+runsPerPage)] {
		d.Rows = append(d.Rows, newRunRow(r))
	}
	link := func(page int) string {
		return p.url("", "q", d.Q, "status", d.Status, "sort", d.Sort, "page", page)
	}
	if d.Page > 1 {
		d.Prev = link(d.Page - 1)
	}
	if d.Page < d.Pages {
		d.Next = link(d.Page + 1)
	}
	p.Data = d
	return 0
}

// runHeader is the summary of a run shown above each of its pages.
type runHeader struct {
	runRow
	Head        string
	Forks       []runRow // the first maxForks
	MoreForks   int      // forks not in Forks
	InDoubtList []actionView
	AtomActions []actionView
	Result      value
	First       uint64 // its first own seq
	Pending     []uint64
	// MoreInDoubt and MoreAtomActions count the actions not in
	// InDoubtList and AtomActions (each at most maxItems).
	MoreInDoubt, MoreAtomActions int
}

// runHeader finds the run of the page's "id", or answers the page.
func (p *page) runHeader(tab string) (*offline.Inspector, offline.RunSummary, int) {
	in, code := p.inspector()
	if in == nil {
		return nil, offline.RunSummary{}, code
	}
	id := p.r.URL.Query().Get("id")
	r, ok := in.Run(id)
	if !ok {
		return nil, r, p.fail(http.StatusNotFound, "the store has no run %q", id)
	}
	h := &runHeader{runRow: newRunRow(r), Head: r.Head.String(), Result: fold(r.Result, 0), First: r.ForkedAt + 1}
	inDoubt, more := firstN(r.InDoubt, maxItems)
	h.MoreInDoubt = more
	for _, a := range inDoubt {
		h.InDoubtList = append(h.InDoubtList, viewAction(a))
	}
	atomActions, more := firstN(r.AtomActions, maxItems)
	h.MoreAtomActions = more
	for _, a := range atomActions {
		h.AtomActions = append(h.AtomActions, viewAction(a))
	}
	for _, rb := range r.Rollbacks {
		if !rb.Completed {
			h.Pending = append(h.Pending, rb.To)
		}
	}
	for _, c := range in.Runs() {
		switch {
		case c.Parent != r.ID:
		case len(h.Forks) < maxForks:
			h.Forks = append(h.Forks, newRunRow(c))
		default:
			h.MoreForks++
		}
	}
	p.Run, p.Tab, p.Events = h, tab, p.url("events", "id", r.ID)
	return in, r, 0
}

// atomView is one atom of a timeline: its first maxAtomOps ops, and the
// first maxItems of its other lists (the More fields count the rest).
type atomView struct {
	Seq, Base  uint64
	Head       string
	Size       int
	Branch     string
	Reads      []string
	Ops        []opView
	Actions    []actionView
	Sent       []sentView
	Consumed   []string
	Rollback   *rollbackView
	Err        string // the atom could not be read
	IsBranch   bool
	OwnerRun   string
	FrameLink  string
	LedgerLink string

	MoreReads, MoreOps, MoreActions, MoreSent, MoreConsumed int
}

type sentView struct {
	Index   int
	To      string
	Payload value
}

type rollbackView struct {
	Seq, To   uint64
	Started   time.Time
	Completed bool
	Undo      []undoView // the first maxItems
	MoreUndo  int
}

type undoView struct {
	Seq         uint64
	Tool        string
	Fingerprint string
	CompTool    string
	CompArgs    value
	CompKey     string
	Undone      bool
}

func viewRollback(r offline.RollbackInfo) *rollbackView {
	v := &rollbackView{Seq: r.Seq, To: r.To, Started: r.Started, Completed: r.Completed}
	undo, more := firstN(r.Undo, maxItems)
	v.MoreUndo = more
	for _, u := range undo {
		uv := undoView{Seq: u.Seq, Tool: clip(u.Tool, maxName), Fingerprint: u.Action.String()}
		if u.Compensation != nil {
			uv.Undone, uv.CompTool, uv.CompArgs, uv.CompKey = true, clip(u.Compensation.Tool, maxName), fold(u.Compensation.Args, 0), clip(u.Compensation.Key, maxName)
		}
		v.Undo = append(v.Undo, uv)
	}
	return v
}

func (p *page) viewAtom(in *offline.Inspector, r offline.RunSummary, seq uint64) atomView {
	v := atomView{Seq: seq, FrameLink: p.url("frame", "id", r.ID, "seq", seq)}
	a, err := in.Atom(p.ctx, r.ID, seq)
	if err != nil {
		v.Err = clip(err.Error(), maxText)
		return v
	}
	v.Base, v.Head, v.Size, v.Branch = a.Base, a.Head.String(), a.Size, a.Branch
	v.IsBranch = a.Branch != "" || a.Base+1 != a.Seq
	reads, more := firstN(a.Reads, maxItems)
	v.MoreReads = more
	for _, k := range reads {
		v.Reads = append(v.Reads, clip(k.String(), maxName))
	}
	ops, more := firstN(offline.NewExportedOps(a), maxAtomOps)
	v.MoreOps = more
	for _, op := range ops {
		v.Ops = append(v.Ops, viewOp(op))
	}
	acts, more := firstN(a.Actions, maxItems)
	v.MoreActions = more
	for _, act := range acts {
		v.Actions = append(v.Actions, viewAction(act))
	}
	sent, more := firstN(a.Sent, maxItems)
	v.MoreSent = more
	for i, m := range sent {
		v.Sent = append(v.Sent, sentView{Index: i, To: m.To, Payload: fold(m.Payload, 0)})
	}
	consumed, more := firstN(a.Consumed, maxItems)
	v.MoreConsumed = more
	for _, m := range consumed {
		v.Consumed = append(v.Consumed, clip(m.String(), maxName))
	}
	for _, rb := range r.Rollbacks {
		if rb.Seq == seq {
			v.Rollback = viewRollback(rb)
		}
	}
	return v
}

// window is a range of a run's own seqs shown by a paginated page.
type window struct {
	From, To, First, Last uint64
	Prev, Next, Latest    string
	Earliest              string
}

// window reads the page's from parameter: n atoms from it, or the last n.
func (p *page) window(r offline.RunSummary, name string, n uint64, extra ...any) window {
	w := window{First: r.ForkedAt + 1, Last: r.LastSeq}
	if r.Atoms == 0 || w.Last < w.First {
		return w
	}
	def := w.First
	if w.Last+1 >= n+w.First {
		def = w.Last + 1 - n
	}
	w.From = min(max(p.uintParam("from", def), w.First), w.Last)
	w.To = min(w.From+n-1, w.Last)
	link := func(from uint64) string { return p.url(name, append([]any{"id", r.ID, "from", from}, extra...)...) }
	if w.From > w.First {
		w.Prev = link(max(w.First, w.From-min(w.From, n)))
		w.Earliest = link(w.First)
	}
	if w.To < w.Last {
		w.Next = link(w.To + 1)
		w.Latest = p.url(name, append([]any{"id", r.ID}, extra...)...)
	}
	return w
}

type timelineData struct {
	Window  window
	Atoms   []atomView
	Pending []*rollbackView
	Fails   int
}

func (p *page) timelinePage() int {
	p.Title, p.Body = "timeline", "timeline"
	in, r, code := p.runHeader("timeline")
	if in == nil {
		return code
	}
	p.Title = "run " + r.ID
	d := &timelineData{Window: p.window(r, "run", atomsPerPage), Fails: r.Fails}
	for _, rb := range r.Rollbacks {
		if !rb.Completed {
			d.Pending = append(d.Pending, viewRollback(rb))
		}
	}
	if d.Window.To != 0 {
		for seq := d.Window.From; seq <= d.Window.To; seq++ {
			if err := p.ctx.Err(); err != nil {
				return p.failErr(err)
			}
			d.Atoms = append(d.Atoms, p.viewAtom(in, r, seq))
		}
	}
	p.Data = d
	return 0
}

// frameView is a frame as structured data: its first maxRows subgoals,
// pending actions and erased keys, maxMemory memory keys and last
// maxMessages messages (the More fields count the rest).
type frameView struct {
	Objective    value
	Subgoals     []subgoalView
	MoreSubgoals int
	Memory       []field
	MoreMemory   int
	Erased       []string
	MoreErased   int
	Scratchpad   value
	Messages     []messageView
	EarlierMsgs  int
	Pending      []pendingView
	MorePending  int
	MessageCount int
}

type subgoalView struct {
	ID, Status string
	Text       value
}

type pendingView struct {
	CallID, Tool, Key string
	Args              value
}

func viewFrame(f *frame.Frame, erased []string) *frameView {
	v := &frameView{Objective: foldString(f.Objective), Erased: clipAll(erased, maxRows), Scratchpad: fold(f.Scratchpad, 0), MessageCount: len(f.Messages)}
	v.MoreErased = len(erased) - len(v.Erased)
	subgoals, more := firstN(f.Subgoals, maxRows)
	v.MoreSubgoals = more
	for _, s := range subgoals {
		v.Subgoals = append(v.Subgoals, subgoalView{ID: clip(s.ID, maxName), Status: s.Status.String(), Text: foldString(s.Text)})
	}
	keys := make([]string, 0, len(f.Memory))
	for k := range f.Memory {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > maxMemory {
		v.MoreMemory = len(keys) - maxMemory
		keys = keys[:maxMemory]
	}
	for _, k := range keys {
		v.Memory = append(v.Memory, field{Name: clip(k, maxName), Value: fold(f.Memory[k], 0)})
	}
	from := max(0, len(f.Messages)-maxMessages)
	v.EarlierMsgs = from
	for i, m := range f.Messages[from:] {
		v.Messages = append(v.Messages, viewMessage(m, from+i+1))
	}
	pending, more := firstN(f.Pending, maxRows)
	v.MorePending = more
	for _, pd := range pending {
		v.Pending = append(v.Pending, pendingView{CallID: clip(pd.CallID, maxName), Tool: clip(pd.Tool, maxName), Key: clip(pd.Key, maxName), Args: fold(pd.Args, 0)})
	}
	return v
}

type frameData struct {
	Run          string
	Seq, Min     uint64
	Max          uint64
	Frame        *frameView
	Prev, Next   string
	Against      string // the diff's other seq as given ("" none)
	With         string // the diff's other run
	Diff         *stateDiff
	DiffErr      string
	AgainstSeq   uint64
	InheritedTip string
}

func (p *page) framePage() int {
	p.Title, p.Body = "frame", "frame"
	in, r, code := p.runHeader("frame")
	if in == nil {
		return code
	}
	q := p.r.URL.Query()
	d := &frameData{Run: r.ID, Max: r.LastSeq, Against: q.Get("against"), With: q.Get("with")}
	if r.Atoms == 0 && r.Parent != "" {
		d.Max = r.ForkedAt
	}
	d.Seq = min(p.uintParam("seq", d.Max), d.Max)
	p.Title = fmt.Sprintf("run %s at seq %d", r.ID, d.Seq)
	f, erased, err := p.stateAt(in, r, d.Seq)
	if err != nil {
		return p.failErr(err)
	}
	d.Frame = viewFrame(f, erased)
	if d.Seq > 0 {
		d.Prev = p.url("frame", "id", r.ID, "seq", d.Seq-1)
	}
	if d.Seq < d.Max {
		d.Next = p.url("frame", "id", r.ID, "seq", d.Seq+1)
	}
	if d.Against != "" {
		other := r.ID
		if d.With != "" {
			other = d.With
		}
		or, ok := in.Run(other)
		switch {
		case !ok:
			d.DiffErr = fmt.Sprintf("the store has no run %q", other)
		default:
			omax := or.LastSeq
			if or.Atoms == 0 && or.Parent != "" {
				omax = or.ForkedAt
			}
			aseq := omax
			if d.Against != "last" {
				n, err := strconv.ParseUint(d.Against, 10, 64)
				if err != nil {
					d.DiffErr = fmt.Sprintf("against: %q is not a seq", d.Against)
					break
				}
				aseq = n
			}
			if aseq > omax {
				d.DiffErr = fmt.Sprintf("run %q has no seq %d (its last is %d)", other, aseq, omax)
				break
			}
			d.AgainstSeq = aseq
			g, gerased, err := p.stateAt(in, or, aseq)
			if err != nil {
				d.DiffErr = err.Error()
				break
			}
			d.Diff = diffFrames(g, gerased, f, erased)
		}
	}
	d.DiffErr = clip(d.DiffErr, maxText)
	p.Data = d
	return 0
}

type ledgerData struct {
	Window        window
	Status        string
	Actions       []actionView // the first ledgerActions
	MoreActions   int
	Rollbacks     []*rollbackView // the first maxItems
	MoreRollbacks int
	Counts        map[string]int
	Errors        []string
}

func (p *page) ledgerPage() int {
	p.Title, p.Body = "ledger", "ledger"
	in, r, code := p.runHeader("ledger")
	if in == nil {
		return code
	}
	p.Title = "ledger of " + r.ID
	status := p.r.URL.Query().Get("status")
	d := &ledgerData{Window: p.window(r, "ledger", ledgerAtoms, "status", status), Status: status, Counts: map[string]int{}}
	compensated := map[string]uint64{}
	for _, rb := range r.Rollbacks {
		if len(d.Rollbacks) < maxItems {
			d.Rollbacks = append(d.Rollbacks, viewRollback(rb))
		} else {
			d.MoreRollbacks++
		}
		if rb.Completed {
			for _, u := range rb.Undo {
				if u.Compensation != nil {
					compensated[u.Action.String()] = rb.Seq
				}
			}
		}
	}
	if d.Window.To != 0 {
		for seq := d.Window.From; seq <= d.Window.To; seq++ {
			if err := p.ctx.Err(); err != nil {
				return p.failErr(err)
			}
			a, err := in.Atom(p.ctx, r.ID, seq)
			if err != nil {
				d.Errors = append(d.Errors, clip(fmt.Sprintf("atom %d: %v", seq, err), maxText))
				continue
			}
			for _, act := range a.Actions {
				fp := act.Fingerprint.String()
				st := act.StatusName()
				if compensated[fp] != 0 {
					st = "compensated"
				}
				d.Counts[st]++
				switch {
				case status != "" && status != st:
				case len(d.Actions) == ledgerActions:
					d.MoreActions++
				default:
					av := viewAction(act)
					av.Compensated = compensated[fp]
					d.Actions = append(d.Actions, av)
				}
			}
		}
	}
	p.Data = d
	return 0
}

// dagNode is one atom of the branch DAG drawing.
type dagNode struct {
	Seq, Base uint64
	X, Y      int
	BX, BY    int // where its base is drawn; HasBase false: outside the window
	HasBase   bool
	Branch    string
	Lane      int
	IsBranch  bool
	Err       string
	Link      string
}

type dagData struct {
	Window        window
	Nodes         []dagNode
	Lanes         []string
	Width, Height int
}

func (p *page) dagPage() int {
	p.Title, p.Body = "branch DAG", "dag"
	in, r, code := p.runHeader("dag")
	if in == nil {
		return code
	}
	p.Title = "branch DAG of " + r.ID
	d := &dagData{Window: p.window(r, "dag", dagPerPage)}
	lanes := map[string]int{"": 0}
	d.Lanes = []string{"(main)"}
	pos := map[uint64][2]int{}
	const dy, dx, x0, y0 = 26, 150, 40, 20
	if d.Window.To != 0 {
		for seq := d.Window.From; seq <= d.Window.To; seq++ {
			if err := p.ctx.Err(); err != nil {
				return p.failErr(err)
			}
			n := dagNode{Seq: seq, Link: p.url("run", "id", r.ID, "from", seq)}
			a, err := in.Atom(p.ctx, r.ID, seq)
			if err != nil {
				n.Err = clip(err.Error(), maxText)
			} else {
				n.Base, n.Branch = a.Base, a.Branch
				n.IsBranch = a.Branch != "" || a.Base+1 != seq
			}
			lane, ok := lanes[n.Branch]
			if !ok {
				lane = len(d.Lanes)
				if lane > 8 { // many branch names share the last lane
					lane = 8
				} else {
					d.Lanes = append(d.Lanes, n.Branch)
				}
				lanes[n.Branch] = lane
			}
			n.Lane = lane
			n.X, n.Y = x0+lane*dx, y0+int(seq-d.Window.From)*dy
			if b, ok := pos[n.Base]; ok {
				n.HasBase, n.BX, n.BY = true, b[0], b[1]
			}
			pos[seq] = [2]int{n.X, n.Y}
			d.Nodes = append(d.Nodes, n)
		}
	}
	d.Width = x0 + len(d.Lanes)*dx + 200
	d.Height = y0 + len(d.Nodes)*dy + 10
	p.Data = d
	return 0
}

// treeNode is one run of the lineage tree.
type treeNode struct {
	runRow
	Children []*treeNode
	Missing  bool // its parent is not in the store
	Current  bool
}

// treeArg is what the treenode template gets: the prefix and the node.
type treeArg struct {
	P string
	N *treeNode
}

type lineageData struct {
	Roots  []*treeNode
	Cycle  []runRow // forks not drawn under a root: their fork records name each other
	Cut    int
	Only   string
	Forked int
}

func (p *page) lineagePage() int {
	p.Title, p.Body, p.Events = "lineage", "lineage", p.url("events")
	in, code := p.inspector()
	if in == nil {
		return code
	}
	runs := in.Runs()
	d := &lineageData{Only: p.r.URL.Query().Get("id")}
	byID := make(map[string]*treeNode, len(runs))
	for _, r := range runs {
		byID[r.ID] = &treeNode{runRow: newRunRow(r), Current: r.ID == d.Only}
	}
	children := map[string][]*treeNode{}
	for _, r := range runs {
		if r.Parent != "" {
			d.Forked++
			children[r.Parent] = append(children[r.Parent], byID[r.ID])
		}
	}
	for _, cs := range children {
		sort.Slice(cs, func(i, j int) bool {
			if cs[i].ForkedAt != cs[j].ForkedAt {
				return cs[i].ForkedAt < cs[j].ForkedAt
			}
			return cs[i].ID < cs[j].ID
		})
	}
	count := 0
	drawn := map[string]bool{}
	var build func(n *treeNode)
	build = func(n *treeNode) {
		drawn[n.ID] = true
		for _, c := range children[n.ID] {
			if drawn[c.ID] {
				continue
			}
			if count >= maxTreeNodes {
				d.Cut++
				continue
			}
			count++
			n.Children = append(n.Children, c)
			build(c)
		}
	}
	rootOf := func(id string) string {
		seen := map[string]bool{}
		for byID[id] != nil && byID[id].Parent != "" && byID[byID[id].Parent] != nil && !seen[id] {
			seen[id] = true
			id = byID[id].Parent
		}
		return id
	}
	want := ""
	if d.Only != "" {
		if byID[d.Only] == nil {
			return p.fail(http.StatusNotFound, "the store has no run %q", d.Only)
		}
		want = rootOf(d.Only)
	}
	for _, r := range runs {
		n := byID[r.ID]
		_, parentHere := byID[r.Parent]
		isRoot := (r.Parent == "" && len(children[r.ID]) > 0) || (r.Parent != "" && !parentHere) || r.ID == want
		if !isRoot || (want != "" && r.ID != want) || drawn[r.ID] {
			continue
		}
		if count >= maxTreeNodes {
			d.Cut++
			continue
		}
		count++
		n.Missing = r.Parent != "" && !parentHere
		d.Roots = append(d.Roots, n)
		build(n)
	}
	if want == "" {
		for _, r := range runs {
			if r.Parent != "" && !drawn[r.ID] && count+len(d.Cycle) < maxTreeNodes {
				d.Cycle = append(d.Cycle, byID[r.ID].runRow)
			}
		}
	}
	p.Data = d
	return 0
}

// verifyResult is a verification of the store, kept until the log changes.
type verifyResult struct {
	sig    string
	report *verifyData
	err    error
}

type verifyData struct {
	OK                  bool
	Records             uint64
	Runs                []verifyRun
	Failures, Warnings  []string
	Unchecked           []string
	Duration            time.Duration
	Checkpoints, Signed int
	Verified            int
	BadRuns             int
	MoreOK              int // intact runs not listed
	// MoreFailures and MoreWarnings count those not listed (each list
	// holds at most maxRows).
	MoreFailures, MoreWarnings int
}

// maxVerifyOK is how many intact runs the verify page lists (every run
// with a failure is listed).
const maxVerifyOK = 500

type verifyRun struct {
	Run, Kind, Where, Detail string
	Records, LastSeq         uint64
	OK                       bool
	BadSeq                   uint64
	Link                     string
	Warnings                 []string
}

func (p *page) verifyPage() int {
	p.Title, p.Body = "verify", "verify"
	if p.s.in != nil {
		h := p.s.in.Holder()
		p.Live, p.PID, p.StoreID = h.Live, h.PID, p.s.in.StoreID()
	}
	p.v.mu.Lock()
	vr := p.v.mu.verify
	p.v.mu.Unlock()
	if vr == nil || vr.sig != p.s.sig {
		rep, err := offline.Verify(p.ctx, p.v.opts.Dir, &offline.VerifyOptions{FS: p.v.opts.FS, Keyring: p.v.opts.Keyring, ChainKey: p.v.opts.ChainKey})
		vr = &verifyResult{sig: p.s.sig, err: err}
		if err == nil {
			d := &verifyData{OK: rep.OK, Records: rep.Records, Unchecked: clipEach(rep.Unchecked, len(rep.Unchecked), maxText), Duration: rep.Duration,
				Checkpoints: rep.Checkpoints, Signed: rep.CheckpointsSigned, Verified: rep.CheckpointsVerified}
			for _, rr := range rep.Runs {
				v := verifyRun{Run: rr.RunID, Records: rr.Records, LastSeq: rr.LastSeq, OK: rr.OK}
				if f := rr.Failure; f != nil {
					d.BadRuns++
					v.Kind, v.Where, v.Detail, v.BadSeq = f.Kind.String(), clip(f.Location, maxText), clip(f.Detail, maxText), f.Seq
					v.Link = p.url("run", "id", rr.RunID, "from", f.Seq)
				}
				warnings, more := firstN(rr.Warnings, maxItems)
				for _, w := range warnings {
					v.Warnings = append(v.Warnings, clip(w.String(), maxText))
				}
				if more > 0 {
					v.Warnings = append(v.Warnings, fmt.Sprintf("and %d more warnings", more))
				}
				d.Runs = append(d.Runs, v)
			}
			failures, more := firstN(rep.Failures, maxRows)
			d.MoreFailures = more
			for _, f := range failures {
				d.Failures = append(d.Failures, clip(f.String(), maxText))
			}
			warnings, more := firstN(rep.Warnings, maxRows)
			d.MoreWarnings = more
			for _, f := range warnings {
				d.Warnings = append(d.Warnings, clip(f.String(), maxText))
			}
			// the runs with a failure first: they are what a reader came for
			sort.SliceStable(d.Runs, func(i, j int) bool { return !d.Runs[i].OK && d.Runs[j].OK })
			if ok := len(d.Runs) - d.BadRuns; ok > maxVerifyOK {
				d.MoreOK = ok - maxVerifyOK
				d.Runs = d.Runs[:d.BadRuns+maxVerifyOK]
			}
			vr.report = d
		} else if p.ctx.Err() != nil {
			return p.failErr(err)
		}
		p.v.mu.Lock()
		p.v.mu.verify = vr
		p.v.mu.Unlock()
	}
	if vr.err != nil {
		return p.fail(http.StatusInternalServerError, "verify could not check the store: %v", vr.err)
	}
	p.Data = vr.report
	return 0
}
