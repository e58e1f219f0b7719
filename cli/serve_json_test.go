package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	v1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/testsupport/lgtest"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// jsonCaller posts the API's JSON, as curl or any HTTP client does, with
// one serve --dev identity's certificate.
type jsonCaller struct {
	t    *testing.T
	base string
	http map[string]*http.Client
	doc  *bytes.Buffer
	seen map[string]bool
	// subst replaces what varies inside free text (a lease ID, the etcd
	// prefix) with its placeholder.
	subst []string
}

func newJSONCaller(t *testing.T, base, dir string) *jsonCaller {
	t.Helper()
	j := &jsonCaller{t: t, base: base, http: map[string]*http.Client{}, doc: &bytes.Buffer{}, seen: map[string]bool{}}
	for _, who := range []string{"worker", "worker-2", "approver", "operator"} {
		cfg, err := client.TLSConfig(filepath.Join(dir, "ca.pem"), filepath.Join(dir, who+".pem"), filepath.Join(dir, who+"-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		j.http[who] = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg.Clone(), ForceAttemptHTTP2: true}, Timeout: lgtest.Timeout}
	}
	return j
}

// call posts body to /leasegate.v1.<procedure> as who, writes the request
// and the answer into the transcript, and returns the answer, which must
// have the HTTP status want.
func (j *jsonCaller) call(who, procedure, body string, want int) map[string]any {
	j.t.Helper()
	status, answer := j.raw(who, "/leasegate.v1."+procedure, "application/json", body)
	j.seen[procedure] = true
	var out map[string]any
	if err := json.Unmarshal(answer, &out); err != nil {
		j.t.Fatalf("%s answered %d %q: %v", procedure, status, answer, err)
	}
	if status != want {
		j.t.Fatalf("%s answered %d %s, want %d", procedure, status, answer, want)
	}
	fmt.Fprintf(j.doc, "### `%s` (%s)\n\n```sh\ncurl -s $C_%s $GW/leasegate.v1.%s -d '%s'\n```\n\n", procedure, who, strings.ReplaceAll(strings.ToUpper(who), "-", "_"), procedure, j.normalize(body))
	fmt.Fprintf(j.doc, "HTTP %d\n\n```json\n%s\n```\n\n", status, pretty(j.normalize(string(answer))))
	return out
}

func (j *jsonCaller) raw(who, path, contentType, body string, header ...string) (int, []byte) {
	j.t.Helper()
	req, err := http.NewRequest(http.MethodPost, j.base+path, strings.NewReader(body))
	if err != nil {
		j.t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := j.http[who].Do(req)
	if err != nil {
		j.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		j.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// What changes from one run to the next becomes a placeholder: tokens,
// leases, revisions and epochs, times, the realm.
var varying = regexp.MustCompile(`"(token|sessionToken|lease|realm|revision|epoch|fenceEpoch|proposedEpoch|at|observedAt|deadline|authorizedAt|dispatchedAt|dispatchId|dispatchLease|stopWithin|ttlLeftSeconds|grantedTtlSeconds|clusterId|raftIndex|approvalDigest)":("[^"]*"|-?[0-9]+)`)

var refusalBytes = regexp.MustCompile(`("type":"leasegate.v1.Refusal","value":)"[^"]*"`)

func (j *jsonCaller) normalize(s string) string {
	s = strings.NewReplacer(j.subst...).Replace(s)
	s = refusalBytes.ReplaceAllString(s, `$1"<the Refusal, binary, base64>"`)
	return varying.ReplaceAllStringFunc(s, func(m string) string {
		k := m[1 : strings.Index(m[1:], `"`)+1]
		return fmt.Sprintf(`"%s":"<%s>"`, k, k)
	})
}

func pretty(s string) string {
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(s), "", "  "); err != nil {
		return s
	}
	return b.String()
}

// A value of the answer at a path of keys.
func at(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		v = v.(map[string]any)[k]
	}
	return v
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestTheJSONWalkthrough calls every unary procedure of the API with the
// JSON that curl or any language's HTTP client sends, against serve --dev,
// and keeps docs/api-json.md — one full request and answer per call —
// equal to what the gateway answered (LEASEGATE_UPDATE_DOCS=1 rewrites it).
// It fails when a unary procedure of the proto has no example.
func TestTheJSONWalkthrough(t *testing.T) {
	e := newEnv(t)
	address, dir := serveDev(t, e)
	j := newJSONCaller(t, address, dir)
	j.subst = append(j.subst, e.prefix, "/<prefix>")
	fmt.Fprintf(j.doc, "## The worker\n\n")
	s := j.call("worker", "WorkerService/OpenSession", `{"ttl":"10s"}`, 200)
	tok := at(s, "renewal", "token").(string)
	lease := at(s, "session", "lease").(string)
	j.subst = append(j.subst, lease, "<lease>")
	s = j.call("worker", "WorkerService/RenewSession", `{"sessionToken":"`+tok+`"}`, 200)
	tok = at(s, "renewal", "token").(string)
	g := at(j.call("worker", "WorkerService/Claim", `{"sessionToken":"`+tok+`","tenant":"demo","task":"checkout"}`, 200), "grant")
	grant := js(g)
	j.call("worker", "WorkerService/GetOwnership", `{"tenant":"demo","task":"checkout"}`, 200)
	j.call("worker", "WorkerService/ListTasks", `{"tenant":"demo"}`, 200)
	j.call("worker", "WorkerService/RenewGrant", `{"grant":`+grant+`}`, 200)
	j.call("worker", "WorkerService/Commit", `{"grant":`+grant+`,"operation":"op-1","value":"aGVsbG8=","expectedVersion":"0"}`, 200)
	j.call("worker", "WorkerService/GetState", `{"tenant":"demo","task":"checkout"}`, 200)
	effect := `{"kind":"dns.upsert","target":"checkout.example","paramsJson":"{\"value\":\"db-2\"}","policy":"v1"}`
	pre := at(j.call("worker", "WorkerService/ObservePrecondition", `{"grant":`+grant+`,"effect":`+effect+`}`, 200), "precondition")
	rec := at(j.call("worker", "WorkerService/Propose", `{"grant":`+grant+`,"operation":"dns-1","effect":`+effect+`,"precondition":`+js(pre)+`}`, 200), "record").(map[string]any)
	j.call("worker", "WorkerService/GetRecord", `{"tenant":"demo","task":"checkout","operation":"dns-1"}`, 200)
	j.call("worker", "WorkerService/ListRecords", `{"tenant":"demo","task":"checkout","state":"PROPOSED"}`, 200)

	fmt.Fprintf(j.doc, "## The approver\n\nAn approver reads the record through its own service (the effect, its parameters and their digest, the precondition and when it was observed: docs/ledger.md, \"The effect digest\", says how to recompute the digest), then approves the exact digests it read (its own certificate: a worker cannot).\n\n")
	j.call("approver", "ApproverService/ListRecords", `{"tenant":"demo","task":"checkout","state":"PROPOSED"}`, 200)
	j.call("approver", "ApproverService/GetRecord", `{"tenant":"demo","task":"checkout","operation":"dns-1"}`, 200)
	fmt.Fprintf(j.doc, "It reads the tenant's tasks through its own service, as a worker does (so does an operator, through OperatorService).\n\n")
	j.call("approver", "ApproverService/ListTasks", `{"tenant":"demo"}`, 200)
	j.call("approver", "ApproverService/GetOwnership", `{"tenant":"demo","task":"checkout"}`, 200)
	j.call("approver", "ApproverService/Authorize", fmt.Sprintf(`{"tenant":"demo","task":"checkout","operation":"dns-1","paramsDigest":%q,"preconditionDigest":%q,"note":"checked the evidence"}`,
		rec["paramsDigest"], at(rec, "precondition", "digest")), 200)

	fmt.Fprintf(j.doc, "## The worker dispatches\n\n")
	j.call("worker", "WorkerService/Dispatch", `{"grant":`+grant+`,"operation":"dns-1"}`, 200)
	j.call("worker", "WorkerService/Reconcile", `{"grant":`+grant+`}`, 200)
	fmt.Fprintf(j.doc, "A change can require another adapter's world (`requires`): here checkout → db-1 only while the topology shows writer db-1, the precondition ObservePrecondition answered for the topology's effect. The gateway observes it again at dispatch, after the claim, and sends nothing if the writer moved (docs/gateway.md, \"Traffic follows the writer, at the gateway\").\n\n")
	topology := `{"kind":"db.promote","target":"cluster","policy":"v1"}`
	writer := at(j.call("worker", "WorkerService/ObservePrecondition", `{"grant":`+grant+`,"effect":`+topology+`}`, 200), "precondition")
	toWriter := `{"kind":"dns.upsert","target":"checkout.example","paramsJson":"{\"value\":\"db-1\"}","policy":"v1"}`
	j.call("worker", "WorkerService/Propose", `{"grant":`+grant+`,"operation":"dns-2","effect":`+toWriter+`,"precondition":`+js(pre)+
		`,"requires":[{"effect":`+topology+`,"precondition":`+js(writer)+`}]}`, 200)
	j.call("approver", "ApproverService/Reject", `{"tenant":"demo","task":"checkout","operation":"dns-2","reason":"not during the freeze"}`, 200)

	fmt.Fprintf(j.doc, "## The operator\n\n")
	j.call("operator", "OperatorService/ListRecords", `{"tenant":"demo","task":"checkout"}`, 200)
	j.call("operator", "OperatorService/GetRecord", `{"tenant":"demo","task":"checkout","operation":"dns-1"}`, 200)
	j.call("operator", "OperatorService/ShowRealm", `{}`, 200)
	j.call("operator", "OperatorService/ListTasks", `{"tenant":"demo"}`, 200)
	j.call("operator", "OperatorService/GetOwnership", `{"tenant":"demo","task":"checkout"}`, 200)
	j.call("operator", "OperatorService/ListLeases", `{}`, 200)
	j.call("operator", "OperatorService/ShowLease", `{"lease":"`+lease+`"}`, 200)
	fmt.Fprintf(j.doc, "`Resolve` settles a record in `MANUAL_REVIEW` with the provider's evidence; of a confirmed record it is refused, as every refusal is: an HTTP error status and a `leasegate.v1.Refusal` detail.\n\n")
	j.call("operator", "OperatorService/Resolve", `{"tenant":"demo","task":"checkout","operation":"dns-1","to":"FAILED","why":"checked the provider","evidence":{"providerIds":["dns.upsert-1"],"detailJson":"{\"record\":\"absent\"}"},"grant":`+grant+`}`, 400)

	fmt.Fprintf(j.doc, "## The end of a session\n\n")
	j.call("worker", "WorkerService/Release", `{"grant":`+grant+`}`, 200)
	j.call("worker", "WorkerService/CloseSession", `{"sessionToken":"`+tok+`"}`, 200)
	s = j.call("worker-2", "WorkerService/OpenSession", `{"ttl":"10s"}`, 200)
	lease2 := at(s, "session", "lease").(string)
	j.subst = append(j.subst, lease2, "<lease of worker-2>")
	j.call("worker-2", "WorkerService/Claim", `{"sessionToken":"`+at(s, "renewal", "token").(string)+`","tenant":"demo","task":"invoices"}`, 200)
	fmt.Fprintf(j.doc, "An operator revokes a worker's lease: every task it holds is free at once, and the worker's next fenced call is refused `expired_owner`.\n\n")
	j.call("operator", "OperatorService/RevokeLease", `{"lease":"`+lease2+`"}`, 200)
	j.call("operator", "OperatorService/RotateRealm", `{}`, 200)

	fmt.Fprintf(j.doc, "## Refusals that come before the call\n\n")
	for _, c := range []struct {
		what, path, ct, body string
		header               []string
		want                 int
	}{
		{"JSON that does not parse", "/leasegate.v1.WorkerService/GetState", "application/json", `{"tenant":`, nil, 400},
		{"a field the API does not have", "/leasegate.v1.WorkerService/GetState", "application/json", `{"tenant":"demo","tsak":"checkout"}`, nil, 400},
		{"a value of the wrong type", "/leasegate.v1.WorkerService/GetState", "application/json", `{"tenant":7}`, nil, 400},
		{"a body that says it is gzip and is not", "/leasegate.v1.WorkerService/GetState", "application/json", `{"tenant":"demo"}`, []string{"Content-Encoding", "gzip"}, 400},
		{"a Content-Type the API does not speak", "/leasegate.v1.WorkerService/GetState", "text/plain", `{"tenant":"demo"}`, nil, 415},
		{"a path that is no procedure", "/leasegate.v1.WorkerService/GetStates", "application/json", `{"tenant":"demo"}`, nil, 404},
	} {
		status, body := j.raw("worker", c.path, c.ct, c.body, c.header...)
		if status != c.want {
			t.Errorf("%s: HTTP %d %s, want %d", c.what, status, body, c.want)
		}
		if len(body) == 0 {
			body = []byte("(empty)")
		}
		h := ""
		if len(c.header) > 0 {
			h = fmt.Sprintf(", `%s: %s`", c.header[0], c.header[1])
		}
		fmt.Fprintf(j.doc, "%s (`%s`, `Content-Type: %s`%s, `%s`): HTTP %d\n\n```\n%s\n```\n\n", c.what, c.path, c.ct, h, c.body, status, strings.TrimSpace(pretty(j.normalize(string(body)))))
	}

	var missing []string
	for _, svc := range []protoreflect.ServiceDescriptor{
		v1.File_leasegate_v1_leasegate_proto.Services().ByName("WorkerService"),
		v1.File_leasegate_v1_leasegate_proto.Services().ByName("ApproverService"),
		v1.File_leasegate_v1_leasegate_proto.Services().ByName("OperatorService"),
	} {
		for i := 0; i < svc.Methods().Len(); i++ {
			m := svc.Methods().Get(i)
			if m.IsStreamingClient() || m.IsStreamingServer() {
				continue // docs/clients.md: streams
			}
			if p := string(svc.Name()) + "/" + string(m.Name()); !j.seen[p] {
				missing = append(missing, p)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/api-json.md has no example of %v: add a call to TestTheJSONWalkthrough", missing)
	}

	doc := "# The API's JSON, one call at a time\n\n" +
		"Written by `TestTheJSONWalkthrough` (cli/serve_json_test.go) from a real run against `leasegate serve --dev`:\n" +
		"every unary call with the JSON any HTTP client sends and the gateway's answer. What changes from run to run\n" +
		"(tokens, leases, revisions, epochs, times, the realm) is shown as `\"<name>\"`. The mapping, the streams and the\n" +
		"error model are in [clients.md](clients.md). With serve --dev's directory in `$D`:\n\n" +
		"```sh\nGW=https://127.0.0.1:7443; D=/tmp/lg\n" +
		"for who in worker worker-2 approver operator; do\n" +
		"  v=C_$(echo $who | tr a-z- A-Z_); eval \"$v=\\\"--cacert $D/ca.pem --cert $D/$who.pem --key $D/$who-key.pem -H content-type:application/json\\\"\"\n" +
		"done\n```\n\n" + j.doc.String()
	const path = "../docs/api-json.md"
	if os.Getenv("LEASEGATE_UPDATE_DOCS") != "" {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(path)
	if err != nil || string(have) != doc {
		t.Errorf("docs/api-json.md is not what the gateway answers now (%v): run LEASEGATE_UPDATE_DOCS=1 go test ./cli -run TestTheJSONWalkthrough", err)
	}
}
