package offline

// ExportedDiff: a Diff in JSON, the one shape continuumctl diff --json
// prints and continuumd's GET /v1/runs/{run}/diff answers. Like Export's
// lines, the field names and the encoding of the values are a stable
// interface: fields may be added, none is renamed or changes meaning.

// ExportedDiff is a Diff as continuumctl diff --json and continuumd write
// it.
type ExportedDiff struct {
	Base ExportedDiffBase `json:"base"`
	A    ExportedDiffSide `json:"a"`
	B    ExportedDiffSide `json:"b"`
}

// ExportedDiffBase is a Diff's Base: the common state, and the chain head
// there (64 hex digits; absent at seq 0, the empty frame).
type ExportedDiffBase struct {
	Run  string `json:"run"`
	Seq  uint64 `json:"seq"`
	Head string `json:"head,omitempty"`
}

// ExportedDiffSide is one DiffSide: the point as Diff was given it, the
// spans of atoms from the base to it, their delta ops counted, and the
// atoms as Export writes them. Spans and Atoms are never null.
type ExportedDiffSide struct {
	Run   string         `json:"run"`
	Seq   uint64         `json:"seq"`
	Spans []ExportedSpan `json:"spans"`
	Ops   int            `json:"ops"`
	Atoms []ExportedAtom `json:"atoms"`
}

// ExportedSpan is a Span: atoms from through to, inclusive, of run.
type ExportedSpan struct {
	Run  string `json:"run"`
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
}

// NewExportedDiff returns d in the form ExportedDiff writes. It shares d's
// values (the caller may not change them through either).
func NewExportedDiff(d *Diff) ExportedDiff {
	e := ExportedDiff{
		Base: ExportedDiffBase{Run: d.Base.Run, Seq: d.Base.Seq},
		A:    newExportedDiffSide(&d.A),
		B:    newExportedDiffSide(&d.B),
	}
	if d.Base.Seq > 0 {
		e.Base.Head = d.BaseHead.String()
	}
	return e
}

func newExportedDiffSide(s *DiffSide) ExportedDiffSide {
	e := ExportedDiffSide{Run: s.Point.Run, Seq: s.Point.Seq, Spans: make([]ExportedSpan, 0, len(s.Spans)),
		Ops: s.Ops(), Atoms: make([]ExportedAtom, 0, len(s.Atoms))}
	for _, sp := range s.Spans {
		e.Spans = append(e.Spans, ExportedSpan(sp))
	}
	for _, a := range s.Atoms {
		e.Atoms = append(e.Atoms, NewExportedAtom(a))
	}
	return e
}
