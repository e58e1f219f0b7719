package bench

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/console"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// The gateway variants: the in-process commit and ledger-dispatch, made
// through a gateway (leasegate serve's server, started in this process on
// loopback TLS with an etcd client of its own) by workers using the Go
// client over the network.
const (
	// GatewayCommit is commit through the gateway: client.Commit, the
	// gateway's handler making the same fencedtxn.Commit.
	GatewayCommit = "gateway-commit"
	// GatewayDispatch is ledger-dispatch through the gateway: the record
	// is proposed (by the worker) and authorized (by an approver identity)
	// through the gateway untimed, then client.Dispatch is timed.
	GatewayDispatch = "gateway-dispatch"
)

// gatewayVariants are the variants that need the hop: the gateway, or
// (the floors) its certificates and servers beside it.
var gatewayVariants = []string{GatewayCommit, GatewayDispatch, HTTPFloor, GRPCFloor}

// benchTrustDomain is the SPIFFE trust domain of the run's throwaway
// certificates.
const benchTrustDomain = "bench.leasegate"

// hop is a gateway serving the run on loopback, and what its callers need.
type hop struct {
	url      string
	certs    gateway.DevCerts
	approver *client.Client
	floor    *floorServer
	gfloor   *grpcFloorServer
	live     *ConsoleLive // the console page held open (Config.Console)
	close    func()
}

// startGateway starts a gateway on 127.0.0.1 over TLS, serving
// leasegate's keyspace at prefix through an etcd client of its own (dialled
// as the run's others are), with the bench's provider as its adapter, and
// throwaway certificates for n workers (worker-0 …) and one approver. It
// is leasegate serve's server: its identities, roles, tenant, session key,
// metrics (on a registry of its own), the trace context on its etcd client
// and TLS, nothing left out.
func startGateway(ctx context.Context, tg *target, prefix string, n int, withConsole bool, lg *zap.Logger) (_ *hop, err error) {
	var closers []func()
	h := &hop{close: func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}}
	defer func() {
		if err != nil {
			h.close()
		}
	}()
	dir, err := os.MkdirTemp("", "leasegate-bench-gateway-")
	if err != nil {
		return nil, fmt.Errorf("bench: gateway certificates: %w", err)
	}
	closers = append(closers, func() { _ = os.RemoveAll(dir) })
	names := []string{"approver", consoleViewer}
	for i := range n {
		names = append(names, workerName(i))
	}
	if h.certs, err = gateway.WriteDevCerts(dir, benchTrustDomain, names...); err != nil {
		return nil, err
	}
	ids := []gateway.Identity{{ID: h.certs.IDs["approver"], Roles: []gateway.Role{gateway.RoleApprover}, Tenants: []string{tenant}},
		{ID: h.certs.IDs[consoleViewer], Roles: []gateway.Role{gateway.RoleWorker}, Tenants: []string{tenant}}}
	for i := range n {
		ids = append(ids, gateway.Identity{ID: h.certs.IDs[workerName(i)], Roles: []gateway.Role{gateway.RoleWorker}, Tenants: []string{tenant}})
	}
	// As leasegate serve dials: the trace context carried to etcd (no
	// exporter, as serve has by default). A cluster dialled by the caller
	// (Etcd.Dial) gets the caller's client as it is.
	cli, err := tg.dialWith(gateway.TraceDialOption(noop.NewTracerProvider()))
	if err != nil {
		return nil, store.NewError(coordinator.AuthorityUnavailable, "bench", "", "", "connect the gateway's etcd client", err)
	}
	closers = append(closers, func() { _ = cli.Close() })
	reg := prometheus.NewRegistry()
	c, err := tg.newCoordinator(ctx, cli, coordinator.WithPrefix(prefix), coordinator.WithLogger(lg), coordinator.WithMetrics(reg))
	if err != nil {
		return nil, err
	}
	key := make([]byte, gateway.MinSessionKeyBytes)
	_, _ = rand.Read(key)
	srv, err := gateway.New(c, gateway.WithLogger(lg), gateway.WithIdentities(ids...), gateway.WithSessionKey(key),
		gateway.WithAdapters(benchAdapter{}), gateway.WithMetrics(reg, reg))
	if err != nil {
		return nil, err
	}
	if withConsole {
		con, err := console.New(srv, console.WithLogger(lg), console.WithActionKey(console.ActionKey(key)))
		if err != nil {
			return nil, err
		}
		srv.Mount(console.Path, con)
	}
	tlsCfg, err := gateway.TLSConfig(h.certs.ServerCert, h.certs.ServerKey, h.certs.CA)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: gateway listener: %w", err)
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	// The floors' copies are taken before Serve, which writes its own
	// (net/http adds its protocols to the configuration it is given).
	floorTLS, gfloorTLS := tlsCfg.Clone(), tlsCfg.Clone()
	go func() { served <- srv.Serve(sctx, ln, tlsCfg, 5*time.Second) }()
	closers = append(closers, func() {
		stop()
		if err := <-served; err != nil {
			lg.Warn("bench: the gateway stopped", zap.Error(err))
		}
	})
	h.url = "https://" + ln.Addr().String()
	if h.floor, err = startFloor(floorTLS); err != nil {
		return nil, err
	}
	closers = append(closers, h.floor.close)
	if h.gfloor, err = startGRPCFloor(gfloorTLS); err != nil {
		return nil, err
	}
	closers = append(closers, h.gfloor.close)
	if h.approver, err = h.client("approver"); err != nil {
		return nil, err
	}
	closers = append(closers, h.approver.Close)
	if withConsole {
		var stop func()
		if h.live, stop, err = h.openConsole(ctx); err != nil {
			return nil, err
		}
		closers = append(closers, stop)
	}
	return h, nil
}

func workerName(i int) string { return fmt.Sprintf("worker-%d", i) }

// client is name's Go client of the gateway: its own certificate, so its
// own connection, as a worker process has.
func (h *hop) client(name string) (*client.Client, error) {
	tlsCfg, err := h.tlsOf(name)
	if err != nil {
		return nil, err
	}
	return client.New(h.url, tlsCfg)
}

// tlsOf is name's client TLS configuration: the CA and its certificate.
func (h *hop) tlsOf(name string) (*tls.Config, error) {
	f, ok := h.certs.Clients[name]
	if !ok {
		return nil, fmt.Errorf("bench: no certificate for %q", name)
	}
	return client.TLSConfig(h.certs.CA, f.Cert, f.Key)
}

// gatewayWorker is one worker's side of the gateway variants: its client,
// its session (renewed by the client's keepalive) and its grants.
type gatewayWorker struct {
	c         *client.Client
	approver  *client.Client
	s         *client.Session
	commitG   coordinator.Grant
	commitVer int64
	ledgerG   coordinator.Grant
	floor     *http.Client // http-floor's: the Go client's transport, this worker's certificate
	floorURL  string
	gfloor    *grpc.ClientConn // grpc-floor's: a connection of this worker's own
	seq       int
	ready     string // gateway-dispatch's AUTHORIZED operation, made by prepare
}

// worker is worker i's side: its own client (certificate, connections),
// a session renewed by the client's keepalive, and its two tasks claimed.
func (h *hop) worker(ctx context.Context, i int) (_ *gatewayWorker, err error) {
	w := &gatewayWorker{approver: h.approver}
	if w.c, err = h.client(workerName(i)); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			w.c.Close()
		}
	}()
	tlsCfg, err := h.tlsOf(workerName(i))
	if err != nil {
		return nil, err
	}
	w.floor, w.floorURL = floorClient(tlsCfg), h.floor.url
	if w.gfloor, err = grpc.NewClient(h.gfloor.addr, grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg))); err != nil {
		return nil, fmt.Errorf("bench: grpc floor client: %w", err)
	}
	defer func() {
		if err != nil {
			_ = w.gfloor.Close()
		}
	}()
	if w.s, err = w.c.OpenSession(ctx, 60*time.Second, client.WithKeepAlive()); err != nil {
		return nil, err
	}
	if w.commitG, err = w.s.Claim(ctx, tenant, fmt.Sprintf("gateway-commit-%d", i)); err == nil {
		w.ledgerG, err = w.s.Claim(ctx, tenant, fmt.Sprintf("gateway-ledger-%d", i))
	}
	if err != nil {
		_ = w.s.Close(ctx)
		return nil, err
	}
	return w, nil
}

func (w *gatewayWorker) close(ctx context.Context) {
	_ = w.s.Close(ctx)
	w.c.Close()
	w.floor.CloseIdleConnections()
	_ = w.gfloor.Close()
}

func (w *gatewayWorker) commit(ctx context.Context) error {
	w.seq++
	_, err := w.c.Commit(ctx, w.commitG, fencedtxn.Intent{Tenant: tenant, Task: w.commitG.Task,
		Operation: fmt.Sprintf("op-%06d", w.seq), Value: benchValue, ExpectedVersion: w.commitVer})
	if err == nil {
		w.commitVer++
	}
	return err
}

// prepare proposes and authorizes the next operation through the gateway,
// as a worker and an approver would: the gateway's ledger, like the
// in-process one in ledger-dispatch, has then written the record it
// dispatches.
func (w *gatewayWorker) prepare(ctx context.Context) error {
	w.seq++
	op := fmt.Sprintf("effect-%06d", w.seq)
	pre := ledger.Observation{Digest: "world-1", At: time.Now()}
	rec, err := w.c.Propose(ctx, w.ledgerG, op, ledger.Effect{Kind: benchKind, Target: "target", Policy: "bench-v1"}, pre)
	if err != nil {
		return err
	}
	if _, err = w.approver.Authorize(ctx, tenant, w.ledgerG.Task, op, ledger.Approval{ParamsDigest: rec.ParamsDigest,
		PreconditionDigest: pre.Digest}); err != nil {
		return err
	}
	w.ready = op
	return nil
}

func (w *gatewayWorker) dispatch(ctx context.Context) error {
	rec, err := w.c.Dispatch(ctx, w.ledgerG, w.ready)
	if err != nil {
		return err
	}
	if rec.State != ledger.Confirmed {
		return fmt.Errorf("dispatch through the gateway ended %s", rec.State)
	}
	return nil
}

// prepareOp readies what variant v's next operation needs, outside its
// timing.
func (w *worker) prepareOp(ctx context.Context, v string) error {
	if v == GatewayDispatch {
		return w.gw.prepare(ctx)
	}
	return w.prepare(ctx, v)
}

// gatewayOp runs one operation of a gateway variant; handled is false for
// the others.
func (w *worker) gatewayOp(ctx context.Context, v string) (handled bool, err error) {
	switch v {
	case GatewayCommit:
		return true, w.gw.commit(ctx)
	case GatewayDispatch:
		return true, w.gw.dispatch(ctx)
	case HTTPFloor:
		return true, floorOp(ctx, w.gw.floor, w.gw.floorURL)
	case GRPCFloor:
		return true, grpcFloorOp(ctx, w.gw.gfloor)
	}
	return false, nil
}

// withGateway starts the gateway and gives each worker its side, when vs
// has a gateway variant; close stops what it started.
func withGateway(ctx context.Context, tg *target, prefix string, ws []*worker, vs []string, withConsole bool, rep *Report, lg *zap.Logger) (close func(), err error) {
	if !slices.ContainsFunc(vs, func(v string) bool { return slices.Contains(gatewayVariants, v) }) {
		return func() {}, nil
	}
	h, err := startGateway(ctx, tg, prefix, len(ws), withConsole, lg)
	if err != nil {
		return nil, err
	}
	if withConsole {
		rep.Console = h.live
	}
	close = func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, w := range ws {
			if w.gw != nil {
				w.gw.close(cctx)
			}
		}
		h.close()
	}
	for i, w := range ws {
		if w.gw, err = h.worker(ctx, i); err != nil {
			close()
			return nil, fmt.Errorf("bench: set up gateway worker %d: %w", i, err)
		}
	}
	return close, nil
}
