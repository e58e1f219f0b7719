package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/leasegate/leasegate/client"
)

// HTTPFloor is the floor of any hop built on net/http, as the gateway is
// (connect serves through it): one POST over loopback TLS, from a worker's
// own client (the Go client's HTTP/1.1 transport, its certificate) to a
// bare net/http server (the gateway's TLS configuration) whose handler
// reads the request and answers a fixed body. Neither end does anything
// else — no protobuf, no connect, no identity, no etcd — so its CPU per
// operation is less than any net/http hop can cost, and
// cpu(commit) / (cpu(commit) + cpu(http-floor)) bounds what
// gateway-commit / commit can reach on a machine whose CPUs bound the run
// (docs/performance.md, "The floor of the hop").
const HTTPFloor = "http-floor"

// GRPCFloor is the same floor for the other stack the gateway could have
// been built on (grpc-go's own HTTP/2 server and client, docs/design.md
// §14): one unary call, over loopback TLS on a worker's own connection,
// to a grpc-go server whose handler answers a fixed message; a
// wrapperspb.BytesValue each way, of the sizes of a commit's.
const GRPCFloor = "grpc-floor"

// floorRequest and floorAnswer are the floor's bodies: the sizes of a
// commit's request and answer through the gateway (the Connect protocol's
// binary bodies: 164 and 85 bytes here).
var (
	floorRequest = bytes.Repeat([]byte{0x5a}, 164)
	floorAnswer  = bytes.Repeat([]byte{0xa5}, 85)
)

// floorServer is the bare server of the floor: net/http over TLS on
// 127.0.0.1, as gateway.Serve builds it, with a handler that does nothing.
type floorServer struct {
	url string
	srv *http.Server
}

func startFloor(tlsConfig *tls.Config) (*floorServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: floor listener: %w", err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/proto")
		_, _ = w.Write(floorAnswer)
	})
	f := &floorServer{url: "https://" + ln.Addr().String() + "/floor",
		srv: &http.Server{Handler: h, TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = f.srv.ServeTLS(ln, "", "") }()
	return f, nil
}

func (f *floorServer) close() { _ = f.srv.Close() }

// grpcFloorMethod is the grpc floor's one method.
const grpcFloorMethod = "/leasegate.bench.Floor/Call"

// grpcFloorServer is the bare grpc-go server of the floor, on 127.0.0.1
// over TLS.
type grpcFloorServer struct {
	addr string
	srv  *grpc.Server
}

func startGRPCFloor(tlsConfig *tls.Config) (*grpcFloorServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: grpc floor listener: %w", err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsConfig)))
	answer := wrapperspb.Bytes(floorAnswer)
	srv.RegisterService(&grpc.ServiceDesc{ServiceName: "leasegate.bench.Floor", HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Call", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var req wrapperspb.BytesValue
			if err := dec(&req); err != nil {
				return nil, err
			}
			return answer, nil
		}}}}, struct{}{})
	go func() { _ = srv.Serve(ln) }()
	return &grpcFloorServer{addr: ln.Addr().String(), srv: srv}, nil
}

func (f *grpcFloorServer) close() { f.srv.Stop() }

// grpcFloorOp is one call of the grpc floor on cc.
func grpcFloorOp(ctx context.Context, cc *grpc.ClientConn) error {
	var resp wrapperspb.BytesValue
	if err := cc.Invoke(ctx, grpcFloorMethod, wrapperspb.Bytes(floorRequest), &resp); err != nil {
		return err
	}
	if len(resp.GetValue()) != len(floorAnswer) {
		return fmt.Errorf("bench: grpc floor answered %d bytes", len(resp.GetValue()))
	}
	return nil
}

// floorOp is one exchange of the floor on hc.
func floorOp(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(floorRequest))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/proto")
	req.Header.Set("Connect-Protocol-Version", "1")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	switch {
	case err != nil:
		return err
	case resp.StatusCode != http.StatusOK || n != int64(len(floorAnswer)):
		return fmt.Errorf("bench: floor answered %s with %d bytes", resp.Status, n)
	}
	return nil
}

// floorClient is a worker's HTTP client of the floor: the Go client's,
// with the worker's certificate.
func floorClient(tlsConfig *tls.Config) *http.Client { return client.HTTPClient(tlsConfig) }

// processCPU is the CPU time this process has used so far, user and
// system, over every thread (the embedded etcd's, the gateway's and the
// workers' alike).
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
