// Subjects, tokens, headers and dedupe ids of the parley wire protocol
// (docs/WIRE.md).

import { createHmac, randomBytes } from "node:crypto";

export const STREAM_NAME = "PARLEY";
export const STREAM_SUBJECTS = ["parley.*.art.*", "parley.*.ctl"] as const;
/**
 * The one stream of the partitioned record (engine serve --partitioned,
 * docs/SCALING.md): the server's subject mapping stores each artifact and
 * control message with parley.p.<partition>. before its deliberation.
 */
export const PARTITIONED_STREAM_NAME = "PARLEY_0000_1023";
export const PARTITIONS = 1024;
/**
 * A position over several streams (engine serve --streams): the stream's
 * index times 2^POSITION_BITS plus its sequence; in a record of one
 * stream, the sequence itself. Always below 2^53: an exact JS number.
 */
export const POSITION_BITS = 43;
const POSITION_SPAN = 2 ** POSITION_BITS;
const MAPPED_PREFIX = "parley.p.";
export const SUBJECT_PREFIX = "parley.";
export const API_PREFIX = "parley.api";
export const SUPERVISOR_TOKEN = "_supervisor";
export const IMPORT_TOKEN = "_import";
export const PRINCIPAL_TOKEN = "principal";
export const DEFAULT_PAGE_LIMIT = 100;
export const MAX_PAGE_LIMIT = 1000;
export const MAX_CONTROL_BYTES = 4096;

/** Header names. */
export const H = Object.freeze({
  msgId: "Nats-Msg-Id",
  expectedStream: "Nats-Expected-Stream",
  key: "Parley-Key",
  signature: "Parley-Signature",
  status: "Status",
  nextCursor: "X-Next-Cursor",
  serviceErrorCode: "Nats-Service-Error-Code",
  serviceError: "Nats-Service-Error",
});

const TOKEN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A participant token: [A-Za-z0-9][A-Za-z0-9_-]{0,63}. Reserved `_` tokens are not. */
export function validToken(s: string): boolean {
  return TOKEN.test(s);
}

/** A deliberation id: a UUID of any version in canonical lowercase form. */
export function validDeliberation(s: string): boolean {
  return UUID.test(s);
}

export function artifactSubject(deliberation: string, token: string): string {
  return `parley.${deliberation}.art.${token}`;
}

export function controlSubject(deliberation: string): string {
  return `parley.${deliberation}.ctl`;
}

export function bindingSubject(deliberation: string): string {
  return `parley.${deliberation}.binding`;
}

/** Everything of one deliberation. */
export function deliberationFilter(deliberation: string): string {
  return `parley.${deliberation}.>`;
}

/**
 * A deliberation's partition: FNV-1a-32 of its id's bytes modulo 1024, what
 * the server's {{partition(1024,1)}} mapping computes (docs/SCALING.md).
 */
export function partitionOf(deliberation: string): number {
  let h = 2166136261;
  for (const c of Buffer.from(deliberation, "utf8")) {
    h ^= c;
    h = Math.imul(h, 16777619) >>> 0;
  }
  return h % PARTITIONS;
}

/**
 * The record's layout: unpartitioned (PARLEY), or partitioned over a power
 * of two of streams PARLEY_<first>_<last> of contiguous partitions.
 */
export interface Layout {
  partitioned: boolean;
  streams: number;
}

/** The layout the stream named name belongs to, and its index in it; null for a stream of none. */
export function layoutOf(name: string): { layout: Layout; index: number } | null {
  if (name === STREAM_NAME) return { layout: { partitioned: false, streams: 1 }, index: 0 };
  const m = /^PARLEY_(\d{4})_(\d{4})$/.exec(name);
  if (!m) return null;
  const first = Number(m[1]);
  const last = Number(m[2]);
  const size = last - first + 1;
  if (size < 1 || last >= PARTITIONS || PARTITIONS % size !== 0 || first % size !== 0 || (size & (size - 1)) !== 0) return null;
  return { layout: { partitioned: true, streams: PARTITIONS / size }, index: first / size };
}

/** The name of the stream of index k of a layout. */
export function streamAt(l: Layout, k: number): string {
  if (!l.partitioned) return STREAM_NAME;
  const size = PARTITIONS / l.streams;
  const pad = (n: number) => String(n).padStart(4, "0");
  return `PARLEY_${pad(k * size)}_${pad((k + 1) * size - 1)}`;
}

/** The index of the stream holding a deliberation (0 in a record of one stream). */
export function streamIndex(l: Layout, deliberation: string): number {
  if (l.streams <= 1) return 0;
  return Math.floor(partitionOf(deliberation) / (PARTITIONS / l.streams));
}

/** The position of sequence seq of the stream of index k. */
export function position(k: number, seq: number): number {
  return k * POSITION_SPAN + seq;
}

/** The stream index and sequence of a position. */
export function splitPosition(p: number): { index: number; seq: number } {
  const index = Math.floor(p / POSITION_SPAN);
  return { index, seq: p - index * POSITION_SPAN };
}

/** Everything of one deliberation as the partitioned record stores it: parley.p.<n>.<d>.>. */
export function mappedDeliberationFilter(deliberation: string): string {
  return `${MAPPED_PREFIX}${partitionOf(deliberation)}.${deliberation}.>`;
}

/**
 * The subject a stored message was published on: a subject of the
 * partitioned record (parley.p.<n>.<d>.…) without its partition, when n is
 * its deliberation's; any other subject as it is.
 */
export function publishedSubject(stored: string): string {
  if (!stored.startsWith(MAPPED_PREFIX)) return stored;
  const rest = stored.slice(MAPPED_PREFIX.length);
  const dot = rest.indexOf(".");
  if (dot < 0) return stored;
  const published = SUBJECT_PREFIX + rest.slice(dot + 1);
  const s = parseSubject(published);
  if (!s || rest.slice(0, dot) !== String(partitionOf(s.deliberation))) return stored;
  return published;
}

/** What a stream subject names. */
export function parseSubject(subject: string): { deliberation: string; kind: "art" | "ctl"; participant?: string } | null {
  if (!subject.startsWith(SUBJECT_PREFIX)) return null;
  const parts = subject.slice(SUBJECT_PREFIX.length).split(".");
  if (parts.length === 2 && parts[1] === "ctl") return { deliberation: parts[0], kind: "ctl" };
  if (parts.length === 3 && parts[1] === "art" && parts[2] !== "") {
    return { deliberation: parts[0], kind: "art", participant: parts[2] };
  }
  return null;
}

/** A version 7 UUID (time-ordered), as the Go client opens with. */
export function newDeliberationId(now = Date.now()): string {
  const b = randomBytes(16);
  const ms = BigInt(now);
  for (let i = 0; i < 6; i++) b[i] = Number((ms >> BigInt(8 * (5 - i))) & 0xffn);
  b[6] = (b[6] & 0x0f) | 0x70;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** A message the server delivered (heartbeat, flow control, a pull's end), never a request. */
export function serverDelivery(reply: string | undefined, status: string | undefined): boolean {
  return !!status || (!!reply && (reply.startsWith("$JS.ACK.") || reply.startsWith("$JS.FC.")));
}

/**
 * Dedupe ids: a keyed hash under a secret drawn when the publisher starts,
 * so that nobody else can compute the id of a message not yet published,
 * and the same publisher gets the same id on its retries.
 */
export class MsgIds {
  readonly #key: Buffer;
  constructor(key: Buffer = randomBytes(32)) {
    this.#key = Buffer.from(key);
  }
  for(...parts: string[]): string {
    const h = createHmac("sha256", this.#key);
    parts.forEach((p, i) => {
      if (i > 0) h.update(Buffer.of(0));
      h.update(p, "utf8");
    });
    return h.digest().subarray(0, 16).toString("hex");
  }
  artifact(subject: string, artifactId: string): string {
    return this.for("artifact", subject, artifactId);
  }
  control(subject: string, what: string): string {
    return this.for("control", subject, what);
  }
}
