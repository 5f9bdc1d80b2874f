package engine_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

// fakeBilling is the downstream of the quick start: one charge per
// idempotency key, however often it is asked.
type fakeBilling struct{ charges map[string]string }

func (b *fakeBilling) Charge(ctx context.Context, customer string, cents int, key string) ([]byte, error) {
	if b.charges == nil {
		b.charges = map[string]string{}
	}
	if _, ok := b.charges[key]; !ok {
		b.charges[key] = fmt.Sprintf("ch_%d", len(b.charges)+1)
	}
	return fmt.Appendf(nil, `{"charge":%q,"customer":%q,"cents":%d}`, b.charges[key], customer, cents), nil
}

// quickStart is the README's "Using it" snippet: the lines between the
// markers are the README's, byte for byte but for their indentation
// (TestReadmeQuickStart checks it).
func quickStart(ctx context.Context, dir string, billing *fakeBilling, args []byte, customer string, cents int, thought string) error {
	// quickstart:begin
	db, err := engine.Open(dir, nil) // nil options: strict durability, defaults
	if err != nil {
		return err
	}
	defer db.Close()
	run, err := db.Run(ctx, "deploy-42") // open or create
	if err != nil {
		return err
	}
	atom, err := run.Begin(ctx) // seq = last committed + 1
	if err != nil {
		return err
	}
	out, err := atom.Do(ctx, ledger.Action{Tool: "billing.charge", Args: args},
		func(ctx context.Context, key string) ([]byte, error) {
			return billing.Charge(ctx, customer, cents, key) // key: pass it downstream
		})
	if err != nil {
		return err
	}
	return atom.Commit(ctx, new(frame.Delta).
		AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: thought}).
		Set("charge", out))
	// quickstart:end
}

// The README's quick start: one atom that charges a customer through the
// ledger and commits what the agent thought and got.
func Example_quickStart() {
	dir, err := os.MkdirTemp("", "continuum-quickstart")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	billing := &fakeBilling{}
	err = quickStart(ctx, dir, billing, []byte(`{"customer":"c_42","cents":1200}`), "c_42", 1200, "Charged c_42 for the deploy.")
	if err != nil {
		log.Fatal(err)
	}

	db, err := engine.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	run, _ := db.Run(ctx, "deploy-42")
	st := run.State()
	fmt.Printf("seq %d: %s\n%s\n", run.LastSeq(), st.Messages[0].Content, st.Memory["charge"])
	// Output:
	// seq 1: Charged c_42 for the deploy.
	// {"charge":"ch_1","customer":"c_42","cents":1200}
}

// TestReadmeQuickStart: the README's quick start is quickStart's body, so
// that the snippet a new user copies compiles and runs (Example_quickStart).
func TestReadmeQuickStart(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_quickstart_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## Using it\n\n```go\n")
	snippet, _, ok2 := strings.Cut(rest, "```\n")
	if !ok || !ok2 {
		t.Fatal("README.md has no ```go block under \"## Using it\"")
	}
	_, body, _ := strings.Cut(string(src), "\t// quickstart:begin\n")
	body, _, _ = strings.Cut(body, "\t// quickstart:end\n")
	var lines []string
	for _, l := range strings.SplitAfter(body, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	if want := strings.Join(lines, ""); snippet != want {
		t.Errorf("README.md's quick start differs from quickStart in example_quickstart_test.go:\n--- README\n%s--- example\n%s", snippet, want)
	}
}
