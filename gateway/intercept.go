package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/leasegate/leasegate/internal/store"
)

// propagator carries W3C trace context (traceparent, tracestate) in and out.
var propagator = propagation.TraceContext{}

// interceptor wraps every handler: the caller's trace context becomes the
// parent of the call's span, a request with fields this API does not have
// is refused as invalid_input before the handler runs, and the answer is
// counted by procedure and code.
type interceptor struct{ s *Server }

func (s *Server) interceptor() connect.Interceptor { return interceptor{s} }

func (i interceptor) start(ctx context.Context, procedure string, h interface{ Get(string) string }) (context.Context, trace.Span) {
	ctx = propagator.Extract(ctx, headerCarrier{h})
	return i.s.tracer.Start(ctx, strings.TrimPrefix(procedure, "/"), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("rpc.system", "connect_rpc"), attribute.String("rpc.method", procedure)))
}

func (i interceptor) end(span trace.Span, procedure string, err error) {
	code := connect.CodeOf(err)
	if err == nil {
		code = 0
	}
	i.s.metrics.request(strings.TrimPrefix(procedure, "/"), code)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		var ce *connect.Error
		if errors.As(err, &ce) {
			span.SetAttributes(attribute.String("rpc.code", ce.Code().String()))
		}
	}
	span.End()
}

func (i interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		procedure := req.Spec().Procedure
		ctx, span := i.start(ctx, procedure, req.Header())
		resp, err := func() (connect.AnyResponse, error) {
			if m, ok := req.Any().(proto.Message); ok {
				if err := unknownFields(procedure, m.ProtoReflect()); err != nil {
					return nil, ConnectError(err)
				}
			}
			ctx, cancel := context.WithTimeout(ctx, i.s.opts.callTimeout)
			defer cancel()
			return next(ctx, req)
		}()
		i.end(span, procedure, err)
		return resp, err
	}
}

func (i interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		procedure := conn.Spec().Procedure
		ctx, span := i.start(ctx, procedure, conn.RequestHeader())
		err := next(ctx, checkedConn{conn})
		i.end(span, procedure, err)
		return err
	}
}

// checkedConn refuses a streamed message with unknown fields.
type checkedConn struct{ connect.StreamingHandlerConn }

func (c checkedConn) Receive(msg any) error {
	if err := c.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	if m, ok := msg.(proto.Message); ok {
		return ConnectError(unknownFields(c.Spec().Procedure, m.ProtoReflect()))
	}
	return nil
}

// unknownFields refuses a message carrying fields the API does not have
// (the binary codec keeps them silently; the JSON codec refuses them
// itself): a misspelt or newer field must never be read as absent.
func unknownFields(procedure string, m protoreflect.Message) error {
	if why, ok := malformed(m.GetUnknown()); ok {
		return store.NewError(store.InvalidInput, strings.TrimPrefix(procedure, "/"), "", "", fmt.Sprintf("the request is not the JSON of %s: %s", m.Descriptor().FullName(), why), nil)
	}
	if len(m.GetUnknown()) > 0 {
		return store.NewError(store.InvalidInput, strings.TrimPrefix(procedure, "/"), "", "", fmt.Sprintf("the request carries fields %s does not have", m.Descriptor().FullName()), nil)
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for j := 0; j < l.Len() && err == nil; j++ {
				err = unknownFields(procedure, l.Get(j).Message())
			}
		case fd.IsMap():
		case fd.Message() != nil:
			err = unknownFields(procedure, v.Message())
		}
		return err == nil
	})
	return err
}

// headerCarrier reads a header for the propagator.
type headerCarrier struct {
	h interface{ Get(string) string }
}

func (c headerCarrier) Get(k string) string { return c.h.Get(k) }
func (c headerCarrier) Set(string, string)  {}
func (c headerCarrier) Keys() []string      { return nil }
