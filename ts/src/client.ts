// A parley participant over NATS (docs/WIRE.md): publishes artifacts and
// control messages with the wire's headers and dedupe ids, retries as the
// reference client does, reads the engine's query service (parley.api.*)
// with read-your-writes, waits for verdicts and watches a deliberation
// through an ordered push consumer.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { connect, headers as natsHeaders, type ConnectionOptions, type Msg, type MsgHdrs, type NatsConnection } from "@nats-io/transport-node";
import { jetstream, type JetStreamClient, type JsMsg, type PubAck } from "@nats-io/jetstream";
import { open, seal, type Artifact, type Draft } from "./artifact.js";
import { Signer } from "./signing.js";
import {
  H,
  MAX_CONTROL_BYTES,
  MsgIds,
  PARTITIONED_STREAM_NAME,
  PARTITIONS,
  STREAM_NAME,
  type Layout,
  artifactSubject,
  controlSubject,
  deliberationFilter,
  layoutOf,
  mappedDeliberationFilter,
  newDeliberationId,
  parseSubject,
  position,
  publishedSubject,
  splitPosition,
  streamAt,
  streamIndex,
  validDeliberation,
  validToken,
} from "./wire.js";

/**
 * The participant user of a local engine's embedded default, read from its
 * data directory's credentials.json (`nats_participant_user`,
 * `nats_participant_password`): a client without credentials may only read
 * there. Give the result as the `nats` option of `Participant.connect`.
 * Throws when the file is missing (no engine runs with that data
 * directory) or names no participant user (the engine runs on a NATS
 * configuration of its own, whose users you are given instead).
 */
export function localCredentials(dataDir = "./parley-data"): { user: string; pass: string } {
  const path = join(dataDir, "credentials.json");
  let c: { nats_participant_user?: string; nats_participant_password?: string };
  try {
    c = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw new Error(`parley: ${path}: ${(e as Error).message} (is an engine running with --data ${dataDir}?)`);
  }
  if (!c.nats_participant_user || !c.nats_participant_password) {
    throw new Error(`parley: ${path} names no participant user: that engine does not own its server's users; connect with the credentials you were given`);
  }
  return { user: c.nats_participant_user, pass: c.nats_participant_password };
}

/** The charter of a new deliberation (the open control message). */
export interface Charter {
  title: string;
  participants?: string[];
  terminators?: string[];
  principal?: string;
  keys?: Record<string, string>;
  require_signatures?: boolean;
  limits?: Record<string, unknown>;
  policy?: Record<string, unknown>;
}

export type Control =
  | { op: "open"; charter: Charter }
  | { op: "suspend" }
  | { op: "resume" }
  | { op: "round"; round: number }
  | { op: "cancel"; reason?: string };

/** The verdict on the message at a position (api.OutcomeReport). */
export interface OutcomeReport {
  deliberation: string;
  position: number;
  outcome: "accepted" | "rejected" | "late" | "applied" | "unprojected" | "unknown";
  projected: number;
  ordinal?: number;
  participant?: string;
  artifact_id?: string;
  artifact_type?: string;
  error_class?: string;
  code?: string;
  message?: string;
  op?: string;
  note?: string;
  [k: string]: unknown;
}

/** An error answer of the query service. */
export class ServiceError extends Error {
  /** The HTTP-like status (Nats-Service-Error-Code). */
  readonly status: number;
  /** The API's code (bad_request, not_found, projection.behind…), or "" when the answer had no body. */
  readonly code: string;
  readonly body: Record<string, unknown> | null;
  constructor(endpoint: string, status: number, message: string, body: Record<string, unknown> | null) {
    const code = body && typeof body.code === "string" ? body.code : "";
    super(`parley.api.${endpoint}: ${status}${code ? " " + code : ""}: ${message}`);
    this.name = "ServiceError";
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

/** A publish the engine refused, or a wait that ended without a verdict. */
export class RejectedError extends Error {
  readonly outcome: OutcomeReport;
  constructor(o: OutcomeReport) {
    super(`${o.outcome} at position ${o.position}: ${o.code ?? ""} ${o.message ?? ""}`.trim());
    this.name = "RejectedError";
    this.outcome = o;
  }
}

export interface ParticipantOptions {
  /** An nkeys user seed (SU…): every artifact is signed with it (Parley-Key, Parley-Signature). */
  seed?: string;
  /** The deadline of each attempt of a request or publish, in ms (default 2000). */
  attemptTimeoutMs?: number;
  /** How long a request or publish is retried in all, in ms (default 30000). */
  retryForMs?: number;
}

/** The result of a publish: the artifact, its stream position and whether the stream had it already. */
export interface Published {
  artifact: Artifact;
  position: number;
  duplicate: boolean;
}

/** A message of a watched deliberation, in stream order. */
export interface Delivery {
  position: number;
  subject: string;
  time: Date;
  kind: "art" | "ctl" | "other";
  /** The artifact's token (kind "art"). */
  participant?: string;
  /** The opened artifact, when its bytes are a valid artifact. */
  artifact?: Artifact;
  /** The control message, when kind is "ctl" and it is JSON. */
  control?: Record<string, unknown>;
  /** Why the message could not be opened (it will be rejected by the engine as well). */
  error?: Error;
  /** Parley-Key and Parley-Signature, as received. */
  signature?: { key: string[]; signature: string[] };
  data: Uint8Array;
  /** The stored message's headers (Nats-Msg-Id, Parley-Key…). */
  headers?: MsgHdrs;
  /** Messages still to come at the time of this one (0: caught up). */
  pending: number;
}

export interface WatchOptions {
  /** Start at this position (default: the first message of the deliberation); over several streams, a position of the deliberation's stream. */
  fromPosition?: number;
  /** Stops the watch. */
  signal?: AbortSignal;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function chain(e: unknown): Error[] {
  const out: Error[] = [];
  let x: unknown = e;
  while (x instanceof Error && out.length < 8) {
    out.push(x);
    x = (x as { cause?: unknown }).cause;
  }
  return out;
}

/** Nobody answered: no responders (no stream, no engine). */
function noResponders(e: unknown): boolean {
  return chain(e).some((x) => x.name === "NoRespondersError" || (typeof (x as any).isNoResponders === "function" && (x as any).isNoResponders()));
}

/** No answer came: a timeout, no responders, or a connection that dropped under the attempt (not one closed for good). */
function noAnswer(e: unknown): boolean {
  return noResponders(e) || chain(e).some((x) => x.name === "TimeoutError" || x.name === "ConnectionError" || x.name === "JetStreamNotEnabled");
}

function jsApiCode(e: unknown): { code: number; status: number } | null {
  for (const x of chain(e)) {
    if (x.name === "JetStreamApiError") return { code: (x as any).code, status: (x as any).status };
  }
  return null;
}

/** A participant of parley deliberations, publishing under one token. */
export class Participant {
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly token: string;
  readonly signer?: Signer;
  readonly #ids = new MsgIds();
  readonly #attempt: number;
  readonly #retryFor: number;
  // The highest position of this participant's acknowledged publishes,
  // by the index of their stream (one stream: index 0 alone).
  readonly #seen = new Map<number, number>();
  #owned = false;
  // The record's layout once known: from a publish's acknowledgement, or
  // asked for (#record).
  #layout?: Layout;

  constructor(nc: NatsConnection, token: string, opts: ParticipantOptions = {}) {
    if (!validToken(token)) throw new TypeError(`invalid participant token ${JSON.stringify(token)}: [A-Za-z0-9][A-Za-z0-9_-]{0,63}`);
    this.nc = nc;
    this.js = jetstream(nc);
    this.token = token;
    if (opts.seed) this.signer = new Signer(opts.seed);
    this.#attempt = opts.attemptTimeoutMs ?? 2000;
    this.#retryFor = opts.retryForMs ?? 30000;
  }

  /** Connects to NATS and returns a participant that closes the connection on close(). */
  static async connect(servers: string | string[], token: string, opts: ParticipantOptions & { nats?: ConnectionOptions } = {}): Promise<Participant> {
    const nc = await connect({ servers, maxReconnectAttempts: -1, ...opts.nats });
    const p = new Participant(nc, token, opts);
    p.#owned = true;
    return p;
  }

  /**
   * The highest position this participant has seen acknowledged (over
   * several streams, in the last stream it has seen anything of); every
   * read of a deliberation waits for the highest in its stream.
   */
  get position(): number {
    return Math.max(0, ...this.#seen.values());
  }

  /** The highest position seen in the stream holding deliberation (every stream's highest without one, or with the layout unknown). */
  positionFor(deliberation?: string): number {
    if (!deliberation || !this.#layout) return this.position;
    return this.#seen.get(streamIndex(this.#layout, deliberation)) ?? 0;
  }

  async close(): Promise<void> {
    if (this.#owned) await this.nc.drain();
  }

  #saw(p: number): void {
    const { index } = splitPosition(p);
    if (p > (this.#seen.get(index) ?? 0)) this.#seen.set(index, p);
  }

  async #retry<T>(what: string, f: () => Promise<T>, retryable: (e: unknown) => boolean): Promise<T> {
    const deadline = Date.now() + this.#retryFor;
    let wait = 50;
    for (;;) {
      try {
        return await f();
      } catch (e) {
        const left = deadline - Date.now();
        if (!retryable(e) || left <= 0) {
          if (e instanceof Error && !(e instanceof ServiceError)) e.message = `${what}: ${e.message}`;
          throw e;
        }
        await sleep(Math.min(wait, left));
      }
      wait = Math.min(2 * wait, 1000);
    }
  }

  async #publish(subject: string, data: Uint8Array, h: MsgHdrs, msgID: string | undefined): Promise<PubAck> {
    if (msgID) h.set(H.msgId, msgID);
    // The stream holding the deliberation, once the layout is known; the
    // first acknowledgement names it.
    const deliberation = parseSubject(subject)?.deliberation;
    if (this.#layout && deliberation) h.set(H.expectedStream, streamAt(this.#layout, streamIndex(this.#layout, deliberation)));
    const retryable = msgID
      ? (e: unknown) => {
          const api = jsApiCode(e);
          return noAnswer(e) || (api !== null && (api.code === 10158 || api.status === 503));
        }
      : noResponders;
    const ack = await this.#retry(`publish on ${subject}`, () => this.js.publish(subject, data, { headers: h, timeout: this.#attempt }), retryable);
    // The acknowledgement's seq is the position: the stream's sequence,
    // with its index over several streams.
    const where = layoutOf(ack.stream);
    if (where && !this.#layout) this.#layout = where.layout;
    const p = where ? position(where.index, ack.seq) : ack.seq;
    this.#saw(p);
    return { ...ack, seq: p };
  }

  /**
   * The record's layout: PARLEY, or the partitioned record in
   * PARLEY_0000_1023 or over several streams (docs/SCALING.md). Asked for
   * by the first stream's info ($JS.API.STREAM.INFO, which participants
   * may ask), PARLEY first, then the partitioned layouts of 1, 2, 4, …
   * streams.
   */
  async #record(): Promise<Layout> {
    if (this.#layout) return this.#layout;
    const candidates: Layout[] = [{ partitioned: false, streams: 1 }];
    for (let n = 1; n <= PARTITIONS; n *= 2) candidates.push({ partitioned: true, streams: n });
    for (const l of candidates) {
      const name = streamAt(l, 0);
      const m = await this.#retry(`stream info ${name}`, () => this.nc.request(`$JS.API.STREAM.INFO.${name}`, "", { timeout: this.#attempt }), noAnswer);
      const info = m.json<{ error?: { code: number }; config?: { name: string } }>();
      if (info.error?.code === 404) continue;
      if (info.error) throw new Error(`stream info ${name}: ${JSON.stringify(info.error)}`);
      this.#layout = l;
      return l;
    }
    throw new Error(`neither ${STREAM_NAME} nor ${PARTITIONED_STREAM_NAME} (or the first stream of a partitioned record over several): no parley record on this server`);
  }

  /** Publishes a control message; open and round carry a dedupe id, the others none. */
  async control(deliberation: string, ctl: Control): Promise<PubAck> {
    if (!validDeliberation(deliberation)) throw new TypeError(`invalid deliberation id ${JSON.stringify(deliberation)}`);
    const data = Buffer.from(JSON.stringify(ctl), "utf8");
    if (data.length > MAX_CONTROL_BYTES) throw new RangeError(`control message of ${data.length} bytes: at most ${MAX_CONTROL_BYTES}`);
    const subject = controlSubject(deliberation);
    let id: string | undefined;
    if (ctl.op === "open") id = this.#ids.control(subject, "open");
    if (ctl.op === "round") id = this.#ids.control(subject, `round-${ctl.round}`);
    return this.#publish(subject, data, natsHeaders(), id);
  }

  /**
   * Opens a deliberation (a new version 7 UUID unless id is given) and waits
   * for the engine's verdict on the charter: a refused charter throws
   * RejectedError with the engine's code.
   */
  async open(charter: Charter, id: string = newDeliberationId()): Promise<{ id: string; position: number }> {
    const ack = await this.control(id, { op: "open", charter });
    const o = await this.waitOutcome(id, ack.seq);
    if (o.outcome !== "applied") throw new RejectedError(o);
    return { id, position: ack.seq };
  }

  suspend(id: string): Promise<PubAck> {
    return this.control(id, { op: "suspend" });
  }
  resume(id: string): Promise<PubAck> {
    return this.control(id, { op: "resume" });
  }
  round(id: string, n: number): Promise<PubAck> {
    return this.control(id, { op: "round", round: n });
  }
  cancel(id: string, reason?: string): Promise<PubAck> {
    return this.control(id, reason === undefined ? { op: "cancel" } : { op: "cancel", reason });
  }

  /**
   * Seals a draft (or takes a sealed artifact) and publishes it on the
   * participant's subject, signed when the participant has a seed. Returns
   * once the stream stored it: its verdict is waitOutcome's (or use submit).
   */
  async publish(deliberation: string, d: Draft | Artifact): Promise<Published> {
    if (!validDeliberation(deliberation)) throw new TypeError(`invalid deliberation id ${JSON.stringify(deliberation)}`);
    const a = "bytes" in d && "id" in d ? d : seal(d);
    const subject = artifactSubject(deliberation, this.token);
    const h = natsHeaders();
    if (this.signer) {
      const s = this.signer.sign(deliberation, this.token, a.id);
      h.set(H.key, s.key);
      h.set(H.signature, s.signature);
    }
    const ack = await this.#publish(subject, a.bytes, h, this.#ids.artifact(subject, a.id));
    return { artifact: a, position: ack.seq, duplicate: !!ack.duplicate };
  }

  /** Publishes and waits for the verdict; throws RejectedError unless the artifact is accepted (or late, with allowLate). */
  async submit(deliberation: string, d: Draft | Artifact, opts: { allowLate?: boolean } = {}): Promise<Published & { outcome: OutcomeReport }> {
    const p = await this.publish(deliberation, d);
    const outcome = await this.waitOutcome(deliberation, p.position, p.artifact.id);
    if (outcome.outcome !== "accepted" && !(opts.allowLate && outcome.outcome === "late")) throw new RejectedError(outcome);
    return { ...p, outcome };
  }

  /**
   * Asks the query service: `parley.api.<endpoint>` with a JSON body.
   * Every endpoint but health carries min_position (the highest position
   * this participant has seen acknowledged). Retried while no answer comes
   * or the answer is 503 (but engine.halted); any other error answer throws
   * a ServiceError at once.
   */
  async request(endpoint: string, body: Record<string, unknown> = {}): Promise<{ data: Uint8Array; headers?: MsgHdrs }> {
    const req = { ...body };
    if (endpoint !== "health" && req.min_position === undefined) {
      const seen = this.positionFor(typeof req.id === "string" ? req.id : undefined);
      if (seen > 0) req.min_position = seen;
    }
    const payload = Buffer.from(JSON.stringify(req), "utf8");
    const m = await this.#retry(
      `parley.api.${endpoint}`,
      async () => {
        const m = await this.nc.request(`parley.api.${endpoint}`, payload, { timeout: this.#attempt });
        const status = m.headers?.get(H.serviceErrorCode);
        if (status) {
          let b: Record<string, unknown> | null = null;
          try {
            b = m.data.length > 0 ? JSON.parse(Buffer.from(m.data).toString("utf8")) : null;
          } catch {
            b = null;
          }
          throw new ServiceError(endpoint, Number(status), m.headers?.get(H.serviceError) ?? "", b);
        }
        return m;
      },
      (e) => noAnswer(e) || (e instanceof ServiceError && e.status === 503 && e.code !== "engine.halted"),
    );
    return { data: m.data, headers: m.headers };
  }

  async #json<T>(endpoint: string, body: Record<string, unknown> = {}): Promise<T> {
    const { data } = await this.request(endpoint, body);
    return JSON.parse(Buffer.from(data).toString("utf8")) as T;
  }

  /** The deliberation's state (api.View). */
  state(id: string): Promise<Record<string, any>> {
    return this.#json("deliberation", { id });
  }

  /** The verdict on the message at a position (of artifactId, if given). */
  outcome(id: string, position: number, artifactId?: string): Promise<OutcomeReport> {
    const body: Record<string, unknown> = { id, position };
    if (artifactId) body.artifact_id = artifactId;
    return this.#json("outcome", body);
  }

  /**
   * Waits for the engine's verdict on the message at a position: asks again
   * while it is unprojected (or projection.behind), up to timeoutMs.
   */
  async waitOutcome(id: string, position: number, artifactId?: string, timeoutMs = this.#retryFor): Promise<OutcomeReport> {
    const deadline = Date.now() + timeoutMs;
    let wait = 10;
    for (;;) {
      const o = await this.outcome(id, position, artifactId);
      if (o.outcome !== "unprojected") return o;
      if (Date.now() + wait > deadline) throw new RejectedError(o);
      await sleep(wait);
      wait = Math.min(2 * wait, 250);
    }
  }

  /** An artifact of the deliberation's DAG, opened (id and rules checked), or null when it is not there. */
  async artifact(id: string, artifactId: string): Promise<Artifact | null> {
    try {
      const { data } = await this.request("artifact", { id, artifact_id: artifactId });
      return open(data);
    } catch (e) {
      if (e instanceof ServiceError && e.status === 404) return null;
      throw e;
    }
  }

  /** The closure verification of a decision (closure.Result); at 0: the decision's own position. */
  closure(id: string, decision: string, at = 0): Promise<Record<string, any>> {
    return this.#json("closure", { id, decision, at });
  }

  provenance(id: string): Promise<Record<string, any>> {
    return this.#json("provenance", { id });
  }

  health(): Promise<Record<string, any>> {
    return this.#json("health");
  }

  /** The rejections of a deliberation (one page; cursor from next_cursor). */
  rejections(id: string, page: { limit?: number; cursor?: string } = {}): Promise<Record<string, any>> {
    return this.#json("rejections", { id, ...page });
  }

  async *#pages<T>(endpoint: string, body: Record<string, unknown>): AsyncGenerator<T> {
    let cursor: string | undefined;
    do {
      const { data, headers } = await this.request(endpoint, cursor ? { ...body, cursor } : body);
      for (const x of JSON.parse(Buffer.from(data).toString("utf8")) as T[]) yield x;
      cursor = headers?.get(H.nextCursor) || undefined;
    } while (cursor);
  }

  /** Every artifact of the deliberation's DAG in stream order (api.ArtifactEntry), page by page. */
  artifacts(id: string, limit?: number): AsyncGenerator<{ artifact_id: string; position: number; ordinal: number; participant: string; artifact_type: string }> {
    return this.#pages("artifacts", limit ? { id, limit } : { id });
  }

  /** The deliberations, newest opened first (api.Summary); status: a comma-separated list. */
  deliberations(q: { status?: string; limit?: number } = {}): AsyncGenerator<Record<string, any>> {
    return this.#pages("deliberations", q);
  }

  /**
   * Watches a deliberation: every message of it in stream order, read with
   * an ordered push consumer delivering to an _INBOX subject (participants
   * do not pull). Artifacts come opened; a message that is not a valid
   * artifact comes with its error. Stops when the loop breaks or the signal
   * aborts.
   */
  async *watch(id: string, opts: WatchOptions = {}): AsyncGenerator<Delivery> {
    if (!validDeliberation(id)) throw new TypeError(`invalid deliberation id ${JSON.stringify(id)}`);
    const l = await this.#record();
    const k = streamIndex(l, id);
    const c = await this.js.consumers.getPushConsumer(streamAt(l, k), {
      filter_subjects: l.partitioned ? mappedDeliberationFilter(id) : deliberationFilter(id),
      ...(opts.fromPosition ? { opt_start_seq: splitPosition(opts.fromPosition).seq } : {}),
    });
    const msgs = await c.consume();
    const stop = () => void msgs.stop();
    opts.signal?.addEventListener("abort", stop, { once: true });
    try {
      if (opts.signal?.aborted) return;
      for await (const m of msgs) {
        yield delivery(m, k);
      }
    } finally {
      opts.signal?.removeEventListener("abort", stop);
      msgs.stop();
      await msgs.closed().catch(() => undefined);
    }
  }
}

function delivery(m: JsMsg, k: number): Delivery {
  // The subject as published (the partitioned record stores it mapped).
  const subject = publishedSubject(m.subject);
  const s = parseSubject(subject);
  const d: Delivery = {
    position: position(k, m.seq),
    subject,
    time: new Date(Math.floor(m.info.timestampNanos / 1e6)),
    kind: s ? s.kind : "other",
    data: m.data,
    headers: m.headers,
    pending: m.info.pending,
  };
  if (s?.participant) d.participant = s.participant;
  const key = m.headers?.values(H.key) ?? [];
  const sig = m.headers?.values(H.signature) ?? [];
  if (key.length || sig.length) d.signature = { key, signature: sig };
  try {
    if (d.kind === "art") d.artifact = open(m.data);
    else if (d.kind === "ctl") d.control = JSON.parse(Buffer.from(m.data).toString("utf8"));
  } catch (e) {
    d.error = e as Error;
  }
  return d;
}

export type { Msg, NatsConnection };
