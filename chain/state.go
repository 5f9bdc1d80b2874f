package chain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// State is a trusted record of a store kept outside it (for example by
// `continuumctl verify --save-state`): the store id and, per run, the last
// verified seq and head. Verifying against it detects a rollback (an older
// copy of the store put back), a deleted run and a rewritten history.
type State struct {
	StoreID string
	Runs    map[string]RunHead // keyed by RunID; each value's RunID equals its key
}

type stateJSON struct {
	Version int            `json:"version"`
	Store   string         `json:"store"`
	Runs    []runStateJSON `json:"runs"`
}

type runStateJSON struct {
	Run  string `json:"run"`
	Seq  uint64 `json:"seq"`
	Head string `json:"head"`
}

// MarshalJSON writes the format of format.go: runs sorted by id, heads in
// hex. The output is stable: equal states give equal bytes.
func (s State) MarshalJSON() ([]byte, error) {
	j := stateJSON{Version: stateVersion, Store: s.StoreID, Runs: make([]runStateJSON, 0, len(s.Runs))}
	for id, r := range s.Runs {
		if r.RunID != id {
			return nil, fmt.Errorf("chain: state run %q is stored under key %q", truncate(r.RunID), truncate(id))
		}
		j.Runs = append(j.Runs, runStateJSON{Run: id, Seq: r.Seq, Head: r.Head.String()})
	}
	sort.Slice(j.Runs, func(a, b int) bool { return j.Runs[a].Run < j.Runs[b].Run })
	return json.Marshal(j)
}

// UnmarshalJSON reads the format MarshalJSON writes. Unknown fields, an
// unknown version, a bad head or a repeated run are errors wrapping
// ErrParse.
func (s *State) UnmarshalJSON(b []byte) error {
	var j stateJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("%w: state: %v", ErrParse, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: state: data after the JSON object at byte %d", ErrParse, dec.InputOffset())
	}
	if j.Version != stateVersion {
		return fmt.Errorf("%w: state version %d, want %d", ErrParse, j.Version, stateVersion)
	}
	runs := make(map[string]RunHead, len(j.Runs))
	for i, r := range j.Runs {
		h, err := parseCanonicalHash(r.Head)
		if err != nil {
			return fmt.Errorf("state run %d (%q): %w", i, truncate(r.Run), err)
		}
		if _, dup := runs[r.Run]; dup {
			return fmt.Errorf("%w: state run %q listed twice", ErrParse, truncate(r.Run))
		}
		runs[r.Run] = RunHead{RunID: r.Run, Seq: r.Seq, Head: h}
	}
	*s = State{StoreID: j.Store, Runs: runs}
	return nil
}

// ReadState reads a State written by WriteState (at most 1 GiB).
func ReadState(r io.Reader) (State, error) {
	b, err := io.ReadAll(io.LimitReader(r, 1<<30))
	if err != nil {
		return State{}, fmt.Errorf("chain: reading state: %w", err)
	}
	var s State
	if err := s.UnmarshalJSON(b); err != nil {
		return State{}, err
	}
	return s, nil
}

// WriteState writes s as JSON followed by a newline. Making the file
// durable (temp file, fsync, rename) is the caller's job.
func WriteState(w io.Writer, s State) error {
	b, err := s.MarshalJSON()
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("chain: writing state: %w", err)
	}
	return nil
}
