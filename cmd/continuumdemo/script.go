package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/zeebo/blake3"
)

// The demo's scripted deployment, shared by the parent (which narrates)
// and the agent child (which does it): a planning atom, four steps in each
// of three regions, and a closing report. The fork's script is the same
// with one decision changed: the fee of the reconsidered region.
//
// Every action has a default key (ledger.Action.Key ""), which the engine
// derives from the run, the seq and the call's index in its atom. That is
// what makes the fork safe (I10): an action the fork repeats at the same
// seq with the same tool and args gets the key its parent used there, and
// with it the parent's certificate, so nothing is called again; an action
// that differs gets the fork's own key, which no run of the lineage used.
// Explicit keys named for the step ("deploy-checkout-v2/ap-southeast-2/
// charge", as the script had) would be wrong in a fork: the discounted
// charge would go out under the original charge's key with other args,
// one key for two different requests, which a payment API that
// deduplicates by key answers with the first charge or refuses. An
// explicit key must stand for one request (derived from its content, say),
// never for a position alone; the default keys need nothing from the agent.

const (
	demoRun       = "deploy-checkout-v2"
	demoObjective = "Deploy checkout v2 to us-east-1, eu-west-1 and ap-southeast-2: bucket, schema migration, billing, notification"
	demoCustomer  = "cus_acme_corp"
)

var demoRegions = []string{"us-east-1", "eu-west-1", "ap-southeast-2"}

// demoKillRegion is where the demo kills the agent: in its billing charge,
// after the downstream charged and before the agent heard back.
const demoKillRegion = 1

// The fork ("reconsider step N"): once the deployment is done, a reviewer
// reconsiders the rollout of region demoForkRegion from its first step on,
// with a launch discount on its fee. The demo forks demoRun at the atom
// before that step into run demoForkRun, and the agent does the rest of
// the fork's script there.
const (
	demoForkRun       = "deploy-checkout-v2-discount"
	demoForkRegion    = 2
	demoFeeCents      = 4900
	demoDiscountCents = 2900
)

// demoStep is one atom of the script.
type demoStep struct {
	seq        uint64
	region     string // "" for the planning and report atoms
	kind       string // plan, bucket, migration, charge, email, report
	tool       string
	args       []byte
	idempotent bool
	thought    string
}

func demoArgs(v any) []byte {
	// Maps of strings, numbers and booleans always marshal.
	b, _ := json.Marshal(v)
	return b
}

// demoScript returns the whole deployment, seq 1 first.
func demoScript() []demoStep { return buildScript(false) }

// demoForkScript returns the fork's deployment: demoScript with the fee
// of region demoForkRegion discounted. The fork does its steps after
// demoForkAt.
func demoForkScript() []demoStep { return buildScript(true) }

func buildScript(discount bool) []demoStep {
	steps := []demoStep{{seq: 1, kind: "plan",
		thought: "Plan: for each region, create the asset bucket, run migration 0042, charge the deployment fee, and email the owner."}}
	for i, r := range demoRegions {
		add := func(kind, tool string, idempotent bool, args any, thought string) {
			steps = append(steps, demoStep{seq: uint64(len(steps) + 1), region: r, kind: kind, tool: tool,
				args: demoArgs(args), idempotent: idempotent, thought: thought})
		}
		add("bucket", "storage.create_bucket", true,
			map[string]any{"name": "checkout-assets-" + r, "region": r, "versioning": true},
			"Creating the asset bucket in "+r+"; the storage API honours idempotency keys, so a retry is safe.")
		add("migration", "db.run_migration", true,
			map[string]any{"database": "checkout-" + r, "migration": "0042_add_order_index", "direction": "up"},
			"Running schema migration 0042 on checkout-"+r+"; the migration runner records applied keys.")
		fee, what, why := demoFeeCents, "checkout v2 deployment, "+r, "Charging the deployment fee for "+r+"."
		if discount && i == demoForkRegion {
			fee, what, why = demoDiscountCents, what+", launch discount", "Charging the discounted launch fee for "+r+", as the reviewer decided."
		}
		add("charge", "billing.charge", false,
			map[string]any{"customer": demoCustomer, "amount_cents": fee, "currency": "usd", "description": what},
			why+" Not idempotent: it must happen exactly once.")
		add("email", "email.send", false,
			map[string]any{"to": "owner@acme.example", "subject": "checkout v2 is live in " + r},
			"Telling the owner that "+r+" is live. Not idempotent: a second email would be a visible duplicate.")
	}
	steps = append(steps, demoStep{seq: uint64(len(steps) + 1), kind: "report",
		thought: "All three regions are live; the deployment is complete."})
	return steps
}

// stepSeq returns the seq of the script's step of kind in region.
func stepSeq(script []demoStep, region, kind string) uint64 {
	for _, s := range script {
		if s.region == region && s.kind == kind {
			return s.seq
		}
	}
	return 0
}

// demoForkAt is the seq the demo forks at: the last atom before the
// reconsidered region's first step.
func demoForkAt() uint64 {
	return stepSeq(demoScript(), demoRegions[demoForkRegion], "bucket") - 1
}

// demoFees sums the fees a script charges, in cents.
func demoFees(script []demoStep) int {
	var sum int
	for _, s := range script {
		if s.kind == "charge" {
			var a struct {
				Amount int `json:"amount_cents"`
			}
			if json.Unmarshal(s.args, &a) == nil {
				sum += a.Amount
			}
		}
	}
	return sum
}

// demoKey is the default key of the step at seq in run: the one the engine
// gives its action (each step makes one call, index 0). A step a fork
// repeats unchanged goes out under its parent's key instead.
func demoKey(run string, seq uint64) string { return ledger.DefaultKey(run, seq, 0) }

// describe names a step in the demo's narration.
func (s demoStep) describe() string {
	switch s.kind {
	case "plan":
		return "plan the deployment (" + strings.Join(demoRegions, ", ") + ")"
	case "report":
		return "report: deployment complete"
	}
	return fmt.Sprintf("%-22s %s", s.tool, s.region)
}

func (s demoStep) subgoal() string { return "region-" + s.region }

// callID names the step's tool call in the frame's messages, as a model
// names its calls; it is not the idempotency key.
func (s demoStep) callID() string { return "call_" + s.region + "_" + s.kind }

// delta is the frame change of the step, given its action's result.
func (s demoStep) delta(result []byte) *frame.Delta {
	d := new(frame.Delta)
	switch s.kind {
	case "plan":
		d.SetObjective(demoObjective)
		for _, r := range demoRegions {
			d.AddSubgoal("region-"+r, "bucket, migration, charge and email in "+r)
		}
		d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: s.thought})
		d.Set("plan", []byte("4 steps x 3 regions"))
		return d
	case "report":
		d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: s.thought})
		d.Set("status", []byte("deployed"))
		return d
	}
	if s.kind == "bucket" {
		d.SetSubgoalStatus(s.subgoal(), frame.SubgoalActive)
	}
	d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: s.thought, Tool: s.tool, CallID: s.callID()})
	d.ToolOutput(s.callID(), s.tool, result)
	d.Set(s.region+"."+s.kind, result)
	if s.kind == "email" {
		d.SetSubgoalStatus(s.subgoal(), frame.SubgoalDone)
	}
	return d
}

// demoResult is the fake downstream's answer to a call: realistic JSON,
// and a pure function of the call so that the demo is deterministic.
func demoResult(tool string, args []byte, key string) []byte {
	sum := blake3.Sum256([]byte(tool + "\x00" + string(args) + "\x00" + key))
	id := hex.EncodeToString(sum[:6])
	var a map[string]any
	if err := json.Unmarshal(args, &a); err != nil {
		a = map[string]any{}
	}
	var res any
	switch tool {
	case "storage.create_bucket":
		res = map[string]any{"bucket": a["name"], "arn": fmt.Sprintf("arn:aws:s3:::%v", a["name"]), "region": a["region"], "created": true}
	case "db.run_migration":
		res = map[string]any{"database": a["database"], "applied": a["migration"], "schema_version": 42}
	case "billing.charge":
		res = map[string]any{"charge": "ch_" + id, "status": "succeeded", "amount_cents": a["amount_cents"], "currency": a["currency"]}
	case "email.send":
		res = map[string]any{"message_id": "msg_" + id, "status": "queued", "to": a["to"]}
	default:
		res = map[string]any{"ok": true, "id": id}
	}
	return demoArgs(res)
}
