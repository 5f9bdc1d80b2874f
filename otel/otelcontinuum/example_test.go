package otelcontinuum_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/otel/otelcontinuum"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Example_prometheus serves a store's metrics to Prometheus: the
// OpenTelemetry Prometheus exporter reads the Observer's instruments and
// those ObserveStats maps from DB.Stats, and an HTTP handler serves them.
// A service would serve the handler on its own address, for example
// http.ListenAndServe("localhost:9464", mux); the example serves it on a
// test server and prints part of one scrape.
func Example_prometheus() {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		log.Fatal(err)
	}
	obs, err := otelcontinuum.NewObserver(otelcontinuum.Config{
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter)),
	})
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "continuum-prometheus")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := engine.Open(filepath.Join(dir, "store"), &engine.Options{Observer: obs})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	stats, err := obs.ObserveStats(db)
	if err != nil {
		log.Fatal(err)
	}
	defer stats.Unregister()

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// An agent: three atoms, each with one action; the third repeats the
	// second's action with its key, which the ledger answers.
	ctx := context.Background()
	run, err := db.Run(ctx, "deploy-42")
	if err != nil {
		log.Fatal(err)
	}
	for i, key := range []string{"create-bucket", "upload", "upload"} {
		atom, err := run.Begin(ctx)
		if err != nil {
			log.Fatal(err)
		}
		act := ledger.Action{Tool: "storage." + key, Args: []byte(`{"bucket":"b"}`), Key: key}
		if _, err := atom.Do(ctx, act, func(context.Context, string) ([]byte, error) { return []byte("ok"), nil }); err != nil {
			log.Fatal(err)
		}
		d := new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: fmt.Sprint("step ", i)})
		if err := atom.Commit(ctx, d); err != nil {
			log.Fatal(err)
		}
	}

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range []string{"continuum_atoms_total", "continuum_actions_total", "continuum_action_calls_total",
			"continuum_atom_commit_duration_seconds_count", "continuum_run_count", "continuum_ledger_in_doubt_count"} {
			if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
				fmt.Println(line)
			}
		}
	}
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// continuum_action_calls_total 3
	// continuum_actions_total{continuum_action_outcome="cached"} 1
	// continuum_actions_total{continuum_action_outcome="executed"} 2
	// continuum_atom_commit_duration_seconds_count 3
	// continuum_atoms_total{continuum_atom_outcome="committed"} 3
	// continuum_ledger_in_doubt_count 0
	// continuum_run_count 1
}
