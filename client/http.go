package client

import (
	"crypto/tls"
	"fmt"
	"net/http"

	"connectrpc.com/connect"

	"github.com/leasegate/leasegate/api/leasegate/v1/leasegatev1connect"
	"github.com/leasegate/leasegate/internal/store"
)

// NewWithHTTPClient is a client of the gateway at baseURL that sends its
// calls through hc, whose transport carries the TLS configuration (the CA
// and this caller's certificate: its identity). Clients of one caller at
// several base URLs — path prefixes that a router in front of several
// gateways serves, as the drill's does — share hc's connections. Close
// closes hc's idle connections, so those of every client sharing it.
func NewWithHTTPClient(baseURL string, hc *http.Client, opts ...Option) (*Client, error) {
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, store.NewError(store.InvalidInput, "client", "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	if hc == nil {
		return nil, store.NewError(store.InvalidInput, "client", "", "", "nil HTTP client", nil)
	}
	var copts []connect.ClientOption
	if o.grpc {
		copts = append(copts, connect.WithGRPC())
	}
	c := &Client{
		workers:   leasegatev1connect.NewWorkerServiceClient(hc, baseURL, copts...),
		approvers: leasegatev1connect.NewApproverServiceClient(hc, baseURL, copts...),
		operators: leasegatev1connect.NewOperatorServiceClient(hc, baseURL, copts...),
		http:      hc,
	}
	switch o.readsAs {
	case "approver":
		c.reads = c.approvers
	case "operator":
		c.reads = c.operators
	default:
		c.reads = c.workers
	}
	return c, nil
}

// HTTPClient is the HTTP client New gives a Client of the Connect
// protocol, for NewWithHTTPClient: a unary call over HTTP/1.1, a stream
// over HTTP/2 (see New), with tlsConfig (the caller's certificate).
func HTTPClient(tlsConfig *tls.Config) *http.Client {
	return &http.Client{Transport: splitTransport{h1: newTransport(tlsConfig, false), h2: newTransport(tlsConfig, true)}}
}
