// Canonical JSON of protocol 0.1: the restricted AMD profile of artifacts
// (NFC, members sorted by UTF-8 bytes, integers only) and JCS with the
// binding-envelope bounds (RFC 8785, integers by value). One strict parser
// serves both; every rejection is a CanonError with the profile's class,
// parley's finer code and the byte offset where the fault was found, with
// the precedence of docs/ERRORS.md when a document breaks several rules.

import { createHash } from "node:crypto";

/** The two canonical formats. */
export type Profile = "amd" | "jcs";

/** The five error classes of the canonical profile. */
export type CanonClass =
  | "malformed_input"
  | "unsupported_value"
  | "normalization_collision"
  | "invalid_artifact_identifier_syntax"
  | "artifact_identifier_mismatch";

/** Every canon code with its class (docs/ERRORS.md). */
export const CANON_CODES: Readonly<Record<string, CanonClass>> = Object.freeze({
  "json.empty": "malformed_input",
  "json.bom": "malformed_input",
  "json.syntax": "malformed_input",
  "json.unexpected_end": "malformed_input",
  "json.trailing_data": "malformed_input",
  "json.invalid_utf8": "malformed_input",
  "json.control_character": "malformed_input",
  "json.invalid_escape": "malformed_input",
  "json.invalid_number": "malformed_input",
  "json.duplicate_name": "malformed_input",
  "number.fraction": "unsupported_value",
  "number.exponent": "unsupported_value",
  "number.non_integer": "unsupported_value",
  "number.non_finite": "unsupported_value",
  "number.out_of_range": "unsupported_value",
  "limit.integer_digits": "unsupported_value",
  "string.unpaired_surrogate": "unsupported_value",
  "string.nonstarter_run": "unsupported_value",
  "value.top_level_not_object": "unsupported_value",
  "limit.depth": "unsupported_value",
  "limit.size": "unsupported_value",
  "nfc.collision": "normalization_collision",
  "id.missing": "invalid_artifact_identifier_syntax",
  "id.not_string": "invalid_artifact_identifier_syntax",
  "id.syntax": "invalid_artifact_identifier_syntax",
  "id.mismatch": "artifact_identifier_mismatch",
});

/** A classified rejection of the canonical profile. */
export class CanonError extends Error {
  readonly errorClass: CanonClass;
  readonly code: string;
  readonly offset: number;
  constructor(code: string, offset: number, detail = "") {
    super(`${code} at byte ${offset}${detail ? ": " + detail : ""}`);
    this.name = "CanonError";
    this.code = code;
    this.errorClass = CANON_CODES[code];
    this.offset = offset;
  }
}

/** The engine's default limits. */
export const MAX_DEPTH = 64;
export const MAX_SIZE = 1 << 20;
export const MAX_INTEGER_DIGITS = 16;
const MAX_SAFE = 9007199254740991n;
const MAX_NONSTARTERS = 30;

export const ID_PATTERN = /^sha256:[0-9a-f]{64}$/;

type Value =
  | { k: "o"; members: Member[] }
  | { k: "a"; items: Value[] }
  | { k: "s"; v: string }
  | { k: "t"; v: string }; // a literal or a number, as written out

interface Member {
  name: string; // decoded, NFC under AMD
  decoded: string; // decoded, before NFC
  off: number; // the name's opening quote
  sur: CanonError | null; // an unpaired surrogate in the name
  collides: boolean; // takes part in the NFC collision check
  value: Value;
}

/** The offset of the first byte that is not valid UTF-8, or -1. */
export function firstInvalidUTF8(b: Uint8Array, from = 0): number {
  const n = b.length;
  let i = from;
  while (i < n) {
    const c = b[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    let need: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) need = 1;
    else if (c === 0xe0) { need = 2; lo = 0xa0; }
    else if (c >= 0xe1 && c <= 0xec) need = 2;
    else if (c === 0xed) { need = 2; hi = 0x9f; }
    else if (c >= 0xee && c <= 0xef) need = 2;
    else if (c === 0xf0) { need = 3; lo = 0x90; }
    else if (c >= 0xf1 && c <= 0xf3) need = 3;
    else if (c === 0xf4) { need = 3; hi = 0x8f; }
    else return i;
    if (i + need >= n) return i;
    if (b[i + 1] < lo || b[i + 1] > hi) return i;
    for (let k = 2; k <= need; k++) {
      if (b[i + k] < 0x80 || b[i + k] > 0xbf) return i;
    }
    i += need + 1;
  }
  return -1;
}

// Non-starters: code points of canonical combining class other than 0.
// U+0345 has the highest class (240); any other non-starter sorts before it
// under canonical ordering, which is how the class is told from the
// normalizer alone.
const nonstarterMemo = new Map<number, boolean>();
function isNonstarter(cp: number): boolean {
  if (cp < 0x300) return false;
  let r = nonstarterMemo.get(cp);
  if (r === undefined) {
    if (cp === 0x345) r = true;
    else {
      const s = "\u0345" + String.fromCodePoint(cp);
      r = s.normalize("NFD") !== s;
    }
    nonstarterMemo.set(cp, r);
  }
  return r;
}

/** Whether the canonical decomposition of s holds more than 30 non-starters in a row. */
export function hasNonstarterRun(s: string): boolean {
  let run = 0;
  for (const ch of s.normalize("NFD")) {
    if (isNonstarter(ch.codePointAt(0)!)) {
      if (++run > MAX_NONSTARTERS) return true;
    } else run = 0;
  }
  return false;
}

function isStableASCII(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) >= 0x80) return false;
  return true;
}

class Parser {
  readonly src: Uint8Array;
  readonly profile: Profile;
  deferred: CanonError | null = null;
  text: Buffer;
  constructor(src: Uint8Array, profile: Profile) {
    this.src = src;
    this.profile = profile;
    this.text = Buffer.from(src.buffer, src.byteOffset, src.byteLength);
  }

  ws(i: number): number {
    const s = this.src;
    while (i < s.length) {
      const c = s[i];
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) i++;
      else break;
    }
    return i;
  }

  value(i: number, depth: number): [number, Value] {
    const s = this.src;
    const b = s[i];
    switch (b) {
      case 0x7b: return this.object(i, depth + 1);
      case 0x5b: return this.array(i, depth + 1);
      case 0x22: {
        const [next, str] = this.string(i, false);
        return [next, { k: "s", v: str.v }];
      }
      case 0x74: return this.literal(i, "true");
      case 0x66: return this.literal(i, "false");
      case 0x6e: return this.literal(i, "null");
      case 0x4e: return this.nonFinite(i, "NaN");
      case 0x49: return this.nonFinite(i, "Infinity");
    }
    if (b === 0x2d && i + 1 < s.length && s[i + 1] === 0x49) return this.nonFinite(i, "-Infinity");
    if (b === 0x2d || (b >= 0x30 && b <= 0x39)) return this.number(i);
    throw new CanonError("json.syntax", i, "unexpected byte 0x" + b.toString(16));
  }

  literal(i: number, lit: string): [number, Value] {
    const s = this.src;
    for (let k = 0; k < lit.length; k++) {
      if (i + k >= s.length) throw new CanonError("json.unexpected_end", i + k, "in literal " + lit);
      if (s[i + k] !== lit.charCodeAt(k)) throw new CanonError("json.syntax", i + k, "invalid literal");
    }
    return [i + lit.length, { k: "t", v: lit }];
  }

  nonFinite(i: number, tok: string): [number, Value] {
    const s = this.src;
    let ok = i + tok.length <= s.length;
    for (let k = 0; ok && k < tok.length; k++) ok = s[i + k] === tok.charCodeAt(k);
    if (ok) throw new CanonError("number.non_finite", i, tok);
    throw new CanonError("json.syntax", i, "unexpected byte");
  }

  number(start: number): [number, Value] {
    const s = this.src;
    const n = s.length;
    const isDigit = (k: number) => k < n && s[k] >= 0x30 && s[k] <= 0x39;
    let i = start;
    const neg = s[i] === 0x2d;
    if (neg) i++;
    const intStart = i;
    let err: CanonError | null = null;
    if (i >= n || !isDigit(i)) err = new CanonError("json.invalid_number", i, "missing digits");
    else if (s[i] === 0x30) i++;
    else while (isDigit(i)) i++;
    const intEnd = i;
    let hasFrac = false, fracStart = i, fracEnd = i;
    let hasExp = false, expStart = i, expEnd = i, expNeg = false;
    if (!err && i < n && s[i] === 0x2e) {
      hasFrac = true;
      i++;
      fracStart = i;
      while (isDigit(i)) i++;
      fracEnd = i;
      if (fracEnd === fracStart) err = new CanonError("json.invalid_number", i, "missing fraction digits");
    }
    if (!err && i < n && (s[i] === 0x65 || s[i] === 0x45)) {
      hasExp = true;
      i++;
      if (i < n && (s[i] === 0x2b || s[i] === 0x2d)) { expNeg = s[i] === 0x2d; i++; }
      expStart = i;
      while (isDigit(i)) i++;
      expEnd = i;
      if (expEnd === expStart) err = new CanonError("json.invalid_number", i, "missing exponent digits");
    }
    if (!err && isDigit(i)) err = new CanonError("json.invalid_number", i, "leading zero");
    const end = i;
    if (this.profile === "amd") {
      // The longest number the grammar reads is judged before what follows.
      if (hasFrac && fracEnd > fracStart) throw new CanonError("number.fraction", start);
      if (hasExp && !err) throw new CanonError("number.exponent", start);
      if (intEnd <= intStart) throw err!;
      const digits = this.text.toString("latin1", intStart, intEnd);
      if (digits.length > MAX_INTEGER_DIGITS) {
        throw new CanonError("limit.integer_digits", start, `${digits.length} digits, limit ${MAX_INTEGER_DIGITS}`);
      }
      const v = BigInt(digits);
      if (v > MAX_SAFE) throw new CanonError("number.out_of_range", start);
      if (err) throw err;
      return [end, { k: "t", v: v === 0n ? "0" : (neg ? "-" : "") + digits }];
    }
    if (err) throw err;
    // JCS: an integer by value, of magnitude at most 2^53-1.
    const digits = this.text.toString("latin1", intStart, intEnd) + this.text.toString("latin1", fracStart, fracEnd);
    const nInt = intEnd - intStart;
    let first = -1, last = -1;
    for (let k = 0; k < digits.length; k++) {
      if (digits.charCodeAt(k) !== 0x30) { if (first < 0) first = k; last = k; }
    }
    if (first < 0) return [end, { k: "t", v: "0" }];
    let exp = 0;
    for (let k = expStart; k < expEnd; k++) if (exp < 2 ** 40) exp = exp * 10 + (s[k] - 0x30);
    if (expNeg) exp = -exp;
    const e = nInt - 1 - last + exp;
    if (e < 0) throw new CanonError("number.non_integer", start);
    if (last - first + 1 + e > 16) throw new CanonError("number.out_of_range", start);
    const v = BigInt(digits.slice(first, last + 1)) * 10n ** BigInt(e);
    if (v > MAX_SAFE) throw new CanonError("number.out_of_range", start);
    return [end, { k: "t", v: (neg ? "-" : "") + v.toString() }];
  }

  array(i: number, depth: number): [number, Value] {
    if (depth > MAX_DEPTH) throw new CanonError("limit.depth", i, "limit " + MAX_DEPTH);
    const s = this.src;
    const items: Value[] = [];
    i = this.ws(i + 1);
    if (i < s.length && s[i] === 0x5d) return [i + 1, { k: "a", items }];
    for (;;) {
      if (i >= s.length) throw new CanonError("json.unexpected_end", i, "in array");
      const [next, v] = this.value(i, depth);
      items.push(v);
      i = this.ws(next);
      if (i >= s.length) throw new CanonError("json.unexpected_end", i, "in array");
      if (s[i] === 0x2c) i = this.ws(i + 1);
      else if (s[i] === 0x5d) return [i + 1, { k: "a", items }];
      else throw new CanonError("json.syntax", i, "expected ',' or ']'");
    }
  }

  object(i: number, depth: number): [number, Value] {
    if (depth > MAX_DEPTH) throw new CanonError("limit.depth", i, "limit " + MAX_DEPTH);
    const s = this.src;
    const members: Member[] = [];
    i = this.ws(i + 1);
    if (i < s.length && s[i] === 0x7d) return [i + 1, { k: "o", members }];
    for (;;) {
      if (i >= s.length) throw new CanonError("json.unexpected_end", i, "in object");
      if (s[i] !== 0x22) throw new CanonError("json.syntax", i, "expected a member name");
      const off = i;
      const [next, name] = this.string(i, true);
      i = this.ws(next);
      if (i >= s.length) throw new CanonError("json.unexpected_end", i, "in object");
      if (s[i] !== 0x3a) throw new CanonError("json.syntax", i, "expected ':'");
      i = this.ws(i + 1);
      if (i >= s.length) throw new CanonError("json.unexpected_end", i, "in object");
      const [after, v] = this.value(i, depth);
      members.push({ name: name.v, decoded: name.decoded, off, sur: name.sur, collides: !name.run, value: v });
      i = this.ws(after);
      if (i >= s.length) throw new CanonError("json.unexpected_end", i, "in object");
      if (s[i] === 0x2c) { i = this.ws(i + 1); continue; }
      if (s[i] === 0x7d) { i++; break; }
      throw new CanonError("json.syntax", i, "expected ',' or '}'");
    }
    this.judgeNames(members);
    return [i, { k: "o", members }];
  }

  // The names of a closed object, member by member in input order: a
  // duplicate after escape decoding, then an unpaired surrogate, then a
  // collision after NFC.
  judgeNames(ms: Member[]): void {
    const decoded = new Set<string>();
    const normal = new Set<string>();
    for (const m of ms) {
      if (decoded.has(m.decoded)) throw new CanonError("json.duplicate_name", m.off, JSON.stringify(m.decoded));
      if (m.sur) throw m.sur;
      if (this.profile === "amd" && m.collides) {
        if (normal.has(m.name)) throw new CanonError("nfc.collision", m.off, JSON.stringify(m.name));
        normal.add(m.name);
      }
      decoded.add(m.decoded);
    }
  }

  string(i: number, isKey: boolean): [number, { v: string; decoded: string; sur: CanonError | null; run: boolean }] {
    const s = this.src;
    const quote = i;
    let j = i + 1;
    let out = "";
    let lone: CanonError | null = null;
    for (;;) {
      const run = j;
      while (j < s.length && s[j] >= 0x20 && s[j] !== 0x22 && s[j] !== 0x5c) j++;
      if (j > run) out += this.text.toString("utf8", run, j);
      if (j >= s.length) throw new CanonError("json.unexpected_end", j, "in string");
      const b = s[j];
      if (b === 0x22) { j++; break; }
      if (b < 0x20) throw new CanonError("json.control_character", j, "U+00" + b.toString(16).padStart(2, "0"));
      // An escape.
      if (j + 1 >= s.length) throw new CanonError("json.unexpected_end", j + 1, "in escape");
      const e = s[j + 1];
      const simple: Record<number, string> = { 0x22: '"', 0x5c: "\\", 0x2f: "/", 0x62: "\b", 0x66: "\f", 0x6e: "\n", 0x72: "\r", 0x74: "\t" };
      if (e in simple) { out += simple[e]; j += 2; continue; }
      if (e !== 0x75) throw new CanonError("json.invalid_escape", j);
      const r = this.hex4(j + 2);
      if (r < 0xd800 || r > 0xdfff) { out += String.fromCharCode(r); j += 6; continue; }
      let off = j;
      const k = j + 6;
      if (r <= 0xdbff && k + 1 < s.length && s[k] === 0x5c && s[k + 1] === 0x75) {
        const lo = this.hex4(k + 2);
        if (lo >= 0xdc00 && lo <= 0xdfff) { out += String.fromCharCode(r, lo); j += 12; continue; }
        off = k; // the escape that should have been the low half
      }
      if (!lone) lone = new CanonError("string.unpaired_surrogate", off);
      out += String.fromCharCode(r);
      j += 6;
    }
    let v = out;
    let run = false;
    if (lone) {
      // Refused later in the order: a name when its object closes, a value
      // once the whole input is parsed.
      if (!isKey && !this.deferred) this.deferred = lone;
    } else if (this.profile === "amd" && !isStableASCII(out)) {
      if (hasNonstarterRun(out)) {
        run = true;
        if (!this.deferred) this.deferred = new CanonError("string.nonstarter_run", quote);
      } else v = out.normalize("NFC");
    }
    return [j, { v, decoded: out, sur: isKey ? lone : null, run }];
  }

  hex4(k: number): number {
    const s = this.src;
    let r = 0;
    for (let n = 0; n < 4; n++) {
      if (k + n >= s.length) throw new CanonError("json.unexpected_end", k + n, "in \\u escape");
      const b = s[k + n];
      let d: number;
      if (b >= 0x30 && b <= 0x39) d = b - 0x30;
      else if (b >= 0x61 && b <= 0x66) d = b - 0x61 + 10;
      else if (b >= 0x41 && b <= 0x46) d = b - 0x41 + 10;
      else throw new CanonError("json.invalid_escape", k - 2, "\\u needs four hex digits");
      r = (r << 4) | d;
    }
    return r;
  }
}

// Compares by code points, which is the order of the UTF-8 bytes.
function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    // A surrogate (a code point above U+FFFF) sorts after every BMP unit.
    if (x >= 0xd800 && x <= 0xdfff) x += 0x10000;
    if (y >= 0xd800 && y <= 0xdfff) y += 0x10000;
    return x - y;
  }
  return a.length - b.length;
}

function compareUTF16(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The canonical spelling of a string's content, quotes included. */
export function quote(s: string): string {
  let out = '"';
  let last = 0;
  for (let k = 0; k < s.length; k++) {
    const c = s.charCodeAt(k);
    if (c >= 0x20 && c !== 0x22 && c !== 0x5c) continue;
    out += s.slice(last, k);
    switch (c) {
      case 0x22: out += '\\"'; break;
      case 0x5c: out += "\\\\"; break;
      case 0x08: out += "\\b"; break;
      case 0x0c: out += "\\f"; break;
      case 0x0a: out += "\\n"; break;
      case 0x0d: out += "\\r"; break;
      case 0x09: out += "\\t"; break;
      default: out += "\\u00" + c.toString(16).padStart(2, "0");
    }
    last = k + 1;
  }
  return out + s.slice(last) + '"';
}

function serialize(v: Value, profile: Profile, skipTopID = false): string {
  switch (v.k) {
    case "t": return v.v;
    case "s": return quote(v.v);
    case "a": return "[" + v.items.map((x) => serialize(x, profile)).join(",") + "]";
    case "o": {
      const cmp = profile === "jcs" ? compareUTF16 : compareCodePoints;
      const ms = v.members.filter((m) => !(skipTopID && m.name === "artifact_id"));
      ms.sort((a, b) => cmp(a.name, b.name));
      return "{" + ms.map((m) => quote(m.name) + ":" + serialize(m.value, profile)).join(",") + "}";
    }
  }
}

interface Parsed {
  value: Value;
  topOff: number;
}

function parse(src: Uint8Array, profile: Profile): Parsed {
  if (src.length > MAX_SIZE) throw new CanonError("limit.size", MAX_SIZE, `limit ${MAX_SIZE} bytes`);
  const bad = firstInvalidUTF8(src);
  if (bad >= 0) throw new CanonError("json.invalid_utf8", bad);
  if (src.length === 0) throw new CanonError("json.empty", 0);
  if (src.length >= 3 && src[0] === 0xef && src[1] === 0xbb && src[2] === 0xbf) throw new CanonError("json.bom", 0);
  const p = new Parser(src, profile);
  let i = p.ws(0);
  if (i === src.length) throw new CanonError("json.unexpected_end", i, "no value");
  const topOff = i;
  const [next, value] = p.value(i, 0);
  i = p.ws(next);
  if (i !== src.length) throw new CanonError("json.trailing_data", i);
  if (p.deferred) throw p.deferred;
  return { value, topOff };
}

function toBytes(src: Uint8Array | string): Uint8Array {
  return typeof src === "string" ? Buffer.from(src, "utf8") : src;
}

/** The canonical form of any JSON value under the profile. */
export function canonicalize(src: Uint8Array | string, profile: Profile = "amd"): Buffer {
  return Buffer.from(serialize(parse(toBytes(src), profile).value, profile), "utf8");
}

function sha256(b: Uint8Array | string): string {
  return createHash("sha256").update(b).digest("hex");
}

/** The result of computing an artifact id. */
export interface IdResult {
  /** sha256:<64 lowercase hex> */
  id: string;
  /** The canonical form of the whole input, its artifact_id member included. */
  canonical: Buffer;
  /** The top-level members' parsed values, for callers that need them. */
  value: unknown;
}

function parseTopObject(src: Uint8Array): { parsed: Parsed; members: Member[] } {
  const parsed = parse(src, "amd");
  if (parsed.value.k !== "o") throw new CanonError("value.top_level_not_object", parsed.topOff);
  return { parsed, members: parsed.value.members };
}

/** The artifact id of src: SHA-256 of its AMD canonical form without the top-level artifact_id. */
export function artifactId(src: Uint8Array | string): IdResult {
  const { parsed } = parseTopObject(toBytes(src));
  const canonical = serialize(parsed.value, "amd");
  const hashed = serialize(parsed.value, "amd", true);
  return { id: "sha256:" + sha256(hashed), canonical: Buffer.from(canonical, "utf8"), value: JSON.parse(canonical) };
}

/** Checks the top-level artifact_id of src against its content; returns the id. */
export function verifyId(src: Uint8Array | string): IdResult {
  const bytes = toBytes(src);
  const { parsed, members } = parseTopObject(bytes);
  const canonical = serialize(parsed.value, "amd");
  const id = "sha256:" + sha256(serialize(parsed.value, "amd", true));
  const m = members.find((x) => x.name === "artifact_id");
  if (!m) throw new CanonError("id.missing", 0);
  if (m.value.k !== "s") throw new CanonError("id.not_string", m.off);
  if (!ID_PATTERN.test(m.value.v)) throw new CanonError("id.syntax", m.off);
  if (m.value.v !== id) throw new CanonError("id.mismatch", m.off, "content hashes to " + id);
  return { id, canonical: Buffer.from(canonical, "utf8"), value: JSON.parse(canonical) };
}

/** The JCS digest (sha256:<hex> of the JCS canonical form) and that form. */
export function jcsDigest(src: Uint8Array | string): { digest: string; canonical: Buffer } {
  const canonical = canonicalize(src, "jcs");
  return { digest: "sha256:" + sha256(canonical), canonical };
}

/**
 * Canonical bytes of a JavaScript value under the AMD profile: the value is
 * written as JSON and canonicalized, so every rule of the profile applies
 * (a fraction, a non-finite number, an unsafe integer are refused).
 */
export function canonicalizeValue(v: unknown, profile: Profile = "amd"): Buffer {
  const json = JSON.stringify(v, (_k, x) => {
    if (typeof x === "number" && !Number.isFinite(x)) throw new CanonError("number.non_finite", -1, String(x));
    if (typeof x === "bigint") {
      if (x > MAX_SAFE || x < -MAX_SAFE) throw new CanonError("number.out_of_range", -1, x.toString());
      return Number(x);
    }
    return x;
  });
  if (json === undefined) throw new CanonError("json.empty", 0, "value has no JSON form");
  return canonicalize(Buffer.from(json, "utf8"), profile);
}
