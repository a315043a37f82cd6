// Artifact semantics against testdata/vectors/semantic.json, sealing, and
// the signatures against the worked example of docs/WIRE.md.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as crypto from "node:crypto";
import { join } from "node:path";
import { open, seal, validate, checkRelation, ArtifactError, type Relation } from "../src/artifact.js";
import { CanonError } from "../src/canon.js";
import { Signer, signedMessage, verify, verifyKey, SignatureError } from "../src/signing.js";
import { MsgIds, artifactSubject, validDeliberation, validToken, newDeliberationId, parseSubject } from "../src/wire.js";
import { root, testdata } from "./paths.js";

function thrown(f: () => unknown): any {
  try {
    f();
  } catch (e) {
    return e;
  }
  assert.fail("accepted");
}

test("semantic.json: every artifact vector", () => {
  const suite = JSON.parse(readFileSync(join(testdata, "vectors", "semantic.json"), "utf8"));
  assert.equal(suite.vectors.length, suite.count);
  for (const v of suite.vectors) {
    if (v.error_class) {
      const e = thrown(() => open(v.input));
      assert.ok(e instanceof ArtifactError, `${v.name}: ${e}`);
      assert.equal(e.code, v.code, `${v.name}: ${e.message}`);
      assert.equal(e.errorClass, v.error_class, v.name);
      continue;
    }
    assert.equal(open(v.input).id, v.artifact_id, v.name);
  }
});

test("semantic.json: relation applicability", () => {
  const suite = JSON.parse(readFileSync(join(testdata, "vectors", "semantic.json"), "utf8"));
  assert.equal(suite.relations.length, suite.relation_count);
  for (const r of suite.relations) {
    const src = open(r.source);
    const t = open(r.target);
    const target = { id: t.id, artifact_type: t.artifact_type, final_decision: t.artifact_type === "DECISION" && t.payload.status === "final" };
    if (r.error_class) {
      const e = thrown(() => checkRelation(src, r.relation as Relation, target, r.same_deliberation));
      assert.equal(e.code, r.code, `${r.name}: ${e.message}`);
      assert.equal(e.errorClass, r.error_class, r.name);
    } else checkRelation(src, r.relation as Relation, target, r.same_deliberation);
  }
});

test("versions: MAJOR.MINOR of 1 to 9 digits each, only 0.1 supported", () => {
  const claim = (v: unknown) => ({ protocol_version: v, artifact_type: "CLAIM", payload: { statement: "x" }, references: [] });
  const code = (v: unknown) => {
    try {
      validate(claim(v));
      return "ok";
    } catch (e) {
      return (e as ArtifactError).code;
    }
  };
  assert.equal(code("0.1"), "ok");
  assert.equal(code("00.1"), "version.unsupported_minor");
  assert.equal(code("0.01"), "version.unsupported_minor");
  assert.equal(code("10.1"), "version.unsupported_major");
  assert.equal(code("0.1234567890"), "version.malformed");
  assert.equal(code("0x0.1"), "version.malformed");
  assert.equal(code(" 0.1"), "version.malformed");
});

test("seal: canonical bytes, artifact_id first, and what it refuses", () => {
  const a = seal({ artifact_type: "CLAIM", payload: { statement: "e\u0301", n: -0 } });
  assert.match(a.bytes.toString(), /^\{"artifact_id":"sha256:[0-9a-f]{64}","artifact_type":"CLAIM","payload":\{"n":0,"statement":"\u00e9"\},"protocol_version":"0.1","references":\[\]\}$/);
  assert.equal(open(a.bytes).id, a.id);
  assert.equal(thrown(() => seal({ artifact_type: "CLAIM", payload: { statement: "x", f: 1.5 } })).code, "number.fraction");
  assert.equal(thrown(() => seal({ artifact_type: "CLAIM", payload: { statement: "\ud800" } })).code, "string.unpaired_surrogate");
  assert.equal(thrown(() => seal({ artifact_type: "CLAIM", payload: { statement: " " } })).code, "semantic.invalid_statement");
  assert.equal(thrown(() => seal({ artifact_type: "EVIDENCE", payload: { content: "c", provenance_class: "HYPOTHESIS" } })).code, "semantic.missing_supports");
  assert.ok(thrown(() => seal({ artifact_type: "CLAIM", payload: { statement: "x", big: 2 ** 60 } })) instanceof CanonError);
  // A received artifact with a wrong id is refused by the profile.
  const forged = a.bytes.toString().replace(/"statement":"[^"]*"/, '"statement":"forged"');
  assert.equal(thrown(() => open(forged)).code, "id.mismatch");
});

// The worked example at the end of docs/WIRE.md, read from the document.
function workedExample(): Record<string, string> {
  const doc = readFileSync(join(root, "docs", "WIRE.md"), "utf8");
  const block = /```wire-example\n([\s\S]*?)```/.exec(doc);
  assert.ok(block, "no wire-example block");
  const out: Record<string, string> = {};
  for (const line of block[1].split("\n")) {
    const m = /^(\S+)\s+(.*)$/.exec(line);
    if (m) out[m[1]] = m[2];
  }
  return out;
}

test("docs/WIRE.md worked example: id, body, signed message and signature", () => {
  const ex = workedExample();
  const a = seal({ artifact_type: "CLAIM", payload: { statement: ex.statement } });
  assert.equal(a.id, ex.artifact_id);
  assert.equal(a.bytes.toString(), ex.body);
  assert.equal(artifactSubject(ex.deliberation, ex.participant), ex.subject);
  const msg = signedMessage(ex.deliberation, ex.participant, a.id);
  assert.equal(msg.toString("hex"), ex.signed);
  assert.equal(msg.length, 145);
  const s = new Signer(ex.seed);
  assert.equal(s.publicKey, ex["Parley-Key"]);
  const { key, signature } = s.sign(ex.deliberation, ex.participant, a.id);
  assert.equal(key, ex["Parley-Key"]);
  assert.equal(signature, ex["Parley-Signature"]);
  const h = { key: [key], signature: [signature] };
  verify(ex.deliberation, ex.participant, a.id, h, { [ex.participant]: key });
});

test("signatures: the refusals, in their order", () => {
  const ex = workedExample();
  const s = new Signer(ex.seed);
  const D = ex.deliberation, T = ex.participant;
  const a = seal({ artifact_type: "CLAIM", payload: { statement: ex.statement } });
  const { key, signature } = s.sign(D, T, a.id);
  const code = (f: () => unknown) => (thrown(f) as SignatureError).code;
  const bind = { [T]: key };
  assert.equal(code(() => verify(D, T, a.id, {}, bind)), "signature.missing");
  assert.equal(code(() => verify(D, T, a.id, { key: [key] }, bind)), "signature.malformed");
  assert.equal(code(() => verify(D, T, a.id, { key: [key, key], signature: [signature, signature] }, bind)), "signature.malformed");
  assert.equal(code(() => verify(D, T, a.id, { key: [key.toLowerCase()], signature: [signature] }, bind)), "signature.malformed");
  assert.equal(code(() => verify(D, T, a.id, { key: [key], signature: [signature + "="] }, bind)), "signature.malformed");
  // The last character carrying non-zero padding bits.
  const last = signature[85];
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const bumped = signature.slice(0, 85) + alphabet[alphabet.indexOf(last) ^ 1];
  assert.equal(code(() => verify(D, T, a.id, { key: [key], signature: [bumped] }, bind)), "signature.malformed");
  assert.equal(code(() => verify(D, T, a.id, { key: [key], signature: [signature] }, { bob: key })), "signature.unknown_token");
  assert.equal(code(() => verify(D, "bob", a.id, { key: [key], signature: [signature] }, { bob: "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4" })), "signature.wrong_key");
  assert.equal(code(() => verify(D, "bob", a.id, { key: [key], signature: [signature] }, { bob: key })), "signature.bad");
  const D2 = newDeliberationId();
  assert.equal(code(() => verifyKey(D2, T, a.id, { key: [key], signature: [signature] })), "signature.bad");
  assert.equal(code(() => signedMessage("not-a-uuid", T, a.id)), "signature.invalid_input");
  assert.equal(code(() => signedMessage(D, "_supervisor", a.id)), "signature.invalid_input");
  assert.equal(code(() => new Signer("SAAAAA")), "signature.invalid_input");
});

test("wire: tokens, deliberation ids, subjects and dedupe ids", () => {
  assert.ok(validToken("alice") && validToken("a-b_c") && validToken("x".repeat(64)));
  assert.ok(!validToken("_supervisor") && !validToken("-a") && !validToken("x".repeat(65)) && !validToken("a.b") && !validToken(""));
  const id = newDeliberationId();
  assert.ok(validDeliberation(id));
  assert.equal(id[14], "7");
  assert.ok(!validDeliberation(id.toUpperCase()));
  assert.deepEqual(parseSubject(`parley.${id}.art.alice`), { deliberation: id, kind: "art", participant: "alice" });
  assert.deepEqual(parseSubject(`parley.${id}.ctl`), { deliberation: id, kind: "ctl" });
  assert.equal(parseSubject(`parley.${id}.binding`), null);
  const a = new MsgIds(), b = new MsgIds();
  const sub = artifactSubject(id, "alice");
  const x = "sha256:" + "a".repeat(64);
  assert.match(a.artifact(sub, x), /^[0-9a-f]{32}$/);
  assert.equal(a.artifact(sub, x), a.artifact(sub, x));
  assert.notEqual(a.artifact(sub, x), b.artifact(sub, x));
  assert.notEqual(a.artifact(sub, x), a.control(sub, x));
  // The construction of the Go client: HMAC-SHA256 over the parts joined by 0x00.
  const k = Buffer.alloc(32, 7);
  const want = crypto.createHmac("sha256", k).update(Buffer.from(`control\u0000parley.${id}.ctl\u0000open`)).digest().subarray(0, 16).toString("hex");
  assert.equal(new MsgIds(k).control(`parley.${id}.ctl`, "open"), want);
});

test("README.md's example is examples/readme.ts, which compiles", () => {
  const readme = readFileSync(join(root, "ts", "README.md"), "utf8");
  const block = /```ts\n([\s\S]*?)```/.exec(readme);
  assert.ok(block);
  const example = readFileSync(join(root, "ts", "examples", "readme.ts"), "utf8");
  assert.ok(example.endsWith(block[1]), "README.md's example and examples/readme.ts differ");
  assert.ok(block[1].split("\n").length <= 25);
});
