package ledger

import "strconv"

// BranchKey is the default idempotency key of the index-th default-key
// call of the branch named branch of run runID:
// "ck1b-<len(runID)>:<runID>:<len(branch)>:<branch>:<index>". A branch's
// seq is known only once it commits, so its keys derive from its name
// instead: a retry of the branch (the same name, after a conflict or a
// crash) derives the same keys and gets the certificates of the actions
// the earlier attempt completed. The length prefixes make it
// collision-free across (run, branch, index), and the "ck1b-" prefix from
// every DefaultKey.
func BranchKey(runID, branch string, index int) string {
	b := make([]byte, 0, len(runID)+len(branch)+32)
	b = append(b, "ck1b-"...)
	b = strconv.AppendInt(b, int64(len(runID)), 10)
	b = append(b, ':')
	b = append(b, runID...)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(len(branch)), 10)
	b = append(b, ':')
	b = append(b, branch...)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(index), 10)
	return string(b)
}

// WithKey returns the intent of the same tool and args as in with key key
// and call index index: the fingerprint is recomputed from the canonical
// args in already holds, without parsing them again.
func (in *Intent) WithKey(key string, index uint32) *Intent {
	c := *in
	c.Index = index
	c.Key = key
	c.Fingerprint = in.fingerprint(c.Tool, c.Args, c.Key)
	return &c
}
