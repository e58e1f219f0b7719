// The TypeScript client of leasegate's gateway (`leasegate serve`).
//
// The messages and service descriptors in ./gen are generated from
// api/leasegate/v1/leasegate.proto by `make generate` (buf with
// @bufbuild/protoc-gen-es, pinned in package.json); this file adds what a
// worker needs on top of them: a transport with the worker's client
// certificate, errors carrying the gateway's disposition, and a session
// that stops acting at its local deadline.
//
// Identity is the client certificate: the gateway takes the caller's
// identity from it (a SPIFFE ID in its URI SAN, else its CN), never from a
// request field. A worker holds no etcd and no provider credential.

import { readFileSync } from "node:fs";
import { create } from "@bufbuild/protobuf";
import { durationFromMs, durationMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import {
  ApproverService,
  OperatorService,
  RefusalSchema,
  WorkerService,
  type Grant,
  type Renewal,
  type Session as SessionMessage,
} from "./gen/leasegate/v1/leasegate_pb.js";

export * from "./gen/leasegate/v1/leasegate_pb.js";

/** Where the gateway is and which certificate the caller presents. */
export interface GatewayOptions {
  /** The gateway's base URL, e.g. https://127.0.0.1:7443. */
  url: string;
  /** PEM file of the CA that signed the gateway's certificate. */
  ca: string;
  /** PEM files of the caller's client certificate and key. */
  cert: string;
  key: string;
  /** Per-call timeout in milliseconds (default 10 000). */
  timeoutMs?: number;
}

/**
 * A transport to the gateway: Connect's protocol over HTTP/2 with mutual
 * TLS. One transport holds one HTTP/2 connection; the gateway closes a
 * connection idle for 5 minutes, and connect-node opens a new one on the
 * next call.
 */
export function gatewayTransport(o: GatewayOptions): Transport {
  return createConnectTransport({
    baseUrl: o.url,
    httpVersion: "2",
    defaultTimeoutMs: o.timeoutMs ?? 10_000,
    nodeOptions: {
      ca: readFileSync(o.ca),
      cert: readFileSync(o.cert),
      key: readFileSync(o.key),
    },
  });
}

/** The three services of the API, each for its own audience. */
export interface Gateway {
  worker: Client<typeof WorkerService>;
  approver: Client<typeof ApproverService>;
  operator: Client<typeof OperatorService>;
}

export function connectGateway(o: GatewayOptions): Gateway {
  const t = gatewayTransport(o);
  return {
    worker: createClient(WorkerService, t),
    approver: createClient(ApproverService, t),
    operator: createClient(OperatorService, t),
  };
}

/**
 * A call that did not succeed. disposition is leasegate's word for it
 * (docs/design.md §8): stale_owner, expired_owner, busy, ... from the
 * gateway's Refusal detail; where no Refusal came back, the client's own
 * reading of the failure:
 *
 * - authority_unavailable: the request never left this process (refused
 *   connection, unknown host, a TLS failure), or it was a read. Nothing was
 *   written: hold, and retry later.
 * - outcome_unknown: a write was sent and no answer came back. It may have
 *   applied: retry the same operation id to learn what happened.
 */
export class LeasegateError extends Error {
  constructor(
    readonly disposition: string,
    readonly detail: string,
    readonly hint: string,
    /** The Connect code ("failed_precondition", ...), or "" without one. */
    readonly code: string,
    override readonly cause?: unknown,
  ) {
    super(`${disposition}: ${detail}${hint ? ` (${hint})` : ""}`);
    this.name = "LeasegateError";
  }
}

// Errors node raises before a request leaves the process.
const neverSent = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "CERT_HAS_EXPIRED",
]);

function causeCode(err: unknown): string {
  for (let e: unknown = err, i = 0; e && i < 5; i++) {
    const c = (e as { code?: unknown }).code;
    if (typeof c === "string" && neverSent.has(c)) return c;
    e = (e as { cause?: unknown }).cause;
  }
  return "";
}

const codeNames: Record<number, string> = Object.fromEntries(
  Object.entries(Code)
    .filter(([, v]) => typeof v === "number")
    .map(([k, v]) => [v as number, k.replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase()]),
);

/**
 * The LeasegateError for a failed call. write says whether the call could
 * have written (a commit, a dispatch): only then is a lost answer
 * outcome_unknown.
 */
export function refusalOf(err: unknown, write: boolean): LeasegateError {
  if (err instanceof LeasegateError) return err;
  const ce = ConnectError.from(err);
  const code = codeNames[ce.code] ?? "";
  const [r] = ce.findDetails(RefusalSchema);
  if (r && r.disposition) return new LeasegateError(r.disposition, r.detail, r.hint, code, err);
  const never = causeCode(ce.cause ?? err);
  if (never || !write) {
    return new LeasegateError(
      "authority_unavailable",
      `not answered: ${never || ce.rawMessage}`,
      "hold: nothing was written; retry later",
      code,
      err,
    );
  }
  return new LeasegateError(
    "outcome_unknown",
    `sent, no answer: ${ce.rawMessage}`,
    "it may have applied; retry the same operation id to learn",
    code,
    err,
  );
}

/** Runs one call, turning any failure into a LeasegateError. */
export async function call<T>(write: boolean, f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    throw refusalOf(err, write);
  }
}

/**
 * A lease the gateway granted this worker. Only the worker's renewals keep
 * it alive: a paused or dead worker loses it at its TTL, and the gateway
 * refuses the worker's next fenced call.
 *
 * Its local deadline is the monotonic time the granting or last renewal
 * call was sent, plus the TTL, minus the margin — never later than the
 * gateway's stop_within from its answer. Past it, live() is false and the
 * worker stops acting.
 */
export class Session {
  readonly lease: string;
  readonly owner: string;
  private token: string;
  private ttlMs = 0;
  private deadline = 0;
  private timer: NodeJS.Timeout | undefined;
  /** Why the session can no longer act, once it cannot. */
  lost: string | undefined;

  private constructor(
    private readonly gw: Gateway,
    s: SessionMessage,
    r: Renewal,
    sent: number,
  ) {
    this.lease = s.lease;
    this.owner = s.owner;
    this.token = r.token;
    this.update(r, sent);
  }

  /** Opens a session of ttlMs (whole seconds, at least etcd's minimum). */
  static async open(gw: Gateway, ttlMs: number): Promise<Session> {
    const sent = performance.now();
    const out = await call(true, () => gw.worker.openSession({ ttl: durationFromMs(ttlMs) }));
    if (!out.session || !out.renewal) throw new LeasegateError("outcome_unknown", "OpenSession answered without a session", "", "");
    return new Session(gw, out.session, out.renewal, sent);
  }

  private update(r: Renewal, sent: number): void {
    const ttl = r.ttl ? durationMs(r.ttl) : 0;
    const margin = r.margin ? durationMs(r.margin) : 0;
    const stopWithin = r.stopWithin ? durationMs(r.stopWithin) : 0;
    this.token = r.token;
    this.ttlMs = ttl;
    this.deadline = Math.min(sent + ttl - margin, performance.now() + stopWithin);
  }

  /** Whether the session may still act: not lost and before its local deadline. */
  live(): boolean {
    return this.lost === undefined && performance.now() < this.deadline;
  }

  /** The session token to send with session calls (it changes at each renewal). */
  get sessionToken(): string {
    return this.token;
  }

  async renew(): Promise<void> {
    const sent = performance.now();
    const out = await call(true, () => this.gw.worker.renewSession({ sessionToken: this.token }));
    if (out.renewal) this.update(out.renewal, sent);
  }

  /** Renews every TTL/3 until close() or until the lease is lost. */
  keepAlive(): void {
    const tick = async () => {
      if (performance.now() >= this.deadline) {
        this.lost = "local deadline passed without a confirmed renewal";
        return;
      }
      try {
        await this.renew();
      } catch (err) {
        const e = refusalOf(err, true);
        if (e.disposition === "expired_owner") {
          this.lost = `lease lost: ${e.detail}`;
          return;
        }
      }
      this.timer = setTimeout(tick, this.ttlMs / 3);
    };
    this.timer = setTimeout(tick, this.ttlMs / 3);
  }

  /** Claims tenant/task under this session's lease: the grant of a new epoch. */
  async claim(tenant: string, task: string): Promise<Grant> {
    if (!this.live()) {
      throw new LeasegateError("expired_owner", `the session can no longer act: ${this.lost ?? "past its deadline"}`, "", "");
    }
    const out = await call(true, () => this.gw.worker.claim({ sessionToken: this.token, tenant, task }));
    if (!out.grant) throw new LeasegateError("outcome_unknown", "Claim answered without a grant", "", "");
    return out.grant;
  }

  /** Stops renewing and revokes the lease: every grant of the session ends. */
  async close(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.lost ??= "closed";
    await call(true, () => this.gw.worker.closeSession({ sessionToken: this.token }));
  }
}

/** Builds a message from its schema, re-exported for callers. */
export { create };
