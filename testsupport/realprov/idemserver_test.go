package realprov_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/leasegate/leasegate/testsupport/lgtest"
	"github.com/leasegate/leasegate/testsupport/realprov"
)

func post(t *testing.T, s *realprov.IdemServer, key, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/records/checkout", bytes.NewBufferString(body))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed")
}

// The draft's answers: a repeated key replays the first answer and applies
// nothing again; another payload under the key is 422; a duplicate while
// the first is processing is 409; no key is 400.
func TestIdemServerAnswersAsTheDraftSays(t *testing.T) {
	s := realprov.NewIdemServer(t, map[string]string{"checkout": "db-a"})
	st, first, _ := post(t, s, "k1", `{"value":"db-b"}`)
	if st != http.StatusCreated {
		t.Fatalf("first: %d %s", st, first)
	}
	st, again, replayed := post(t, s, "k1", `{"value":"db-b"}`)
	if st != http.StatusCreated || again != first || replayed != "true" || s.Applied("k1") != 1 {
		t.Fatalf("repeat: %d %s replayed=%q applied %d; want the first answer replayed", st, again, replayed, s.Applied("k1"))
	}
	if st, _, _ := post(t, s, "k1", `{"value":"db-c"}`); st != http.StatusUnprocessableEntity || s.Value("checkout") != "db-b" {
		t.Fatalf("other payload: %d, value %s", st, s.Value("checkout"))
	}
	if st, _, _ := post(t, s, "", `{"value":"db-c"}`); st != http.StatusBadRequest {
		t.Fatalf("no key: %d", st)
	}
	held, release := s.HoldNext()
	done := make(chan int)
	go func() {
		st, _, _ := post(t, s, "k2", `{"value":"db-c"}`)
		done <- st
	}()
	lgtest.Wait(t, held, "the first request processing")
	if st, _, _ := post(t, s, "k2", `{"value":"db-c"}`); st != http.StatusConflict {
		t.Fatalf("concurrent duplicate: %d, want 409", st)
	}
	release()
	if st := <-done; st != http.StatusCreated || s.Applied("k2") != 1 {
		t.Fatalf("held request: %d, applied %d", st, s.Applied("k2"))
	}
}
