package realprov

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// IdemServer is an HTTP service that implements the answers of the IETF
// httpapi "The Idempotency-Key HTTP Header Field" draft (and Stripe's
// convention) for a user's own service, with a fencing epoch and a
// compare-and-set precondition:
//
//	POST /v1/records/{name}   body {"value": …}; headers Idempotency-Key (required),
//	                          Fencing-Epoch (optional), If-Match (optional ETag),
//	                          If-None-Match: * (optional: only if absent)
//	    201  applied: {"change": id, "record", "value", "epoch", "etag"}
//	    201  the same key and payload again: the first answer replayed
//	         (Idempotent-Replayed: true), nothing applied again
//	    400  no Idempotency-Key
//	    409  the same key while its first request is still processing
//	         (problem type "request-in-progress")
//	    409  a Fencing-Epoch lower than one the record already took
//	         (problem type "stale-fencing-epoch")
//	    412  If-Match names another ETag than the record's (or If-None-Match: *
//	         and the record exists)
//	    422  the same key with another payload
//	GET  /v1/records/{name}   {"value", "etag", "change", "key"}; ETag header
//	GET  /v1/changes?idempotency_key=K   the change made under K, or 404
//
// Keys are remembered for Retention. Faults: DropNextAnswer (apply, then
// close the connection with no answer), HoldNext (the next POST waits in
// processing until released).
type IdemServer struct {
	*httptest.Server
	// Retention is how long a key is remembered (the draft's expiry).
	Retention time.Duration

	mu       sync.Mutex
	records  map[string]*idemRecord
	keys     map[string]*idemEntry
	applied  map[string]int // key -> times its change was applied
	changes  int
	dropNext bool
	hold     chan struct{} // non-nil: the next POST waits on it
	held     chan struct{} // closed when that POST is waiting
}

type idemRecord struct {
	Value  string `json:"value"`
	ETag   string `json:"etag"`
	Change string `json:"change,omitempty"`
	Key    string `json:"key,omitempty"`
	epoch  int64
}

type idemEntry struct {
	digest   string
	done     bool
	status   int
	body     []byte
	at       time.Time
	inflight chan struct{}
}

// NewIdemServer starts the service for t with records (name → value) and
// closes it in t.Cleanup.
func NewIdemServer(t testing.TB, records map[string]string) *IdemServer {
	t.Helper()
	s := StartIdemServer(records)
	t.Cleanup(s.Close)
	return s
}

// StartIdemServer starts the service on a loopback port; the caller must
// Close it.
func StartIdemServer(records map[string]string) *IdemServer {
	s := &IdemServer{Retention: 24 * time.Hour, records: map[string]*idemRecord{}, keys: map[string]*idemEntry{}, applied: map[string]int{}}
	for name, v := range records {
		s.records[name] = &idemRecord{Value: v, ETag: etagOf(name, v, "")}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/records/{name}", s.post)
	mux.HandleFunc("GET /v1/records/{name}", s.get)
	mux.HandleFunc("GET /v1/changes", s.lookup)
	s.Server = httptest.NewServer(mux)
	return s
}

// Applied is how many times the change under key was applied (0 or 1
// when the service keeps its promise).
func (s *IdemServer) Applied(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied[key]
}

// Value is a record's value now.
func (s *IdemServer) Value(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.records[name]; r != nil {
		return r.Value
	}
	return ""
}

// Set changes a record outside the API, as another client would.
func (s *IdemServer) Set(name, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[name] = &idemRecord{Value: value, ETag: etagOf(name, value, "operator")}
}

// DropNextAnswer makes the next POST apply and then lose its answer: the
// connection is closed with nothing written.
func (s *IdemServer) DropNextAnswer() {
	s.mu.Lock()
	s.dropNext = true
	s.mu.Unlock()
}

// HoldNext makes the next POST wait in processing (its key taken) until
// release is called; held is closed once it waits.
func (s *IdemServer) HoldNext() (held <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold, s.held = make(chan struct{}), make(chan struct{})
	h := s.hold
	var once sync.Once
	return s.held, func() { once.Do(func() { close(h) }) }
}

func etagOf(name, value, change string) string {
	h := sha256.Sum256([]byte(name + "\x00" + value + "\x00" + change))
	return `"` + hex.EncodeToString(h[:8]) + `"`
}

func problem(w http.ResponseWriter, status int, typ, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"type": typ, "title": http.StatusText(status), "detail": detail})
}

func (s *IdemServer) post(w http.ResponseWriter, r *http.Request) {
	name, key := r.PathValue("name"), r.Header.Get("Idempotency-Key")
	if key == "" {
		problem(w, http.StatusBadRequest, "missing-idempotency-key", "this endpoint requires an Idempotency-Key header")
		return
	}
	body, err := readAll(r)
	var in struct {
		Value string `json:"value"`
	}
	if err == nil {
		err = json.Unmarshal(body, &in)
	}
	if err != nil || in.Value == "" {
		problem(w, http.StatusBadRequest, "bad-body", "the body must be {\"value\": non-empty}")
		return
	}
	var epoch int64
	if e := r.Header.Get("Fencing-Epoch"); e != "" {
		if epoch, err = strconv.ParseInt(e, 10, 64); err != nil || epoch <= 0 {
			problem(w, http.StatusBadRequest, "bad-fencing-epoch", "Fencing-Epoch must be a positive integer")
			return
		}
	}
	sum := sha256.Sum256(append([]byte(name+"\x00"), body...))
	digest := hex.EncodeToString(sum[:])

	s.mu.Lock()
	if e := s.keys[key]; e != nil && time.Since(e.at) < s.Retention {
		switch {
		case e.digest != digest:
			s.mu.Unlock()
			problem(w, http.StatusUnprocessableEntity, "idempotency-key-reused", "this key was used with another payload")
			return
		case !e.done:
			s.mu.Unlock()
			problem(w, http.StatusConflict, "request-in-progress", "a request with this key is still being processed")
			return
		}
		st, b := e.status, e.body
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(st)
		_, _ = w.Write(b)
		return
	}
	entry := &idemEntry{digest: digest, at: time.Now(), inflight: make(chan struct{})}
	s.keys[key] = entry
	hold, held := s.hold, s.held
	s.hold, s.held = nil, nil
	s.mu.Unlock()
	if hold != nil {
		close(held)
		<-hold
	}

	s.mu.Lock()
	rec := s.records[name]
	var status int
	var out []byte
	switch {
	case rec != nil && epoch > 0 && epoch < rec.epoch:
		status = http.StatusConflict
		out, _ = json.Marshal(map[string]string{"type": "stale-fencing-epoch", "title": "Conflict",
			"detail": fmt.Sprintf("epoch %d is older than %d, which already changed this record", epoch, rec.epoch)})
	case r.Header.Get("If-None-Match") == "*" && rec != nil:
		status = http.StatusPreconditionFailed
		out, _ = json.Marshal(map[string]string{"type": "precondition-failed", "title": "Precondition Failed",
			"detail": "If-None-Match: * but the record exists", "etag": rec.ETag})
	case r.Header.Get("If-Match") != "" && (rec == nil || r.Header.Get("If-Match") != rec.ETag):
		status = http.StatusPreconditionFailed
		cur := ""
		if rec != nil {
			cur = rec.ETag
		}
		out, _ = json.Marshal(map[string]string{"type": "precondition-failed", "title": "Precondition Failed",
			"detail": "If-Match " + r.Header.Get("If-Match") + " is not the record's ETag " + cur, "etag": cur})
	default:
		s.changes++
		id := fmt.Sprintf("chg-%d", s.changes)
		rec = &idemRecord{Value: in.Value, ETag: etagOf(name, in.Value, id), Change: id, Key: key, epoch: max(epoch, epochOf(rec))}
		s.records[name] = rec
		s.applied[key]++
		status = http.StatusCreated
		out, _ = json.Marshal(map[string]any{"change": id, "record": name, "value": in.Value, "epoch": epoch, "etag": rec.ETag})
	}
	entry.done, entry.status, entry.body = true, status, out
	close(entry.inflight)
	drop := s.dropNext && status == http.StatusCreated
	if drop {
		s.dropNext = false
	}
	s.mu.Unlock()
	if drop {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusCreated {
		w.Header().Set("ETag", rec.ETag)
	}
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

func epochOf(r *idemRecord) int64 {
	if r == nil {
		return 0
	}
	return r.epoch
}

func (s *IdemServer) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	rec := s.records[r.PathValue("name")]
	var b []byte
	if rec != nil {
		b, _ = json.Marshal(rec)
	}
	s.mu.Unlock()
	if rec == nil {
		problem(w, http.StatusNotFound, "no-such-record", r.PathValue("name"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("ETag", rec.ETag)
	_, _ = w.Write(b)
}

func (s *IdemServer) lookup(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("idempotency_key")
	s.mu.Lock()
	e := s.keys[key]
	var st int
	var b []byte
	inProgress := e != nil && !e.done
	if e != nil && e.done {
		st, b = e.status, e.body
	}
	s.mu.Unlock()
	switch {
	case key == "":
		problem(w, http.StatusBadRequest, "missing-idempotency-key", "?idempotency_key= is required")
	case e == nil:
		problem(w, http.StatusNotFound, "unknown-idempotency-key", "no request was received under this key")
	case inProgress:
		problem(w, http.StatusConflict, "request-in-progress", "a request with this key is still being processed")
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"status": st, "response": json.RawMessage(b)})
	}
}

func readAll(r *http.Request) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(http.MaxBytesReader(nil, r.Body, 1<<20))
	return bytes.TrimSpace(b.Bytes()), err
}
