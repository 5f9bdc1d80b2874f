package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/continuumdb/continuum/frame"
	"github.com/zeebo/blake3"
)

// The demo's scripted deployment, shared by the parent (which narrates)
// and the agent child (which does it): a planning atom, four steps in each
// of three regions, and a closing report.

const (
	demoRun       = "deploy-checkout-v2"
	demoObjective = "Deploy checkout v2 to us-east-1, eu-west-1 and ap-southeast-2: bucket, schema migration, billing, notification"
	demoCustomer  = "cus_acme_corp"
)

var demoRegions = []string{"us-east-1", "eu-west-1", "ap-southeast-2"}

// demoKillRegion is where the demo kills the agent: in its billing charge,
// after the downstream charged and before the agent heard back.
const demoKillRegion = 1

// demoStep is one atom of the script.
type demoStep struct {
	seq        uint64
	region     string // "" for the planning and report atoms
	kind       string // plan, bucket, migration, charge, email, report
	tool       string
	args       []byte
	key        string
	idempotent bool
	thought    string
}

func demoArgs(v any) []byte {
	// Maps of strings, numbers and booleans always marshal.
	b, _ := json.Marshal(v)
	return b
}

// demoScript returns the whole deployment, seq 1 first.
func demoScript() []demoStep {
	steps := []demoStep{{seq: 1, kind: "plan",
		thought: "Plan: for each region, create the asset bucket, run migration 0042, charge the deployment fee, and email the owner."}}
	for _, r := range demoRegions {
		add := func(kind, tool string, idempotent bool, args any, thought string) {
			steps = append(steps, demoStep{seq: uint64(len(steps) + 1), region: r, kind: kind, tool: tool,
				args: demoArgs(args), key: demoRun + "/" + r + "/" + kind, idempotent: idempotent, thought: thought})
		}
		add("bucket", "storage.create_bucket", true,
			map[string]any{"name": "checkout-assets-" + r, "region": r, "versioning": true},
			"Creating the asset bucket in "+r+"; the storage API honours idempotency keys, so a retry is safe.")
		add("migration", "db.run_migration", true,
			map[string]any{"database": "checkout-" + r, "migration": "0042_add_order_index", "direction": "up"},
			"Running schema migration 0042 on checkout-"+r+"; the migration runner records applied keys.")
		add("charge", "billing.charge", false,
			map[string]any{"customer": demoCustomer, "amount_cents": 4900, "currency": "usd", "description": "checkout v2 deployment, " + r},
			"Charging the deployment fee for "+r+". Not idempotent: it must happen exactly once.")
		add("email", "email.send", false,
			map[string]any{"to": "owner@acme.example", "subject": "checkout v2 is live in " + r},
			"Telling the owner that "+r+" is live. Not idempotent: a second email would be a visible duplicate.")
	}
	steps = append(steps, demoStep{seq: uint64(len(steps) + 1), kind: "report",
		thought: "All three regions are live; the deployment is complete."})
	return steps
}

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
	d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: s.thought, Tool: s.tool, CallID: s.key})
	d.ToolOutput(s.key, s.tool, result)
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
