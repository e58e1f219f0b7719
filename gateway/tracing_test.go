package gateway_test

import (
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"

	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// One trace joins the worker's span, the gateway's call, the etcd Txns it
// made and the provider call: the W3C trace context travels worker →
// gateway → etcd and adapter.
func TestTheTraceContextJoinsWorkerGatewayEtcdAndProvider(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(lgtest.Ctx(t)) })
	w := newWorld(t)
	w.etcdDial = []grpc.DialOption{gateway.TraceDialOption(tp)}
	r := w.replica(gateway.WithTracerProvider(tp))
	g := authorized(t, w, r, "task-1", "op-1")

	// The worker's own tracer (another process in real life).
	worker := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, span := worker.Tracer("worker").Start(lgtest.Ctx(t), "worker.dispatch")
	out, err := w.client(r, "worker-a").Dispatch(ctx, g, "op-1")
	span.End()
	if err != nil || out.State != ledger.Confirmed {
		t.Fatalf("Dispatch: %v, %s", err, out.State)
	}
	var call, etcdTxn, apply bool
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() != span.SpanContext().TraceID() {
			continue
		}
		switch {
		case s.Name() == "leasegate.v1.WorkerService/Dispatch":
			call = s.Parent().SpanID() == span.SpanContext().SpanID()
		case strings.HasSuffix(s.Name(), "KV/Txn"):
			etcdTxn = true
		case s.Name() == "adapter.Apply":
			apply = true
		}
	}
	if !call || !etcdTxn || !apply {
		var names []string
		for _, s := range rec.Ended() {
			names = append(names, s.Name()+"@"+s.SpanContext().TraceID().String()[:8])
		}
		t.Fatalf("in the worker's trace: gateway call under the worker's span %v, an etcd Txn %v, the adapter call %v; spans: %v",
			call, etcdTxn, apply, names)
	}
}
