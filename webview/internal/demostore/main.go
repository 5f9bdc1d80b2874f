// Command demostore writes the demo stores of the web view's tests
// (package demo): demostore --dir DIR [--encrypted] [--runs N --atoms M]
// [--long N] [--crash RUN] [--live RUN --every D]. --live keeps the store open and RUN
// committing until it is killed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/webview/internal/demo"
)

func main() {
	dir := flag.String("dir", "", "the store's directory")
	encrypted := flag.Bool("encrypted", false, "encrypt the store with the demo keyring (written to DIR.keyring)")
	runs := flag.Int("runs", 0, "instead of the demo, write this many runs")
	atoms := flag.Int("atoms", 3, "atoms per run with --runs")
	long := flag.Int("long", 0, "instead of the demo, write one run \"long\" of this many atoms")
	crash := flag.String("crash", "", "instead of the demo, leave an action of this run in doubt: the process exits (code 3) while it runs")
	live := flag.String("live", "", "keep this run committing until killed")
	every := flag.Duration("every", 200*time.Millisecond, "with --live: one atom per this long")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "demostore: --dir is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case *crash != "":
		var ring seal.Keyring
		if *encrypted {
			ring = demo.Keyring()
		}
		err = demo.CrashInDoubt(ctx, *dir, *crash, ring)
	case *live != "":
		err = demo.Live(ctx, *dir, *live, *every, func() { fmt.Println("live") })
	case *runs > 0:
		err = demo.Many(ctx, *dir, *runs, *atoms)
	case *long > 0:
		err = demo.Long(ctx, *dir, "long", *long)
	case *encrypted:
		if err = os.WriteFile(*dir+".keyring", []byte(demo.KeyringFile), 0o600); err == nil {
			err = demo.Build(ctx, *dir, demo.Keyring())
		}
	default:
		err = demo.Build(ctx, *dir, nil)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demostore:", err)
		os.Exit(1)
	}
}
