package gateway

import (
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/leasegate/leasegate/api/leasegate/v1/leasegatev1connect"
	"github.com/leasegate/leasegate/internal/store"
)

// The message limit (WithMaxMessageBytes) is enforced on the request body
// as the handler reads it, so that an oversized message is refused as
// invalid_input with the disposition, detail and hint — as a request with
// an unknown field is — whatever the protocol and whether or not the
// request said its length:
//
//   - a Connect unary request (JSON or binary, one message as the body):
//     once more than the limit has been read;
//   - an enveloped one (gRPC, gRPC-Web, Connect streaming: each message
//     after a 5-byte prefix giving its length): at the prefix that
//     announces a message over the limit, before its bytes are read.
//
// A gzipped message is held to the limit twice: its bytes as sent, here,
// and its bytes decompressed, by the gateway's gzip decompressor
// (limitedGunzip). Each error is a *connect.Error, which connect returns
// from the read as is (its own limit, behind these, would answer
// resource_exhausted without a Refusal).

// limitBody wraps r's body with the message limit.
func (s *Server) limitBody(r *http.Request, op string) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	ct := r.Header.Get("Content-Type")
	enveloped := strings.HasPrefix(ct, "application/grpc") || strings.HasPrefix(ct, "application/connect+")
	streaming := r.URL.Path == leasegatev1connect.WorkerServiceKeepAliveProcedure ||
		r.URL.Path == leasegatev1connect.WorkerServiceWatchOwnershipProcedure
	r.Body = &limitedBody{ReadCloser: r.Body, s: s, op: op, max: int64(s.opts.maxMessageBytes), enveloped: enveloped, streaming: streaming}
}

type limitedBody struct {
	io.ReadCloser
	s         *Server
	op        string
	max       int64
	enveloped bool
	streaming bool // the interceptor counts a streaming handler's answer; a unary refused while reading is counted here

	err    error
	read   int64   // unary: bytes so far
	prefix [5]byte // enveloped: the prefix being read
	have   int     // its bytes so far
	left   int64   // bytes of the current message still to come
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	if !b.enveloped {
		if b.read += int64(n); b.read > b.max {
			return 0, b.refuse(b.read, "")
		}
		return n, err
	}
	for chunk := p[:n]; len(chunk) > 0; {
		if b.left > 0 {
			k := min(int64(len(chunk)), b.left)
			b.left -= k
			chunk = chunk[k:]
			continue
		}
		k := copy(b.prefix[b.have:], chunk)
		b.have += k
		chunk = chunk[k:]
		if b.have < len(b.prefix) {
			break
		}
		b.have = 0
		if b.left = int64(binary.BigEndian.Uint32(b.prefix[1:])); b.left > b.max {
			return 0, b.refuse(b.left, " message")
		}
	}
	return n, err
}

// refuse is the refusal of a message of size bytes (at least), counted.
func (b *limitedBody) refuse(size int64, what string) error {
	if !b.streaming {
		b.s.metrics.request(b.op, connect.CodeInvalidArgument)
	}
	b.err = ConnectError(oversized(b.op, what, size, int(b.max)))
	return b.err
}

// oversized is the refusal of a request (or one of its messages) of size
// bytes, or more, over the limit.
func oversized(op, what string, size int64, limit int) error {
	return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("the request%s is over the limit of %d bytes (%d or more)", what, limit, size), nil)
}

// limitedGunzip is the gateway's gzip decompressor: connect's, refusing a
// message whose decompressed size is over the limit as invalid_input (it
// knows no call, so the refusal names none).
type limitedGunzip struct {
	gz       *gzip.Reader
	max, out int64
}

func (s *Server) newDecompressor() connect.Decompressor {
	return &limitedGunzip{max: int64(s.opts.maxMessageBytes)}
}

func (d *limitedGunzip) Read(p []byte) (int, error) {
	if d.gz == nil {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := d.gz.Read(p)
	if d.out += int64(n); d.out > d.max {
		return 0, ConnectError(oversized("", " message, decompressed,", d.out, int(d.max)))
	}
	return n, err
}

func (d *limitedGunzip) Reset(r io.Reader) error {
	d.out = 0
	if d.gz == nil {
		gz, err := gzip.NewReader(r)
		d.gz = gz
		return err
	}
	return d.gz.Reset(r)
}

func (d *limitedGunzip) Close() error {
	if d.gz == nil {
		return nil
	}
	return d.gz.Close()
}
