#!/usr/bin/env python3
"""A leasegate worker in Python with the standard library only (urllib + ssl).

It talks to `leasegate serve` (docs/gateway.md) with JSON over HTTPS, its
identity being its client certificate. It holds no etcd and no provider
credential: the gateway holds both.

    gw = Gateway("https://127.0.0.1:7443", ca="ca.pem", cert="worker.pem", key="worker-key.pem")
    session = gw.open_session(ttl_seconds=10)   # a lease, renewed only by us
    session.keep_alive()                         # one thread renews every ttl/3
    grant = session.claim("demo", "checkout")
    gw.commit(grant, "op-1", b"hello", expected_version=0)
    # The world the effect depends on, read by the gateway (we hold no
    # provider credential): the approver approves it, Dispatch revalidates it.
    pre = gw.observe_precondition(grant, kind="dns.upsert", target="checkout.example",
                                  params={"value": "db-2"})
    rec = gw.propose(grant, "dns-1", kind="dns.upsert", target="checkout.example",
                     params={"value": "db-2"}, precondition_digest=pre["digest"])
    # ... an approver authorizes it (ApproverService/Authorize) ...
    rec = gw.dispatch(grant, "dns-1")            # the gateway calls the provider

Every failure raises LeasegateError with the gateway's disposition, detail
and hint (the CLI's -o json fields). Two of them matter most:

  authority_unavailable  nothing was sent or written: hold, retry later;
  outcome_unknown        the request left and its answer was lost: it may
                         have applied; retry the SAME operation id to learn.

Run as a script it is the worker the gateway's tests drive (see main()).
"""

import base64
import http.client
import json
import socket
import ssl
import sys
import threading
import time

WORKER = "leasegate.v1.WorkerService"


class LeasegateError(Exception):
    """A call that did not succeed, with the gateway's disposition."""

    def __init__(self, disposition, detail="", hint="", code=""):
        super().__init__("%s: %s [%s]" % (disposition, hint, detail))
        self.disposition = disposition
        self.detail = detail
        self.hint = hint
        self.code = code


def _never_left(reason):
    """True when urllib's failure happened before the request was sent."""
    return isinstance(reason, (ConnectionRefusedError, ssl.SSLError, socket.gaierror, FileNotFoundError))


def refusal(status, raw, write):
    """The LeasegateError for an answer other than 200: the gateway's
    Refusal detail when it carries one; otherwise the answer is not the
    gateway's (a proxy's), and a write may have applied."""
    try:
        err = json.loads(raw)
    except ValueError:
        err = {}
    for d in err.get("details", []):
        r = d.get("debug") or {}
        if d.get("type") == "leasegate.v1.Refusal" and r.get("disposition"):
            return LeasegateError(r["disposition"], r.get("detail", ""), r.get("hint", ""), err.get("code", ""))
    return LeasegateError("outcome_unknown" if write else "authority_unavailable",
                          "HTTP %d without a refusal: %s" % (status, raw[:200]))


class Gateway:
    """A client of one gateway (or a load balancer of replicas)."""

    def __init__(self, url, ca, cert, key, timeout=10.0):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.ctx = ssl.create_default_context(cafile=ca)
        self.ctx.load_cert_chain(cert, key)

    def call(self, service, method, body, write=True):
        """POSTs one JSON call; returns the decoded answer or raises."""
        # Imported at the first call: a worker that brings its own transport
        # (recovery_worker.py's KeepAliveGateway) does not pay for urllib's
        # import at every process start (about 20 ms of CPU).
        import urllib.error
        import urllib.request
        req = urllib.request.Request(
            "%s/%s/%s" % (self.url, service, method),
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            raise refusal(e.code, e.read(), write)
        except urllib.error.URLError as e:
            if _never_left(e.reason) or not write:
                raise LeasegateError("authority_unavailable", "not answered: %s" % e.reason,
                                     "hold: nothing was written; retry later")
            raise LeasegateError("outcome_unknown", "sent, no answer: %s" % e.reason,
                                 "it may have applied; retry the same operation to learn")
        except (http.client.HTTPException, OSError) as e:
            if not write:
                raise LeasegateError("authority_unavailable", "no answer: %s" % e)
            raise LeasegateError("outcome_unknown", "sent, no answer: %s" % e,
                                 "it may have applied; retry the same operation to learn")

    def open_session(self, ttl_seconds):
        sent = time.monotonic()
        out = self.call(WORKER, "OpenSession", {"ttl": "%ds" % ttl_seconds})
        return Session(self, out["session"], out["renewal"], sent)

    def commit(self, grant, operation, value, expected_version):
        out = self.call(WORKER, "Commit", {
            "grant": grant, "operation": operation,
            "value": base64.b64encode(value).decode(), "expectedVersion": str(expected_version)})
        return out["receipt"]

    def get_state(self, tenant, task):
        return self.call(WORKER, "GetState", {"tenant": tenant, "task": task}, write=False)["state"]

    def observe_precondition(self, grant, kind, target, params, policy="v1"):
        """The world the effect depends on, now, as the gateway's adapter for
        kind reads it with the server's credentials: an Observation with its
        digest, the precondition to propose with. A read: nothing written."""
        out = self.call(WORKER, "ObservePrecondition", {
            "grant": grant,
            "effect": {"kind": kind, "target": target, "paramsJson": json.dumps(params), "policy": policy}},
            write=False)
        return out["precondition"]

    def propose(self, grant, operation, kind, target, params, precondition_digest, policy="v1"):
        out = self.call(WORKER, "Propose", {
            "grant": grant, "operation": operation,
            "effect": {"kind": kind, "target": target, "paramsJson": json.dumps(params), "policy": policy},
            "precondition": {"digest": precondition_digest,
                             "observedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}})
        return out["record"]

    def dispatch(self, grant, operation):
        return self.call(WORKER, "Dispatch", {"grant": grant, "operation": operation})["record"]

    def reconcile(self, grant):
        return self.call(WORKER, "Reconcile", {"grant": grant}).get("records", [])


class Session:
    """A lease the gateway granted us. Only our renewals keep it alive.

    Its local deadline is the monotonic time we SENT the call that granted
    or last renewed it, plus the TTL, minus the margin (and never later than
    the gateway's stop_within from its answer): past it we stop acting."""

    def __init__(self, gw, session, renewal, sent):
        self.gw = gw
        self.lease = session["lease"]
        self.owner = session["owner"]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.lost = None
        self._update(renewal, sent)

    def _update(self, renewal, sent):
        ttl = _seconds(renewal["ttl"])
        margin = _seconds(renewal.get("margin", "0s"))
        deadline = min(sent + ttl - margin, time.monotonic() + _seconds(renewal.get("stopWithin", "0s")))
        with self._lock:
            self.token, self.ttl, self.deadline = renewal["token"], ttl, deadline

    def live(self):
        with self._lock:
            return self.lost is None and time.monotonic() < self.deadline

    def renew(self):
        with self._lock:
            token = self.token
        sent = time.monotonic()
        out = self.gw.call(WORKER, "RenewSession", {"sessionToken": token})
        self._update(out["renewal"], sent)

    def keep_alive(self):
        """Renews every ttl/3 from one thread, until close() or the lease is lost."""
        def loop():
            while not self._stop.wait(self.ttl / 3.0):
                if time.monotonic() >= self.deadline:
                    self.lost = "local deadline passed without a confirmed renewal"
                    return
                try:
                    self.renew()
                except LeasegateError as e:
                    if e.disposition == "expired_owner":
                        self.lost = "lease lost: " + e.detail
                        return
        threading.Thread(target=loop, daemon=True).start()

    def claim(self, tenant, task):
        if not self.live():
            raise LeasegateError("expired_owner", "the session can no longer act: %s" % (self.lost or "past its deadline"))
        with self._lock:
            token = self.token
        return self.gw.call(WORKER, "Claim", {"sessionToken": token, "tenant": tenant, "task": task})["grant"]

    def close(self):
        self._stop.set()
        with self._lock:
            token = self.token
        self.gw.call(WORKER, "CloseSession", {"sessionToken": token})


def _seconds(d):
    """A protobuf JSON duration ("1.5s") in seconds."""
    return float(d.rstrip("s"))


def main(argv):
    """The worker the gateway's tests run: it opens a session (kept alive),
    claims --tenant/--task, then obeys one command per stdin line and
    answers one JSON line each on stdout:

        commit OP VALUE VERSION | propose OP TARGET VALUE [DIGEST] | dispatch OP | quit

    propose without DIGEST observes the precondition through the gateway
    (ObservePrecondition) and proposes with its digest.
    """
    import argparse
    p = argparse.ArgumentParser(description=main.__doc__)
    for f in ("gateway", "ca", "cert", "key", "tenant", "task"):
        p.add_argument("--" + f, required=True)
    p.add_argument("--ttl", type=int, default=10)
    a = p.parse_args(argv)
    gw = Gateway(a.gateway, a.ca, a.cert, a.key)

    def say(**kv):
        sys.stdout.write(json.dumps(kv) + "\n")
        sys.stdout.flush()

    session = gw.open_session(a.ttl)
    session.keep_alive()
    grant = session.claim(a.tenant, a.task)
    say(event="claimed", grant=grant, lease=session.lease)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        try:
            if words[0] == "commit":
                say(event="committed", receipt=gw.commit(grant, words[1], words[2].encode(), int(words[3])))
            elif words[0] == "propose":
                params = {"value": words[3]}
                if len(words) > 4:
                    digest = words[4]
                else:
                    digest = gw.observe_precondition(grant, "dns.upsert", words[2], params)["digest"]
                rec = gw.propose(grant, words[1], "dns.upsert", words[2], params, digest)
                say(event="proposed", record=rec)
            elif words[0] == "dispatch":
                say(event="dispatched", record=gw.dispatch(grant, words[1]))
            elif words[0] == "quit":
                break
        except LeasegateError as e:
            say(event="refused", disposition=e.disposition, detail=e.detail, hint=e.hint, code=e.code)
    try:
        session.close()
    except LeasegateError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
