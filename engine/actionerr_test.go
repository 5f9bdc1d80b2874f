package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/ledger"
)

type statusError struct{ code int }

func (e *statusError) Error() string { return fmt.Sprintf("%d from downstream", e.code) }

var errThrottled = errors.New("throttled")

// TestDoErrorSaysWhere: an exec error comes back wrapped with the run, the
// seq, the tool and the key, and still matches the exec's own error with
// errors.Is and errors.As.
func TestDoErrorSaysWhere(t *testing.T) {
	ctx := context.Background()
	db, err := engine.Open("store", &engine.Options{FS: vfs.NewMem(), NoSync: true, DictSamples: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run, err := db.Run(ctx, "deploy-42")
	if err != nil {
		t.Fatal(err)
	}
	atom, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	act := ledger.Action{Tool: "billing.charge", Args: []byte(`{"cents":1200}`)}
	_, err = atom.Do(ctx, act, func(context.Context, string) ([]byte, error) {
		return nil, fmt.Errorf("charge: %w (%w)", &statusError{503}, errThrottled)
	})
	var se *statusError
	if !errors.As(err, &se) || se.code != 503 || !errors.Is(err, errThrottled) {
		t.Fatalf("Do error %v does not match the exec's own errors", err)
	}
	var ae *engine.ActionError
	if !errors.As(err, &ae) {
		t.Fatalf("Do error %T %v is not an *ActionError", err, err)
	}
	key := ledger.DefaultKey("deploy-42", 1, 0)
	if ae.RunID != "deploy-42" || ae.Seq != 1 || ae.Index != 0 || ae.Tool != "billing.charge" || ae.Key != key {
		t.Errorf("ActionError %+v, want run deploy-42 seq 1 index 0 tool billing.charge key %s", ae, key)
	}
	for _, want := range []string{`run "deploy-42"`, "seq 1", `"billing.charge"`, `key "` + key + `"`, "503 from downstream"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Do error %q does not say %s", err, want)
		}
	}

	// A second action with an explicit key names that key.
	_, err = atom.Do(ctx, ledger.Action{Tool: "email.send", Args: []byte(`{}`), Key: "mail-7"},
		func(context.Context, string) ([]byte, error) { return nil, errThrottled })
	if !errors.As(err, &ae) || ae.Key != "mail-7" || ae.Tool != "email.send" || !errors.Is(err, errThrottled) {
		t.Errorf("explicit key: %v (%+v)", err, ae)
	}
}
