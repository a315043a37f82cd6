// Artifact signatures (docs/VERIFY.md, "Artifact signatures"): an nkeys
// user key (Ed25519) signs
//   0xFF || "parley-artifact-signature-v1" || 0x0A || D || 0x0A || T || 0x0A || A || 0x0A
// and the signature travels in the Parley-Key and Parley-Signature headers.

import { fromPublic, fromSeed, type KeyPair } from "@nats-io/nkeys";
import { ID_PATTERN } from "./canon.js";
import { validDeliberation, validToken } from "./wire.js";

export const SIGNATURE_DOMAIN = "parley-artifact-signature-v1";

/** The codes of a refused signature (class invalid_signature). */
export type SignatureCode =
  | "signature.invalid_input"
  | "signature.missing"
  | "signature.malformed"
  | "signature.unknown_token"
  | "signature.wrong_key"
  | "signature.bad"
  | "signature.invalid_binding";

export class SignatureError extends Error {
  readonly errorClass = "invalid_signature";
  readonly code: SignatureCode;
  constructor(code: SignatureCode, detail = "") {
    super(code + (detail ? ": " + detail : ""));
    this.name = "SignatureError";
    this.code = code;
  }
}

/** The signed message for an artifact id A published as token T in deliberation D. */
export function signedMessage(deliberation: string, token: string, artifactId: string): Buffer {
  if (!validDeliberation(deliberation)) throw new SignatureError("signature.invalid_input", "deliberation");
  if (!validToken(token)) throw new SignatureError("signature.invalid_input", "token");
  if (!ID_PATTERN.test(artifactId)) throw new SignatureError("signature.invalid_input", "artifact id");
  return Buffer.concat([
    Buffer.of(0xff),
    Buffer.from(`${SIGNATURE_DOMAIN}\n${deliberation}\n${token}\n${artifactId}\n`, "ascii"),
  ]);
}

const USER_KEY = /^U[A-Z2-7]{55}$/;
const SIG = /^[A-Za-z0-9_-]{86}$/;

/** A signer holding an nkeys user seed (`SU…`). */
export class Signer {
  readonly #kp: KeyPair;
  readonly publicKey: string;
  constructor(seed: string) {
    if (!seed.startsWith("SU")) throw new SignatureError("signature.invalid_input", "not an nkeys user seed");
    let kp: KeyPair;
    try {
      kp = fromSeed(new TextEncoder().encode(seed));
    } catch (e) {
      throw new SignatureError("signature.invalid_input", `seed: ${(e as Error).message}`);
    }
    this.#kp = kp;
    this.publicKey = kp.getPublicKey();
  }
  /** The two headers for an artifact. */
  sign(deliberation: string, token: string, artifactId: string): { key: string; signature: string } {
    const sig = this.#kp.sign(signedMessage(deliberation, token, artifactId));
    return { key: this.publicKey, signature: Buffer.from(sig).toString("base64url") };
  }
}

function decodeSignature(s: string): Uint8Array | null {
  if (!SIG.test(s)) return null;
  const b = Buffer.from(s, "base64url");
  // Only the one canonical spelling: no non-zero padding bits.
  if (b.length !== 64 || b.toString("base64url") !== s) return null;
  return b;
}

/** The signature headers of a message, as read (a header given twice is malformed). */
export interface SignatureHeaders {
  key?: string[];
  signature?: string[];
}

/** Checks a signature under the key it names (no binding). */
export function verifyKey(deliberation: string, token: string, artifactId: string, h: SignatureHeaders): string {
  const msg = signedMessage(deliberation, token, artifactId);
  const keys = h.key ?? [];
  const sigs = h.signature ?? [];
  if (keys.length === 0 && sigs.length === 0) throw new SignatureError("signature.missing");
  if (keys.length !== 1 || sigs.length !== 1) throw new SignatureError("signature.malformed", "one header without the other, or one given twice");
  const key = keys[0];
  if (!USER_KEY.test(key)) throw new SignatureError("signature.malformed", "Parley-Key is not an nkeys user public key");
  let pub: KeyPair;
  try {
    pub = fromPublic(key);
  } catch {
    throw new SignatureError("signature.malformed", "Parley-Key is not an nkeys user public key");
  }
  const sig = decodeSignature(sigs[0]);
  if (!sig) throw new SignatureError("signature.malformed", "Parley-Signature is not 86 characters of unpadded base64url of 64 bytes");
  if (!pub.verify(msg, sig)) throw new SignatureError("signature.bad");
  return key;
}

/** Checks a signature against a charter's binding (token → user public key). */
export function verify(deliberation: string, token: string, artifactId: string, h: SignatureHeaders, binding: Record<string, string>): void {
  signedMessage(deliberation, token, artifactId);
  const keys = h.key ?? [];
  const sigs = h.signature ?? [];
  if (keys.length === 0 && sigs.length === 0) throw new SignatureError("signature.missing");
  if (keys.length !== 1 || sigs.length !== 1 || !USER_KEY.test(keys[0]) || !decodeSignature(sigs[0])) {
    verifyKey(deliberation, token, artifactId, h); // throws malformed
  }
  const bound = Object.prototype.hasOwnProperty.call(binding, token) ? binding[token] : undefined;
  if (bound === undefined) throw new SignatureError("signature.unknown_token");
  if (bound !== keys[0]) throw new SignatureError("signature.wrong_key");
  verifyKey(deliberation, token, artifactId, h);
}
