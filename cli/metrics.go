package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// metricsAddrFlag is --metrics-addr of the long-running commands (run,
// watch, bench).
func metricsAddrFlag() cli.Flag {
	return &cli.StringFlag{Name: "metrics-addr",
		Usage: "serve Prometheus metrics at http://ADDR/metrics while the command runs (host:port, e.g. 127.0.0.1:9464; port 0 picks one and logs it at info)"}
}

// serveMetrics starts the metrics endpoint when --metrics-addr is given,
// before any request to etcd: an address it cannot listen on is
// invalid_input. It returns the endpoint's registry (nil without
// --metrics-addr), which already holds the Go runtime's and the process's
// metrics, and a func that stops the endpoint.
func serveMetrics(c *cli.Context) (prometheus.Registerer, func(), error) {
	addr := c.String("metrics-addr")
	if addr == "" {
		return nil, func() {}, nil
	}
	op := commandName(c)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--metrics-addr %q: %v (want host:port)", addr, err), nil)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--metrics-addr: %v", err), nil)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	lg := globalsOf(c).lg.Named("metrics")
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			lg.Warn("metrics endpoint stopped", zap.Error(err))
		}
	}()
	lg.Info("serving metrics", zap.String("url", "http://"+l.Addr().String()+"/metrics"))
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	return reg, stop, nil
}

// metricsOptions are the coordinator options that register leasegate's
// metrics on reg (none when reg is nil).
func metricsOptions(reg prometheus.Registerer) []coordinator.Option {
	if reg == nil {
		return nil
	}
	return []coordinator.Option{coordinator.WithMetrics(reg)}
}
