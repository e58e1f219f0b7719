package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/api/leasegate/v1/leasegatev1connect"
	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// An oversized message is invalid_argument with the disposition
// invalid_input and the one-line message, nothing written, over every
// protocol: gRPC (unary and a stream's message), the Connect protocol, and
// JSON whose length was not announced (no Content-Length to refuse early).
// Over the limit by one byte is refused; at the limit is not.
func TestAnOversizedMessageIsInvalidInputWritingNothing(t *testing.T) {
	const limit = 4096
	w := newWorld(t)
	r := w.replica(gateway.WithMaxMessageBytes(limit))
	ctx := lgtest.Ctx(t)
	prefix := coordinator.DefaultPrefix
	big := []byte(strings.Repeat("A", 2*limit))

	for _, proto := range []struct {
		name string
		opts []client.Option
	}{{"grpc", []client.Option{client.WithGRPC()}}, {"connect", nil}} {
		t.Run(proto.name, func(t *testing.T) {
			c, err := client.New(r.ts.URL, w.tlsOf("worker-a"), proto.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s := w.session(c, 10*time.Second)
			g := claim(t, s, tenant, "big-"+proto.name)
			lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.InvalidInput, func() error {
				_, err := c.Commit(ctx, g, fencedtxn.Intent{Tenant: tenant, Task: g.Task, Operation: "op-1", Value: big})
				if err != nil && !strings.Contains(err.Error(), "over the limit of 4096 bytes") {
					t.Errorf("refusal %q does not say the limit", err)
				}
				return err
			})
			// A message just under the limit goes through.
			if _, err := c.Commit(ctx, g, fencedtxn.Intent{Tenant: tenant, Task: g.Task, Operation: "op-1", Value: big[:limit-512]}); err != nil {
				t.Fatalf("a commit under the limit: %v", err)
			}
		})
	}

	t.Run("grpc stream", func(t *testing.T) {
		h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: w.tlsOf("worker-a"), ForceAttemptHTTP2: true}}
		defer h2.CloseIdleConnections()
		raw := leasegatev1connect.NewWorkerServiceClient(h2, r.ts.URL, connect.WithGRPC())
		stream, err := raw.KeepAlive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.InvalidInput, func() error {
			// A Send cut short by the refusal reads it from Receive.
			_ = stream.Send(&leasegatev1.KeepAliveRequest{SessionToken: string(big)})
			_, err := stream.Receive()
			return asRefusal(err)
		})
		_ = stream.CloseRequest()
		_ = stream.CloseResponse()
	})

	t.Run("gzipped grpc", func(t *testing.T) {
		// Twice the limit of one letter gzips to far under it: held to the
		// limit decompressed.
		h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: w.tlsOf("worker-a"), ForceAttemptHTTP2: true}}
		defer h2.CloseIdleConnections()
		raw := leasegatev1connect.NewWorkerServiceClient(h2, r.ts.URL, connect.WithGRPC(), connect.WithSendGzip())
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.InvalidInput, func() error {
			_, err := raw.GetState(ctx, &leasegatev1.GetStateRequest{Tenant: tenant, Task: string(big)})
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "decompressed") {
				t.Errorf("a gzipped message over the limit: %v", err)
			}
			return asRefusal(err)
		})
		if _, err := raw.GetState(ctx, &leasegatev1.GetStateRequest{Tenant: tenant, Task: "small"}); err != nil {
			t.Fatalf("a small gzipped message: %v", err)
		}
	})

	t.Run("json of unannounced length", func(t *testing.T) {
		hc := w.httpClient("worker-a")
		post := func(body string) (int, string, error) {
			// A reader of unknown length: the request goes chunked, with no
			// Content-Length for the gateway to refuse before reading.
			req, _ := http.NewRequest(http.MethodPost, r.ts.URL+leasegatev1connect.WorkerServiceGetStateProcedure, io.MultiReader(strings.NewReader(body)))
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				return 0, "", err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if req.ContentLength != 0 { // 0 with a body: unknown, sent chunked
				t.Fatalf("the request announced its length %d", req.ContentLength)
			}
			return resp.StatusCode, string(b), nil
		}
		pad := func(n int) string { // a GetState request of exactly n bytes
			head, tail := `{"tenant":"`+tenant+`","task":"t`, `"}`
			return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
		}
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.InvalidInput, func() error {
			code, body, err := post(pad(limit + 1))
			if err != nil {
				return err
			}
			var e struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Details []struct {
					Debug struct{ Disposition, Hint string } `json:"debug"`
				} `json:"details"`
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || code != http.StatusBadRequest || e.Code != "invalid_argument" || len(e.Details) != 1 {
				t.Fatalf("HTTP %d %s: want 400 invalid_argument with a refusal", code, body)
			}
			if !strings.HasPrefix(e.Message, "invalid_input: "+coordinator.InvalidInput.Hint()) || strings.Contains(e.Message, "\n") {
				t.Fatalf("message %q is not the CLI's one line", e.Message)
			}
			return store.NewError(coordinator.Disposition(e.Details[0].Debug.Disposition), "", "", "", "", nil)
		})
		// At the limit the request is read, and answered (a label error:
		// the task is too long to be one, not too big to read).
		if code, body, err := post(pad(limit)); err != nil || strings.Contains(body, "over the limit") {
			t.Fatalf("a request at the limit: HTTP %d %s %v", code, body, err)
		}
	})
}

// The services that need no certificate (health, reflection) hold a
// message to the same limit: a caller with none cannot make the server
// read, or gunzip, a message of any size. Over the limit is refused; a
// message under it is answered.
func TestTheLimitHoldsWithoutACertificate(t *testing.T) {
	const limit = 4096
	w := newWorld(t)
	r := w.replica(gateway.WithMaxMessageBytes(limit))
	ctx := lgtest.Ctx(t)
	big := strings.Repeat("a", 64*limit)
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: w.tlsOf(""), ForceAttemptHTTP2: true}}
	defer h2.CloseIdleConnections()
	refused := func(t *testing.T, err error) {
		t.Helper()
		if c := connect.CodeOf(err); err == nil || (c != connect.CodeInvalidArgument && c != connect.CodeResourceExhausted) {
			msg := fmt.Sprint(err)
			t.Fatalf("a message over the limit: %.200s (%v), want it refused for its size", msg, connect.CodeOf(err))
		}
	}
	for _, c := range []struct {
		name string
		opts []connect.ClientOption
	}{
		{"health, gzipped", []connect.ClientOption{connect.WithSendGzip()}},
		{"health over grpc", []connect.ClientOption{connect.WithGRPC()}},
		{"health over grpc, gzipped", []connect.ClientOption{connect.WithGRPC(), connect.WithSendGzip()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			hc := grpchealth.NewClient(h2, r.ts.URL, c.opts...)
			_, err := hc.Check(ctx, &grpchealth.CheckRequest{Service: big})
			refused(t, err)
			if res, err := hc.Check(ctx, &grpchealth.CheckRequest{Service: leasegatev1connect.WorkerServiceName}); err != nil || res.Status != grpchealth.StatusServing {
				t.Fatalf("a small health check: %v, %v", res, err)
			}
		})
	}
	t.Run("reflection", func(t *testing.T) {
		raw := connect.NewClient[reflectionpb.ServerReflectionRequest, reflectionpb.ServerReflectionResponse](h2,
			r.ts.URL+"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", connect.WithGRPC())
		stream := raw.CallBidiStream(ctx)
		defer func() { _ = stream.CloseResponse() }() // even when refused fails: the server must not wait for more
		_ = stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileByFilename{FileByFilename: big}})
		_ = stream.CloseRequest()
		_, err := stream.Receive()
		refused(t, err)
	})
}
