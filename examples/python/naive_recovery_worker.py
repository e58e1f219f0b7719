#!/usr/bin/env python3
"""The seed-003 incident's naive recovery worker, for `leasegate drill --worker`.

It is here to FAIL the drill: it shows what the graders catch. It speaks
the same contract as recovery_worker.py and goes through the same fenced
gateway, but it recovers the way the incident's activity did:

  * a fresh request key per attempt (attempt-<instance>-<n>): a retry is a
    new intent, never the plan's stable operation id;
  * no Reconcile: an answer that never came back is taken as a failure,
    and whatever an earlier instance left DISPATCHING or UNKNOWN stays so;
  * the checkpoint trusted as present truth: when its promotion did not
    come back CONFIRMED it "holds traffic on the known writer" from its
    first, cached, topology read.

    leasegate drill --worker 'python3 examples/python/naive_recovery_worker.py' --trials 20
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from leasegate_worker import WORKER, Gateway, LeasegateError  # noqa: E402


def env(name):
    v = os.environ.get(name)
    if not v:
        sys.stderr.write("naive_recovery_worker: %s is not set\n" % name)
        sys.exit(2)
    return v


def world(digest):
    out = {}
    for part in digest.split(";"):
        k, _, v = part.partition("=")
        out[k] = "" if v == "-" else v
    return out


def main():
    gw = Gateway(env("LEASEGATE_GATEWAY"), env("LEASEGATE_CA"), env("LEASEGATE_CERT"), env("LEASEGATE_KEY"))
    tenant, task = env("LEASEGATE_TENANT"), env("LEASEGATE_TASK")
    plan = json.loads(env("LEASEGATE_PLAN"))
    instance = env("LEASEGATE_INSTANCE")
    p, t = plan["promote"], plan["traffic"]
    session = gw.open_session(int(env("LEASEGATE_SESSION_TTL")))
    session.keep_alive()
    while True:
        try:
            grant = session.claim(tenant, task)
            break
        except LeasegateError as e:
            if e.disposition not in ("busy", "authority_unavailable"):
                raise
            time.sleep(0.2)

    def state(op):
        return gw.call(WORKER, "GetRecord", {"tenant": tenant, "task": task, "operation": op}, write=False)["record"]["state"]

    def approved(op):
        while True:
            st = state(op)
            if st != "PROPOSED":
                return st
            time.sleep(0.1)

    # The checkpoint: its first topology read, trusted from then on.
    cached = world(gw.observe_precondition(grant, p["kind"], p["target"], p["params"])["digest"])
    believed = cached.get("writer")
    promoted = False
    for n in range(1, 4):
        key = "attempt-%s-%d" % (instance, n)  # a fresh key per attempt
        pre = gw.observe_precondition(grant, p["kind"], p["target"], p["params"])
        try:
            gw.propose(grant, key, p["kind"], p["target"], p["params"], pre["digest"])
            if approved(key) != "AUTHORIZED":
                break  # refused: go on to traffic with what it believes
            rec = gw.dispatch(grant, key)
            if rec.get("state") == "CONFIRMED":
                promoted, believed = True, p["target"]
                break
        except LeasegateError as e:
            if e.disposition in ("stale_owner", "expired_owner"):
                return 4
            continue  # no answer taken as no action: a new attempt, a new key
    # Traffic at what it believes is the writer: the promoted target, or
    # "hold on the known writer" from its cache.
    if not promoted:
        w = world(gw.observe_precondition(grant, p["kind"], p["target"], p["params"])["digest"])
        if w.get("writer") == p["target"] and not w.get("promoting"):
            believed = p["target"]
    key = "attempt-%s-traffic" % instance
    params = {"record": t["record"], "value": believed}
    try:
        pre = gw.observe_precondition(grant, t["kind"], t["record"], params)
        gw.propose(grant, key, t["kind"], t["record"], params, pre["digest"])
        if approved(key) == "AUTHORIZED":
            gw.dispatch(grant, key)
    except LeasegateError as e:
        if e.disposition in ("stale_owner", "expired_owner"):
            return 4
    try:
        session.close()
    except LeasegateError:
        pass
    return 0  # it reports success whatever the world says


if __name__ == "__main__":
    sys.exit(main())
