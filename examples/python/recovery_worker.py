#!/usr/bin/env python3
"""A recovery worker for `leasegate drill --worker` (standard library only).

It follows the drill's worker contract (docs/drill.md, "Drilling your own
worker"): everything it needs is in its environment, it acts only through
the gateway, and its exit code says how it ended:

  0  done: the checkout record points at the writer, as the gateway reads it
  2  it could not use what it was given (a missing variable, a bad plan)
  3  held: the commander refused, a record waits in MANUAL_REVIEW, an
     operator edited the record by hand, or etcd could not be reached
  4  fenced: another instance holds the task (stale_owner, expired_owner)

What makes it safe is the seed-003 lesson, in this order:

  1. claim the task, then Reconcile: whatever an earlier instance left
     DISPATCHING or UNKNOWN is settled by the gateway from the provider's
     authority before anything new is sent;
  2. adopt the promotion record if one exists, under the plan's stable
     operation id — never mint a new key for a retry; a lost answer
     (outcome_unknown) is settled by Reconcile, not by sending again;
  3. only after the topology shows the target as the writer, point traffic
     at it, against the record's value as the provider shows it now; over
     an operator's edit it only proposes: the commander rules whether the
     edit was a holding action to go on from, and its refusal is a hold;
  4. stop at the first refusal of the fence: another instance owns it now.

    leasegate drill --worker 'python3 examples/python/recovery_worker.py' --trials 20
"""

import http.client
import json
import os
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from leasegate_worker import WORKER, Gateway, LeasegateError, refusal  # noqa: E402

EXIT_DONE, EXIT_USAGE, EXIT_HELD, EXIT_FENCED = 0, 2, 3, 4
FENCED = ("stale_owner", "expired_owner")


class KeepAliveGateway(Gateway):
    """The module's Gateway with one kept-alive HTTPS connection per thread
    (the session's renewals run on a thread of their own): a worker that
    polls pays one TLS handshake, not one per call. The dispositions are
    the module's: nothing sent is a hold; a write sent without an answer
    is outcome_unknown."""

    def __init__(self, url, ca, cert, key, timeout):
        super().__init__(url, ca, cert, key, timeout)
        u = urllib.parse.urlsplit(self.url)
        self.host, self.port, self.base = u.hostname, u.port or 443, u.path
        self.local = threading.local()

    def call(self, service, method, body, write=True):
        conn = getattr(self.local, "conn", None)
        sent = False
        try:
            if conn is None:
                conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=self.timeout)
                conn.connect()
                self.local.conn = conn
            sent = True
            conn.request("POST", "%s/%s/%s" % (self.base, service, method), body=json.dumps(body).encode(),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException) as e:
            if conn is not None:
                conn.close()
            self.local.conn = None
            if not sent or not write:
                raise LeasegateError("authority_unavailable", "not answered: %s" % e, "hold: nothing was written; retry later")
            raise LeasegateError("outcome_unknown", "sent, no answer: %s" % e,
                                 "it may have applied; retry the same operation to learn")
        if resp.status == 200:
            return json.loads(raw or b"{}")
        raise refusal(resp.status, raw, write)


class Held(Exception):
    """The worker stops for the commander: traffic is held."""


def env(name):
    v = os.environ.get(name)
    if not v:
        sys.stderr.write("recovery_worker: %s is not set (run me under leasegate drill --worker)\n" % name)
        sys.exit(EXIT_USAGE)
    return v


def world(digest):
    """The fields of an observation digest: writer=X;promoting=Y[;record=Z]."""
    out = {}
    for part in digest.split(";"):
        k, _, v = part.partition("=")
        out[k] = "" if v == "-" else v
    return out


class Recovery:
    def __init__(self):
        # A Reconcile may poll the provider for a while: a long timeout.
        self.gw = KeepAliveGateway(env("LEASEGATE_GATEWAY"), env("LEASEGATE_CA"), env("LEASEGATE_CERT"),
                                   env("LEASEGATE_KEY"), timeout=60.0)
        self.tenant, self.task = env("LEASEGATE_TENANT"), env("LEASEGATE_TASK")
        try:
            self.plan = json.loads(env("LEASEGATE_PLAN"))
            self.promote = self.plan["promote"]
            self.traffic = self.plan["traffic"]
            self.original = self.plan["original_writer"]
        except (ValueError, KeyError) as e:
            sys.stderr.write("recovery_worker: bad LEASEGATE_PLAN: %s\n" % e)
            sys.exit(EXIT_USAGE)
        self.ttl = int(env("LEASEGATE_SESSION_TTL"))
        self.grant = None

    # -- gateway reads -----------------------------------------------------

    def records(self):
        out = self.gw.call(WORKER, "ListRecords", {"tenant": self.tenant, "task": self.task}, write=False)
        return out.get("records", [])

    def record(self, op):
        out = self.gw.call(WORKER, "GetRecord", {"tenant": self.tenant, "task": self.task, "operation": op}, write=False)
        return out["record"]

    def topology(self):
        p = self.promote
        pre = self.gw.observe_precondition(self.grant, p["kind"], p["target"], p["params"])
        return world(pre["digest"])

    def traffic_view(self, value):
        t = self.traffic
        pre = self.gw.observe_precondition(self.grant, t["kind"], t["record"], {"record": t["record"], "value": value})
        return pre["digest"], world(pre["digest"])

    # -- the steps -----------------------------------------------------------

    def claim(self):
        self.session = self.gw.open_session(self.ttl)
        self.session.keep_alive()
        deadline = time.monotonic() + 120
        while True:
            try:
                self.grant = self.session.claim(self.tenant, self.task)
                return
            except LeasegateError as e:
                if e.disposition in ("busy", "authority_unavailable") and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                raise

    def reconcile(self):
        """Settles what an earlier instance left, until nothing is UNKNOWN.
        A change still PENDING stays UNKNOWN: keep reconciling, never send
        it again under another id."""
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                recs = self.gw.reconcile(self.grant)
            except LeasegateError as e:
                if e.disposition in FENCED:
                    raise
                time.sleep(0.2)  # a hold, or the answer lost: reconcile again
                continue
            if not any(r.get("state") in ("UNKNOWN", "DISPATCHING") for r in recs):
                return
            time.sleep(0.2)
        raise Held("records stay UNKNOWN after reconciling")

    def settle(self, op):
        """Drives one record to an end state through approvals and the
        gateway's dispatch; returns its final state."""
        for _ in range(6000):
            try:
                rec = self.record(op)
            except LeasegateError as e:
                if e.disposition != "authority_unavailable":
                    raise
                time.sleep(0.2)  # a read not answered: nothing changed; look again
                continue
            st = rec.get("state")
            if st == "AUTHORIZED":
                try:
                    self.gw.dispatch(self.grant, op)
                except LeasegateError as e:
                    if e.disposition in FENCED:
                        raise
                    # outcome_unknown: the answer was lost, not the effect.
                    # Never send again under a new key: reconcile it.
                    self.reconcile()
                continue
            if st in ("DISPATCHING", "UNKNOWN"):
                self.reconcile()
                continue
            if st in ("PROPOSED", "MANUAL_REVIEW"):
                time.sleep(0.25)  # the commander decides
                continue
            return st
        raise Held("%s never settled" % op)

    def recover_promotion(self):
        p = self.promote
        target = p["target"]
        ops = [r for r in self.records() if r.get("effect", {}).get("kind") == p["kind"]]
        for attempt in range(1, 4):
            if not ops:
                w = self.topology()
                if w.get("writer") == target:
                    return  # already promoted (out of band, or by an earlier record)
                op = p["operation"] if attempt == 1 else "%s/%d" % (p["operation"], attempt)
                pre = self.gw.observe_precondition(self.grant, p["kind"], target, p["params"])
                self.gw.propose(self.grant, op, p["kind"], target, p["params"], pre["digest"])
                ops = [{"operation": op}]
            st = self.settle(ops[-1]["operation"])
            w = self.topology()
            if st == "CONFIRMED" or w.get("writer") == target or w.get("promoting") == target:
                return
            if st == "FAILED":
                ops = []  # shown never applied: a new intent is legitimate
                continue
            if st == "SUPERSEDED":
                ops = []  # the world moved under the approval: look again
                continue
            raise Held("promotion %s ended %s" % (ops[-1]["operation"], st))
        raise Held("no promotion after 3 intents")

    def wait_writer(self):
        target = self.promote["target"]
        for _ in range(3000):
            w = self.topology()
            if w.get("writer") == target and not w.get("promoting"):
                return target
            time.sleep(0.25)
        raise Held("the topology never showed %s as the writer" % target)

    def recover_traffic(self, writer):
        """Points the record at the writer. Over a value nobody in the
        workflow set (an operator's edit) it still only proposes: whether
        the edit was a holding action the workflow may go on from (a
        maintenance page) or a routing decision that stands is the
        commander's call, and its refusal is a hold."""
        t = self.traffic
        prefix = t["operation_prefix"]
        for _ in range(6):
            mine = [r for r in self.records() if r.get("effect", {}).get("kind") == t["kind"]]
            digest, w = self.traffic_view(writer)
            if w.get("record") == writer:
                return
            open_ = [r for r in mine if r.get("state") in ("PROPOSED", "AUTHORIZED")]
            if open_:
                op = open_[-1]["operation"]
            else:
                op = "%s%d" % (prefix, len(mine) + 1)
                self.gw.propose(self.grant, op, t["kind"], t["record"], {"record": t["record"], "value": writer}, digest)
            st = self.settle(op)
            if st == "REJECTED":
                raise Held("the commander refused traffic change %s (the record is %s)" % (op, w.get("record")))
        raise Held("traffic never reached the writer")

    def run(self):
        try:
            self.claim()
            self.reconcile()
            self.recover_promotion()
            writer = self.wait_writer()
            self.recover_traffic(writer)
            _, w = self.traffic_view(writer)
            if w.get("record") != writer:
                raise Held("verification: the record is %s, not the writer %s" % (w.get("record"), writer))
            return EXIT_DONE
        except LeasegateError as e:
            if e.disposition in FENCED:
                sys.stderr.write("recovery_worker: fenced out: %s\n" % e)
                return EXIT_FENCED
            if e.disposition in ("authority_unavailable", "outcome_unknown"):
                sys.stderr.write("recovery_worker: hold: %s\n" % e)
                return EXIT_HELD
            raise
        except Held as e:
            sys.stderr.write("recovery_worker: held for the commander: %s\n" % e)
            return EXIT_HELD
        finally:
            if getattr(self, "session", None) is not None:
                try:
                    self.session.close()
                except LeasegateError:
                    pass


if __name__ == "__main__":
    sys.exit(Recovery().run())
