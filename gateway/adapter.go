package gateway

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasegate/leasegate/ledger"
)

// instrumented is an adapter as the gateway calls it: each provider call in
// a span (a child of the worker's call, so one trace joins worker, gateway,
// etcd and provider), Apply counted in flight and timed by kind.
type instrumented struct {
	ledger.Adapter
	s *Server
}

func (a instrumented) span(ctx context.Context, name, operation string) (context.Context, trace.Span) {
	return a.s.tracer.Start(ctx, "adapter."+name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("leasegate.adapter.kind", a.Kind()), attribute.String("leasegate.operation", operation)))
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (a instrumented) Precondition(ctx context.Context, e ledger.Effect) (ledger.Observation, error) {
	ctx, span := a.span(ctx, "Precondition", "")
	o, err := a.Adapter.Precondition(ctx, e)
	endSpan(span, err)
	return o, err
}

func (a instrumented) Apply(ctx context.Context, call ledger.Call) (ledger.Evidence, error) {
	ctx, span := a.span(ctx, "Apply", call.Operation)
	span.SetAttributes(attribute.Int64("leasegate.epoch", call.Epoch), attribute.Int("leasegate.attempt", call.Attempt))
	a.s.metrics.inFlight.Inc()
	start := time.Now()
	ev, err := a.Adapter.Apply(ctx, call)
	a.s.metrics.duration.WithLabelValues(a.Kind()).Observe(time.Since(start).Seconds())
	a.s.metrics.inFlight.Dec()
	endSpan(span, err)
	return ev, err
}

func (a instrumented) Observe(ctx context.Context, rec ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	ctx, span := a.span(ctx, "Observe", rec.Operation)
	out, ev, err := a.Adapter.Observe(ctx, rec)
	span.SetAttributes(attribute.String("leasegate.outcome", out.String()))
	endSpan(span, err)
	return out, ev, err
}
