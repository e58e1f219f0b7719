package console

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"sync"
)

// browserTLS carries the browser's verified TLS state from the console's
// request to the API call it makes.
type browserTLS struct{}

func withBrowser(ctx context.Context, st *tls.ConnectionState) context.Context {
	return context.WithValue(ctx, browserTLS{}, st)
}

// inproc is an http.RoundTripper that serves a call with the gateway's API
// handler in this process, the TLS state of the browser's request (its
// verified client certificate) on the call: the API authenticates the call
// as it would the browser's own, and applies the same roles and tenants.
// The answer streams through a pipe, so a server stream (WatchOwnership)
// reaches the console as it is sent.
type inproc struct{ api http.Handler }

func (t inproc) RoundTrip(req *http.Request) (*http.Response, error) {
	st, _ := req.Context().Value(browserTLS{}).(*tls.ConnectionState)
	// The call's context ends with the request's or when its answer is
	// closed, as a stream reset would end a remote call's.
	ctx, cancel := context.WithCancel(req.Context())
	r := req.Clone(ctx)
	r.TLS = st // nil: the API answers unauthenticated, as to a browser without a certificate
	r.RemoteAddr = "console"
	r.RequestURI = r.URL.RequestURI()
	if r.Body == nil {
		r.Body = http.NoBody
	}
	// Within one process a compressed answer costs CPU and saves nothing.
	for _, h := range []string{"Accept-Encoding", "Connect-Accept-Encoding", "Grpc-Accept-Encoding"} {
		r.Header.Del(h)
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, body: pw, ready: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer func() {
			w.start(http.StatusOK)
			_ = pw.Close()
			close(served)
		}()
		t.api.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		_ = pr.CloseWithError(req.Context().Err())
		cancel()
		<-served
		return nil, req.Context().Err()
	}
	return &http.Response{Status: http.StatusText(w.code), StatusCode: w.code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: answer{pr, cancel, served}, ContentLength: -1, Request: req}, nil
}

// answer is the body of an in-process call. Closing it ends the call and
// waits until the API's handler has returned, so that a console request
// ends only after the calls it made (a watch's handler frees its limit
// unit after its stream ends): a server shutting down waits for the
// console's requests, and with them for their calls.
type answer struct {
	*io.PipeReader
	cancel context.CancelFunc
	served <-chan struct{}
}

func (a answer) Close() error {
	err := a.PipeReader.Close()
	a.cancel()
	<-a.served
	return err
}

// pipeWriter is the API handler's http.ResponseWriter: the header goes out
// with the first write (or the handler's end), the body through the pipe.
type pipeWriter struct {
	header http.Header
	sent   http.Header
	code   int
	body   *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) start(code int) {
	w.once.Do(func() {
		w.code, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) WriteHeader(code int) { w.start(code) }

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.start(http.StatusOK)
	return w.body.Write(b)
}

// Flush is a no-op: every Write already waits for its reader.
func (w *pipeWriter) Flush() {}
