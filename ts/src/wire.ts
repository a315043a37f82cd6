// Subjects, tokens, headers and dedupe ids of the parley wire protocol
// (docs/WIRE.md).

import { createHmac, randomBytes } from "node:crypto";

export const STREAM_NAME = "PARLEY";
export const STREAM_SUBJECTS = ["parley.*.art.*", "parley.*.ctl"] as const;
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
