package record

// runNames is what a Cursor knows of the runs it has read: each run id
// once, as one string that every record of the run shares (a new string
// per record was an allocation per record), and the last seq of each run
// read so far, to name the run a damaged record cuts (Locate). Owned by
// its Cursor.
type runNames struct {
	m map[string]*runName
	// cur is the entry of the Run of the record decoded last, nil if it
	// has none or it did not decode that far.
	cur *runName
}

type runName struct {
	id   string
	last uint64 // the last seq of the run read, if read
	read bool
}

// entry returns the entry of the run id b, made if there is none.
func (n *runNames) entry(b []byte) *runName {
	if e, ok := n.m[string(b)]; ok { // no allocation: the key is not kept
		return e
	}
	if n.m == nil {
		n.m = map[string]*runName{}
	}
	e := &runName{id: string(b)}
	n.m[e.id] = e
	return e
}

// runID reads a run id with f (Fields.RunID) and returns it interned in
// n (n nil: a new string); cur says it is the record's Run. An id that
// does not read is not interned.
func (n *runNames) runID(f *Fields, cur bool) string {
	b := f.RunIDBytes()
	if n == nil || f.err != nil {
		return string(b)
	}
	e := n.entry(b)
	if cur {
		n.cur = e
	}
	return e.id
}

// note records seq as the last seq read of the run of e (nil: none).
func (e *runName) note(seq uint64) {
	if e != nil {
		e.last, e.read = seq, true
	}
}

// into sets before[id] to the last seq read of each run that has one,
// and returns before.
func (n *runNames) into(before map[string]uint64) map[string]uint64 {
	for _, e := range n.m {
		if e.read {
			before[e.id] = e.last
		}
	}
	return before
}
