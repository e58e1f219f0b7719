package gateway_test

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/types/known/durationpb"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// A plain grpc-go client speaks to the gateway: health (no certificate
// needed) answers SERVING, reflection lists the three services, and a
// worker's call over gRPC works with its certificate.
func TestGRPCClientsHealthAndReflection(t *testing.T) {
	w := newWorld(t)
	r := w.replica()
	ctx := lgtest.Ctx(t)
	dial := func(caller string) *grpc.ClientConn {
		t.Helper()
		conn, err := grpc.NewClient(r.ts.Listener.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(w.tlsOf(caller))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	anon := dial("")
	hr, err := grpc_health_v1.NewHealthClient(anon).Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "leasegate.v1.WorkerService"})
	if err != nil || hr.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v, %v", hr, err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(anon).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"leasegate.v1.WorkerService", "leasegate.v1.ApproverService", "leasegate.v1.OperatorService"} {
		if !slices.Contains(names, want) {
			t.Fatalf("reflection lists %v, without %s", names, want)
		}
	}
	_ = stream.CloseSend()

	var out leasegatev1.OpenSessionResponse
	err = dial("worker-a").Invoke(ctx, "/leasegate.v1.WorkerService/OpenSession", &leasegatev1.OpenSessionRequest{Ttl: durationpb.New(5 * time.Second)}, &out)
	if err != nil || out.GetSession().GetOwner() != w.certs.IDs["worker-a"] {
		t.Fatalf("OpenSession over gRPC: %v, %v", &out, err)
	}
}
