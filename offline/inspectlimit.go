package offline

import "bytes"

// What an Inspector holds of action args and results. A store's records
// may declare up to 64 MiB each, and a crafted store can name any number of
// them in flight or in one atom; holding them whole would need memory
// without bound. So what one Inspector call returns holds at most these
// many bytes of args and results, the rest cut (ActionInfo.ArgsSize and
// ResultSize keep the whole sizes, so a cut value is visible as such).
const (
	// summaryValueBytes and summaryBytes bound each value, and all values,
	// of the run summaries (in-flight and in-doubt actions), which Inspect
	// keeps for the life of the Inspector.
	summaryValueBytes = 4 << 10
	summaryBytes      = 16 << 20
	// atomBytes bounds the values of one Atom call (an export holds one
	// atom at a time).
	atomBytes = 64 << 20
)

// valueClip cuts the args and results of ActionInfos to a per-value and a
// total allowance.
type valueClip struct {
	per  int   // bytes of one value (0: no per-value bound)
	left int64 // bytes of all values still allowed
}

func (c *valueClip) action(info *ActionInfo) {
	info.Args = c.value(info.Args)
	info.Result = c.value(info.Result)
}

func (c *valueClip) value(v []byte) []byte {
	n := int64(len(v))
	if c.per > 0 {
		n = min(n, int64(c.per))
	}
	n = max(min(n, c.left), 0)
	c.left -= n
	if n == int64(len(v)) {
		return v
	}
	return bytes.Clone(v[:n]) // not a slice of v: the rest is released
}
