package webview

import (
	"bytes"
	"fmt"
	"reflect"
	"sort"

	"github.com/continuumdb/continuum/frame"
)

// change is one difference between two frames: what, where, and the
// value before and after (Old empty for an addition, New for a removal).
type change struct {
	Kind     string // "added", "removed", "changed"
	Where    string // "objective", "memory KEY", "subgoal ID", ...
	Old, New value
	HasOld   bool
	HasNew   bool
}

// stateDiff is what differs between frame A (before) and frame B (after):
// the changes, the messages B has that A has not (appended after their
// common prefix) and those A has that B has not.
type stateDiff struct {
	Changes      []change // the first maxRows
	MoreChanges  int
	Added        []messageView // B's messages after the common prefix
	Removed      []messageView // A's messages after the common prefix
	CommonMsgs   int
	MoreAdded    int
	MoreRemoved  int
	Same         bool
	ErasedBefore []string
	ErasedAfter  []string
}

// diffFrames compares a (before) with b (after): the erased lists name the
// memory keys whose values were erased on each side (never shown).
func diffFrames(a *frame.Frame, aErased []string, b *frame.Frame, bErased []string) *stateDiff {
	d := &stateDiff{ErasedBefore: aErased, ErasedAfter: bErased}
	add := func(kind, where string, old, new []byte, hasOld, hasNew bool) {
		if len(d.Changes) == maxRows {
			d.MoreChanges++
			return
		}
		c := change{Kind: kind, Where: where, HasOld: hasOld, HasNew: hasNew}
		if hasOld {
			c.Old = fold(old, 0)
		}
		if hasNew {
			c.New = fold(new, 0)
		}
		d.Changes = append(d.Changes, c)
	}
	if a.Objective != b.Objective {
		add("changed", "objective", []byte(a.Objective), []byte(b.Objective), true, true)
	}
	// subgoals by id, in b's order, then those only in a
	ag := map[string]frame.Subgoal{}
	for _, s := range a.Subgoals {
		ag[s.ID] = s
	}
	bg := map[string]bool{}
	for _, s := range b.Subgoals {
		bg[s.ID] = true
		o, ok := ag[s.ID]
		switch {
		case !ok:
			add("added", "subgoal "+clip(s.ID, maxName), nil, []byte(fmt.Sprintf("[%s] %s", s.Status, s.Text)), false, true)
		case o != s:
			add("changed", "subgoal "+clip(s.ID, maxName), []byte(fmt.Sprintf("[%s] %s", o.Status, o.Text)), []byte(fmt.Sprintf("[%s] %s", s.Status, s.Text)), true, true)
		}
	}
	for _, s := range a.Subgoals {
		if !bg[s.ID] {
			add("removed", "subgoal "+clip(s.ID, maxName), []byte(fmt.Sprintf("[%s] %s", s.Status, s.Text)), nil, true, false)
		}
	}
	keys := map[string]bool{}
	for k := range a.Memory {
		keys[k] = true
	}
	for k := range b.Memory {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		ov, inA := a.Memory[k]
		nv, inB := b.Memory[k]
		switch {
		case inA && !inB:
			add("removed", "memory "+clip(k, maxName), ov, nil, true, false)
		case !inA && inB:
			add("added", "memory "+clip(k, maxName), nil, nv, false, true)
		case !bytes.Equal(ov, nv):
			add("changed", "memory "+clip(k, maxName), ov, nv, true, true)
		}
	}
	if !bytes.Equal(a.Scratchpad, b.Scratchpad) {
		if bytes.HasPrefix(b.Scratchpad, a.Scratchpad) {
			add("added", "scratchpad (appended)", nil, b.Scratchpad[len(a.Scratchpad):], false, true)
		} else {
			add("changed", "scratchpad", a.Scratchpad, b.Scratchpad, true, true)
		}
	}
	ap := map[string]frame.Pending{}
	for _, x := range a.Pending {
		ap[x.CallID] = x
	}
	bp := map[string]bool{}
	for _, x := range b.Pending {
		bp[x.CallID] = true
		o, ok := ap[x.CallID]
		desc := []byte(clip(x.Tool, maxName) + " " + string(x.Args))
		switch {
		case !ok:
			add("added", "pending "+clip(x.CallID, maxName), nil, desc, false, true)
		case !reflect.DeepEqual(o, x):
			add("changed", "pending "+clip(x.CallID, maxName), []byte(clip(o.Tool, maxName)+" "+string(o.Args)), desc, true, true)
		}
	}
	for _, x := range a.Pending {
		if !bp[x.CallID] {
			add("removed", "pending "+clip(x.CallID, maxName), []byte(clip(x.Tool, maxName)+" "+string(x.Args)), nil, true, false)
		}
	}
	for _, k := range diffStrings(bErased, aErased) {
		add("removed", "memory, erased: "+clip(k, maxName), nil, nil, false, false)
	}
	n := 0
	for n < len(a.Messages) && n < len(b.Messages) && reflect.DeepEqual(a.Messages[n], b.Messages[n]) {
		n++
	}
	d.CommonMsgs = n
	d.Removed, d.MoreRemoved = messagesFrom(a.Messages, n)
	d.Added, d.MoreAdded = messagesFrom(b.Messages, n)
	d.Same = len(d.Changes) == 0 && len(d.Added) == 0 && len(d.Removed) == 0
	return d
}

func messagesFrom(ms []frame.Message, from int) ([]messageView, int) {
	var out []messageView
	more := 0
	for i := from; i < len(ms); i++ {
		if len(out) >= maxMessages {
			more = len(ms) - i
			break
		}
		out = append(out, viewMessage(ms[i], i+1))
	}
	return out, more
}

// diffStrings returns the strings of a not in b.
func diffStrings(a, b []string) []string {
	in := map[string]bool{}
	for _, s := range b {
		in[s] = true
	}
	var out []string
	for _, s := range a {
		if !in[s] {
			out = append(out, s)
		}
	}
	return out
}
