package main

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/offline"
)

// openapi is the part of openapi.json these tests read.
type openapi struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]schema `json:"schemas"`
	} `json:"components"`
}

type schema struct {
	Properties map[string]schema `json:"properties"`
	Required   []string          `json:"required"`
	Enum       []string          `json:"enum"`
}

func loadOpenAPI(t *testing.T) *openapi {
	t.Helper()
	b, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc openapi
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi.json is OpenAPI %q, want 3.1.0", doc.OpenAPI)
	}
	return &doc
}

// TestOpenAPIRoutes: the document describes exactly the endpoints the
// server serves.
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	s := newServer(nil, serverConfig{}, nil)
	served := map[string]bool{}
	for _, rt := range s.routes() {
		served[strings.ToLower(rt.method)+" "+rt.pattern] = true
	}
	for _, rt := range s.streamRoutes() {
		served[strings.ToLower(rt.method)+" "+rt.pattern] = true
	}
	described := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			described[method+" "+path] = true
		}
	}
	for r := range served {
		if !described[r] {
			t.Errorf("%s is served but not in openapi.json", r)
		}
	}
	for r := range described {
		if !served[r] {
			t.Errorf("%s is in openapi.json but not served", r)
		}
	}
}

// TestOpenAPIErrorCodes: the ErrorCode enum is the server's list of codes.
func TestOpenAPIErrorCodes(t *testing.T) {
	doc := loadOpenAPI(t)
	got := slices.Clone(doc.Components.Schemas["ErrorCode"].Enum)
	want := slices.Clone(errorCodes)
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("ErrorCode enum %v, the server's codes %v", got, want)
	}
}

// TestOpenAPISchemas: each schema has the fields of the Go type it
// describes, no more and no less.
func TestOpenAPISchemas(t *testing.T) {
	doc := loadOpenAPI(t)
	sc := doc.Components.Schemas
	for name, v := range map[string]any{
		"BeginRequest": beginRequest{}, "BranchRequest": branchRequest{}, "CallRequest": callRequest{}, "OutcomeRequest": outcomeRequest{},
		"ResolveRequest": resolveRequest{}, "CommitRequest": commitRequest{}, "FailRequest": failRequest{},
		"VerifyRequest": verifyRequest{}, "EndRequest": endRequest{}, "ForkRequest": forkRequest{}, "EraseRequest": eraseRequest{}, "DeleteRequest": deleteRequest{}, "GCStats": gcJSON{}, "RunVerify": runVerifyJSON{}, "RunInspect": runInspectJSON{}, "SendRequest": sendRequest{}, "ReceiveRequest": receiveRequest{}, "Message": messageJSON{},
		"DeletedRun": deletedRunJSON{}, "Erasure": erasureJSON{}, "ErasedKey": erasedKeyJSON{}, "DeltaOp": wireOp{}, "Run": runJSON{}, "Lease": leaseJSON{},
		"ActionState": actionStateJSON{}, "Interrupted": interruptedJSON{}, "BeginResponse": beginResponse{},
		"CallResponse": callResponse{}, "CommitResponse": commitResponse{}, "FailResponse": failResponse{},
		"Attempt": attemptJSON{}, "ToolCall": wireToolCall{}, "Part": wirePart{},
		"CompensateRequest": compensateRequest{}, "Undo": undoJSON{}, "CompensationStep": compStepJSON{}, "RollbackRequest": rollbackRequest{},
		"RollbackOutcomeRequest": rollbackOutcomeRequest{}, "RollbackResolveRequest": rollbackResolveRequest{}, "RollbackResponse": rollbackResponse{}, "PendingRollback": pendingJSON{}, "Diff": offline.ExportedDiff{}, "DiffSide": offline.ExportedDiffSide{},
		"Blob":          blobJSON{},
		"AppendRequest": appendRequest{}, "ChunkIn": chunkIn{}, "Chunk": chunkJSON{},
	} {
		s, ok := sc[name]
		if !ok {
			t.Errorf("openapi.json has no schema %s", name)
			continue
		}
		got := sortedKeys(s.Properties)
		want := jsonFields(reflect.TypeOf(v))
		if !slices.Equal(got, want) {
			t.Errorf("schema %s has properties %v, the Go type %T has %v", name, got, v, want)
		}
	}
	errObj := sc["Error"].Properties["error"]
	if got, want := sortedKeys(errObj.Properties), jsonFields(reflect.TypeOf(apiError{})); !slices.Equal(got, want) {
		t.Errorf("schema Error.error has %v, apiError has %v", got, want)
	}
	// The frame and the atom are built as maps: compare a full sample.
	f := &frame.Frame{Objective: "o", Subgoals: []frame.Subgoal{{ID: "s", Text: "t"}},
		Memory: map[string][]byte{"k": []byte("v"), "b": {0xff}}, Scratchpad: []byte{0xfe},
		Messages: []frame.Message{{Role: frame.RoleTool, Content: "c", Tool: "t", CallID: "c1"}},
		Pending:  []frame.Pending{{CallID: "p", Tool: "t", Args: []byte(`{}`), Key: "k"}}}
	checkSample(t, "Frame", sc["Frame"], frameJSON("r", 1, f))
}

func checkSample(t *testing.T, name string, s schema, sample map[string]any) {
	t.Helper()
	for k := range sample {
		if _, ok := s.Properties[k]; !ok {
			t.Errorf("the server writes %s.%s, which openapi.json does not describe", name, k)
		}
	}
	for _, k := range s.Required {
		if _, ok := sample[k]; !ok {
			t.Errorf("openapi.json requires %s.%s, which the server does not write", name, k)
		}
	}
}

// jsonFields lists the JSON names of a struct's fields, sorted.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || !t.Field(i).IsExported() {
			continue
		}
		if name == "" {
			name = t.Field(i).Name
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
