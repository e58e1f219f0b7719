// A leasegate worker in TypeScript, and the approver beside it: the walk
// through the API that clients/typescript's test runs against
// `leasegate serve --dev`.
//
//   node dist/examples/worker.js --gateway https://127.0.0.1:7443 --dir /tmp/lg \
//     --tenant demo --task checkout [--ttl 10]
//
// --dir is serve --dev's directory: the worker presents worker.pem, the
// approver approver.pem, both trusting ca.pem. The worker opens a session
// (kept alive), claims the task, commits, observes the precondition through
// the gateway, proposes a DNS change, has it authorized by the approver
// (its own certificate: a worker cannot approve), dispatches it, proposes
// and authorizes a second one, then prints {"event":"ready"} and waits for
// one line on stdin before dispatching the second. Paused in between past
// its TTL (SIGSTOP, while another worker claims the task), its dispatch is
// refused stale_owner and nothing reaches the provider. Each step prints
// one JSON line on stdout.

import { parseArgs } from "node:util";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import { call, connectGateway, LeasegateError, Session, type EffectRecord, type Grant } from "../index.js";

const { values: a } = parseArgs({
  options: {
    gateway: { type: "string" },
    dir: { type: "string" },
    tenant: { type: "string", default: "demo" },
    task: { type: "string", default: "checkout" },
    ttl: { type: "string", default: "10" },
  },
});
if (!a.gateway || !a.dir) {
  process.stderr.write("usage: worker.js --gateway URL --dir SERVE_DEV_DIR [--tenant T] [--task T] [--ttl SECONDS]\n");
  process.exit(2);
}
const dir = a.dir;
const tenant = a.tenant!;
const task = a.task!;
const ca = join(dir, "ca.pem");
const worker = connectGateway({ url: a.gateway, ca, cert: join(dir, "worker.pem"), key: join(dir, "worker-key.pem") });
const approver = connectGateway({ url: a.gateway, ca, cert: join(dir, "approver.pem"), key: join(dir, "approver-key.pem") });

function say(event: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(JSON.stringify({ event, ...fields }, (_k, v) => (typeof v === "bigint" ? v.toString() : v)) + "\n");
}

const stdin = createInterface({ input: process.stdin });
const lines = stdin[Symbol.asyncIterator]();

async function propose(g: Grant, operation: string, value: string): Promise<EffectRecord> {
  const effect = { kind: "dns.upsert", target: "checkout.example", paramsJson: JSON.stringify({ value }), policy: "v1" };
  // The world the change depends on, read by the gateway's adapter with the
  // server's credentials (the worker has none): its digest is the precondition.
  const obs = await call(false, () => worker.worker.observePrecondition({ grant: g, effect }));
  const out = await call(true, () =>
    worker.worker.propose({ grant: g, operation, effect, precondition: { digest: obs.precondition?.digest ?? "", observedAt: timestampNow() } }),
  );
  if (!out.record) throw new LeasegateError("outcome_unknown", "Propose answered without a record", "", "");
  return out.record;
}

async function authorize(rec: EffectRecord): Promise<EffectRecord> {
  // The approver approves the exact digests it was shown.
  const out = await call(true, () =>
    approver.approver.authorize({
      tenant: rec.tenant,
      task: rec.task,
      operation: rec.operation,
      paramsDigest: rec.paramsDigest,
      preconditionDigest: rec.precondition?.digest ?? "",
      note: "typescript example",
    }),
  );
  if (!out.record) throw new LeasegateError("outcome_unknown", "Authorize answered without a record", "", "");
  return out.record;
}

async function main(): Promise<void> {
  const s = await Session.open(worker, Number(a.ttl) * 1000);
  s.keepAlive();
  const g = await s.claim(tenant, task);
  say("claimed", { grant: g, lease: s.lease });

  const receipt = await call(true, () =>
    worker.worker.commit({ grant: g, operation: "c-1", value: new TextEncoder().encode("hello"), expectedVersion: 0n }),
  );
  say("committed", { receipt: receipt.receipt });

  const r1 = await propose(g, "dns-1", "db-2");
  say("proposed", { operation: r1.operation, state: r1.state, paramsDigest: r1.paramsDigest, precondition: r1.precondition?.digest });
  say("authorized", { state: (await authorize(r1)).state });
  const d1 = await call(true, () => worker.worker.dispatch({ grant: g, operation: "dns-1" }));
  say("dispatched", { operation: "dns-1", state: d1.record?.state, providerIds: d1.record?.evidence?.providerIds });

  const r2 = await propose(g, "dns-2", "db-3");
  await authorize(r2);
  say("ready", { operation: "dns-2" });
  await lines.next(); // the test pauses this process here, past its TTL

  try {
    const d2 = await call(true, () => worker.worker.dispatch({ grant: g, operation: "dns-2" }));
    say("dispatched", { operation: "dns-2", state: d2.record?.state });
  } catch (err) {
    if (!(err instanceof LeasegateError)) throw err;
    say("refused", { operation: "dns-2", disposition: err.disposition, code: err.code, detail: err.detail, hint: err.hint });
  }
  try {
    await s.close();
  } catch (err) {
    // The lease is gone already: closing it is refused, which is the point.
    if (!(err instanceof LeasegateError)) throw err;
  }
  say("closed", { lost: s.lost ?? "" });
  stdin.close();
}

main().catch((err: unknown) => {
  const e = err instanceof LeasegateError ? err : new LeasegateError("internal", String(err), "", "");
  say("error", { disposition: e.disposition, detail: e.detail, hint: e.hint, code: e.code });
  process.exit(1);
});
