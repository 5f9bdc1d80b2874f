package main

// Verify and inspect of one run: what continuumctl verify and inspect
// say of the store, restricted to the run (a token scoped to runs sees
// nothing of others).

import (
	"context"
	"net/http"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
)

// maxStoreScans is how many passes over the whole store (verify, and
// the Inspector of inspect and diff) run at once; more wait for one to
// end. Each reads the whole log and holds up to its budget in memory
// (frame.NewBudget), and the read right suffices for one of a run: the
// bound keeps what clients can make the server hold, and the disk time
// they take from commits, to that many passes.
const maxStoreScans = 2

// scanSlot waits for one of the maxStoreScans slots while ctx lasts, and
// returns the function that gives it back.
func (s *server) scanSlot(ctx context.Context) (func(), *apiError) {
	select {
	case s.scans <- struct{}{}:
		return func() { <-s.scans }, nil
	case <-ctx.Done():
		return nil, engineError(ctx.Err(), "")
	}
}

// verifyStore verifies the store as req asks (POST /v1/verify, and of
// one run).
func (s *server) verifyStore(ctx context.Context, req *verifyRequest) (*chain.Report, *apiError) {
	opts := &engine.VerifyOptions{FS: s.cfg.fs, Deep: req.Deep, ChainKey: s.cfg.chainKey, UnsignedTail: req.UnsignedTail}
	if req.PublicKey != "" {
		origin, key, err := chain.ParsePublicKeyFile([]byte(req.PublicKey))
		if err != nil {
			return nil, badRequest("public_key", "public_key is not a public key file: %v", err)
		}
		opts.PublicKey, opts.Origin = key, origin
	}
	release, aerr := s.scanSlot(ctx)
	if aerr != nil {
		return nil, aerr
	}
	defer release()
	rep, err := engine.Verify(ctx, s.cfg.dir, opts)
	if err != nil {
		return nil, engineError(err, "")
	}
	return rep, nil
}

// inspectStore builds an Inspector of the store (inspect and diff of a
// run); done closes it and gives its slot back.
func (s *server) inspectStore(ctx context.Context) (*engine.Inspector, func(), *apiError) {
	release, aerr := s.scanSlot(ctx)
	if aerr != nil {
		return nil, nil, aerr
	}
	in, err := engine.Inspect(ctx, s.cfg.dir, &engine.InspectOptions{FS: s.cfg.fs, Keyring: s.cfg.keyring})
	if err != nil {
		release()
		return nil, nil, engineError(err, "")
	}
	return in, func() { in.Close(); release() }, nil
}

// runVerifyJSON answers POST /v1/runs/{run}/verify: the run's line of
// the store's verify report, its failures and warnings, and whether the
// store itself (its records that are no run's) verified.
type runVerifyJSON struct {
	OK       bool            `json:"ok"` // the run verified, and the store's own records did
	Run      chain.RunReport `json:"run"`
	Failures []chain.Failure `json:"failures"`
	Warnings []chain.Failure `json:"warnings"`
	// StoreOK: no failure of the store's own records (those of no run).
	// Failures of other runs are neither listed nor counted.
	StoreOK bool `json:"store_ok"`
}

func (s *server) handleRunVerify(r *http.Request, body []byte) (int, any, *apiError) {
	var req verifyRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	rep, aerr := s.verifyStore(r.Context(), &req)
	if aerr != nil {
		return 0, nil, aerr
	}
	out := runVerifyJSON{Failures: []chain.Failure{}, Warnings: []chain.Failure{}, StoreOK: true}
	found := false
	for _, rr := range rep.Runs {
		if rr.RunID == rs.id {
			out.Run, found = rr, true
		}
	}
	if !found {
		// A run without a record yet (opened, nothing committed).
		out.Run = chain.RunReport{RunID: rs.id, OK: true}
	}
	for _, f := range rep.Failures {
		switch f.RunID {
		case rs.id:
			out.Failures = append(out.Failures, f)
		case "":
			out.StoreOK = false
		}
	}
	for _, w := range rep.Warnings {
		if w.RunID == rs.id {
			out.Warnings = append(out.Warnings, w)
		}
	}
	out.OK = out.StoreOK && len(out.Failures) == 0 && (out.Run.OK || !found)
	return 200, out, nil
}

// runInspectJSON answers GET /v1/runs/{run}/inspect: what continuumctl
// inspect says of the run (offline.RunSummary), read from the store's
// files.
type runInspectJSON struct {
	ID               string    `json:"id"`
	Created          time.Time `json:"created"`
	Atoms            uint64    `json:"atoms"`
	LastSeq          uint64    `json:"last_seq"`
	Head             string    `json:"head"`
	Fails            int       `json:"fails"`
	Status           string    `json:"status"`
	Ended            time.Time `json:"ended,omitzero"`
	Parent           string    `json:"parent,omitempty"`
	ForkedAt         uint64    `json:"forked_at,omitempty"`
	SnapshotSeq      uint64    `json:"snapshot_seq"`
	FrameSeq         uint64    `json:"frame_seq"`
	CheckpointSeq    uint64    `json:"checkpoint_seq"`
	CheckpointSigned bool      `json:"checkpoint_signed"`
	Running          uint64    `json:"running"`
	Interrupted      uint64    `json:"interrupted"`
}

func (s *server) handleRunInspect(r *http.Request, _ []byte) (int, any, *apiError) {
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	in, done, aerr := s.inspectStore(r.Context())
	if aerr != nil {
		return 0, nil, aerr
	}
	defer done()
	sum, ok := in.Run(rs.id)
	if !ok {
		// Opened, nothing written yet that inspect reads.
		return 200, runInspectJSON{ID: rs.id, Status: "active", Head: hexHash(rs.run.Head())}, nil
	}
	return 200, runInspectJSON{ID: sum.ID, Created: sum.Created.UTC(), Atoms: sum.Atoms, LastSeq: sum.LastSeq, Head: hexHash(sum.Head),
		Fails: sum.Fails, Status: sum.Status, Ended: sum.Ended.UTC(), Parent: sum.Parent, ForkedAt: sum.ForkedAt,
		SnapshotSeq: sum.SnapshotSeq, FrameSeq: sum.FrameSeq, CheckpointSeq: sum.CheckpointSeq, CheckpointSigned: sum.CheckpointSigned,
		Running: sum.Running, Interrupted: sum.Interrupted}, nil
}
