package otelcontinuum

import (
	"context"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
)

// Verify is engine.Verify under a span (SpanVerify, a child of ctx's),
// with its result recorded by RecordVerify.
func (o *Observer) Verify(ctx context.Context, dir string, opts *engine.VerifyOptions) (*chain.Report, error) {
	ctx, span := o.tracer.Start(ctx, SpanVerify)
	defer span.End()
	rep, err := engine.Verify(ctx, dir, opts)
	result := o.RecordVerify(ctx, rep, err)
	if span.IsRecording() {
		span.SetAttributes(attribute.String(AttrVerifyResult, result))
		if rep != nil {
			span.SetAttributes(attribute.String(AttrStoreID, rep.StoreID),
				attribute.Int64(AttrVerifyRecords, int64(rep.Records)),
				attribute.Int(AttrVerifyFailureCount, len(rep.Failures)))
		}
		switch {
		case err != nil:
			span.SetStatus(codes.Error, err.Error())
		case !rep.OK:
			msg := "tampered or corrupt"
			if len(rep.Failures) > 0 {
				msg += ": " + rep.Failures[0].String()
			}
			span.SetStatus(codes.Error, msg)
		}
	}
	return rep, err
}

// RecordVerify records the outcome of a verification that the caller ran
// (engine.Verify or offline.Verify gave rep and err): one
// continuum.verifications by result, its duration, and its failures and
// warnings by kind. It returns the result: "intact" (rep.OK), "tampered"
// (a report with failures) or "error" (no report: err, an I/O or usage
// error, as continuumctl verify's exit status 2).
func (o *Observer) RecordVerify(ctx context.Context, rep *chain.Report, err error) string {
	result := "error"
	switch {
	case err == nil && rep != nil && rep.OK:
		result = "intact"
	case err == nil && rep != nil:
		result = "tampered"
	}
	o.verifications.Add(ctx, 1, o.with(attribute.String(AttrVerifyResult, result)))
	if err != nil || rep == nil {
		return result
	}
	o.verifyDur.Record(ctx, rep.Duration.Seconds(), o.base)
	count := func(c metric.Int64Counter, fs []chain.Failure) {
		n := map[chain.Kind]int64{}
		for _, f := range fs {
			n[f.Kind]++
		}
		for k, v := range n {
			c.Add(ctx, v, o.with(attribute.String(AttrVerifyKind, k.String())))
		}
	}
	count(o.verifyFailures, rep.Failures)
	count(o.verifyWarnings, rep.Warnings)
	return result
}
