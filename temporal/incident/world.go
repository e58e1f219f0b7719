// Package incident replays seed 003's failover on a real Temporal server
// (go.temporal.io/server/temporaltest, in-process, SQLite) against
// leasegate's gateway with the simulated providers of `leasegate serve
// --dev` (gateway/devprovider), both ways: the naive coarse recoverRegion
// activity that mints a fresh request key per attempt, and the shape this
// module gives (one effect per activity, one operation id per step, one
// grant per attempt). The test of this package and examples/temporal run
// it; docs/temporal.md says what each run shows.
//
// Worker A is a separate process (this program run again, RunWorkerFromEnv)
// that stops itself with SIGSTOP right after the gateway's answer to its
// promotion reached it: its whole process — activity code, heartbeats,
// Temporal pollers, gateway connections — is frozen as a real paused
// worker would be, at exactly the seed's moment, and the replay sends
// SIGCONT when the seed's worker A woke.
package incident

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
)

// Tenant is the tenant every workflow of the replay acts in.
const Tenant = "northstar"

// The identities of the replay, one certificate each: two activity
// workers (A and B; the chaos test's workers share them), the approver
// (the incident commander), a reader for the approver's console (the
// proposals it shows), and an operator.
var identities = []string{"worker-a", "worker-b", "worker-c", "approver", "console", "operator"}

// World is one etcd, one gateway on loopback TLS with the simulated
// providers, and the certificates of the replay's identities.
type World struct {
	Dir      string
	URL      string
	Certs    gateway.DevCerts
	Provider *devprovider.Provider

	etcd   *embedtest.Cluster
	cli    *clientv3.Client
	srv    *http.Server
	stop   context.CancelFunc
	served chan error

	// drop is the probability, in millionths, that the gateway's answer to
	// a call is dropped after the call was served (the connection closed
	// without a response): the caller cannot know whether it applied.
	drop    atomic.Int64
	Dropped atomic.Int64
}

// StartWorld starts etcd (data under dir) and the gateway on 127.0.0.1.
func StartWorld(dir string) (*World, error) {
	certs, err := gateway.WriteDevCerts(filepath.Join(dir, "certs"), "northstar.example", identities...)
	if err != nil {
		return nil, err
	}
	cl, err := embedtest.Start(filepath.Join(dir, "etcd"), embedtest.WithLogger(zap.NewNop()))
	if err != nil {
		return nil, err
	}
	w := &World{Dir: dir, Certs: certs, Provider: devprovider.New("db-1"), etcd: cl, served: make(chan error, 1)}
	if w.cli, err = cl.NewClient(); err != nil {
		cl.Close()
		return nil, err
	}
	c, err := coordinator.New(context.Background(), w.cli)
	if err != nil {
		w.Close()
		return nil, err
	}
	roles := map[string]gateway.Role{"approver": gateway.RoleApprover, "operator": gateway.RoleOperator}
	var ids []gateway.Identity
	for _, name := range identities {
		r, ok := roles[name]
		if !ok {
			r = gateway.RoleWorker
		}
		ids = append(ids, gateway.Identity{ID: certs.IDs[name], Roles: []gateway.Role{r}, Tenants: []string{Tenant}})
	}
	key := make([]byte, gateway.MinSessionKeyBytes)
	_, _ = rand.Read(key)
	srv, err := gateway.New(c, gateway.WithIdentities(ids...), gateway.WithSessionKey(key),
		gateway.WithAdapters(w.Provider.Adapters()...),
		gateway.WithLedgerOptions(ledger.WithRecordTimeout(2*time.Second), ledger.WithPolling(20*time.Millisecond, 100*time.Millisecond, 3)))
	if err != nil {
		w.Close()
		return nil, err
	}
	tlsCfg, err := gateway.TLSConfig(certs.ServerCert, certs.ServerKey, certs.CA)
	if err != nil {
		w.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		w.Close()
		return nil, err
	}
	w.URL = "https://" + ln.Addr().String()
	w.srv = &http.Server{Handler: w.dropping(srv.Handler()), TLSConfig: tlsCfg, ReadHeaderTimeout: 10 * time.Second}
	go func() { w.served <- w.srv.ServeTLS(ln, "", "") }()
	return w, nil
}

// DropAnswers makes the gateway drop each answer with probability p: the
// call is served in full (a dispatch reaches its provider and is
// recorded), then its connection is closed with no response.
func (w *World) DropAnswers(p float64) { w.drop.Store(int64(p * 1e6)) }

// dropping serves each call into a buffer, then either writes the answer
// or closes the connection without one.
func (w *World) dropping(h http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		p := w.drop.Load()
		if p == 0 || r.ProtoMajor != 1 {
			h.ServeHTTP(rw, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if mrand.Int64N(1e6) < p {
			if hj, ok := rw.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					w.Dropped.Add(1)
					_ = conn.Close()
					return
				}
			}
		}
		for k, v := range rec.Header() {
			rw.Header()[k] = v
		}
		rw.WriteHeader(rec.Code)
		_, _ = rw.Write(rec.Body.Bytes())
	})
}

// TLS is identity's client TLS configuration.
func (w *World) TLS(identity string) (*tls.Config, error) {
	f, ok := w.Certs.Clients[identity]
	if !ok {
		return nil, fmt.Errorf("incident: no identity %q", identity)
	}
	return client.TLSConfig(w.Certs.CA, f.Cert, f.Key)
}

// Client is identity's gateway client.
func (w *World) Client(identity string) (*client.Client, error) {
	cfg, err := w.TLS(identity)
	if err != nil {
		return nil, err
	}
	return client.New(w.URL, cfg)
}

// Close stops the gateway and etcd.
func (w *World) Close() {
	var once sync.Once
	once.Do(func() {
		if w.srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = w.srv.Shutdown(ctx)
			cancel()
			if err := <-w.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
				fmt.Fprintln(os.Stderr, "incident: gateway:", err)
			}
		}
		if w.cli != nil {
			_ = w.cli.Close()
		}
		w.etcd.Close()
	})
}
