// The canonical form against every conformance vector the Go implementation
// is held to: testdata/vectors and the upstream suites under
// testdata/upstream, each read as the Go tests read it.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { artifactId, canonicalize, verifyId, jcsDigest, CanonError, type Profile } from "../src/canon.js";
import { testdata } from "./paths.js";

const upstream = join(testdata, "upstream");
const read = (...p: string[]) => readFileSync(join(...p));

interface Vector {
  name: string;
  profile: Profile;
  operation: "id" | "verify" | "canonicalize";
  input?: string;
  input_hex?: string;
  input_repeat?: { prefix: string; unit: string; count: number; suffix: string };
  canonical?: string;
  canonical_sha256?: string;
  artifact_id?: string;
  digest?: string;
  error_class?: string;
  code?: string;
  offset?: number;
}

function inputOf(v: Vector): Buffer {
  if (v.input !== undefined) return Buffer.from(v.input, "utf8");
  if (v.input_hex !== undefined) return Buffer.from(v.input_hex, "hex");
  if (v.input_repeat) {
    const r = v.input_repeat;
    return Buffer.from(r.prefix + r.unit.repeat(r.count) + r.suffix, "utf8");
  }
  return Buffer.alloc(0);
}

function run(v: Vector): { canonical: Buffer; id?: string; digest?: string } {
  const src = inputOf(v);
  switch (v.operation) {
    case "id": {
      const r = artifactId(src);
      return { canonical: r.canonical, id: r.id };
    }
    case "verify": {
      const r = verifyId(src);
      return { canonical: r.canonical, id: r.id };
    }
    case "canonicalize": {
      if (v.profile === "jcs") {
        const r = jcsDigest(src);
        return { canonical: r.canonical, digest: r.digest };
      }
      return { canonical: canonicalize(src, v.profile) };
    }
  }
}

function rejection(f: () => unknown): CanonError {
  try {
    f();
  } catch (e) {
    if (e instanceof CanonError) return e;
    throw new Error(`not a CanonError: ${e}`);
  }
  assert.fail("accepted");
}

function checkVector(v: Vector, offsets: boolean) {
  if (v.error_class) {
    const e = rejection(() => run(v));
    assert.equal(e.errorClass, v.error_class, `${v.name}: ${e.message}`);
    assert.equal(e.code, v.code, `${v.name}: ${e.message}`);
    if (offsets && v.offset !== undefined) assert.equal(e.offset, v.offset, `${v.name}: ${e.message}`);
    return;
  }
  const got = run(v);
  if (v.canonical !== undefined) assert.equal(got.canonical.toString("utf8"), v.canonical, v.name);
  if (v.canonical_sha256 !== undefined) {
    assert.equal(createHash("sha256").update(got.canonical).digest("hex"), v.canonical_sha256, v.name);
  }
  if (v.artifact_id !== undefined) assert.equal(got.id, v.artifact_id, v.name);
  if (v.digest !== undefined) assert.equal(got.digest, v.digest, v.name);
}

test("canonical.json: every vector", () => {
  const suite = JSON.parse(read(testdata, "vectors", "canonical.json").toString());
  assert.equal(suite.vectors.length, suite.count);
  assert.ok(suite.count >= 185);
  let rejected = 0;
  for (const v of suite.vectors as Vector[]) {
    checkVector(v, false);
    if (v.error_class) rejected++;
  }
  assert.ok(rejected > 60);
});

test("multifault.json: the deciding fault's class, code and offset", () => {
  const suite = JSON.parse(read(testdata, "vectors", "multifault.json").toString());
  assert.equal(suite.vectors.length, suite.count);
  assert.ok(suite.count >= 269);
  for (const v of suite.vectors as Vector[]) checkVector(v, true);
});

test("amd-upstream: 4 positive and 11 negative vectors", () => {
  const dir = join(upstream, "amd-upstream");
  const m = JSON.parse(read(dir, "manifest.json").toString());
  assert.equal(m.positive.length, 4);
  assert.equal(m.negative.length, 11);
  for (const v of m.positive) {
    const input = read(dir, "positive", v.name + ".input.json");
    const want = read(dir, "positive", v.name + ".canonical.json");
    assert.deepEqual(canonicalize(input, "amd"), want, v.name);
    const wantId = read(dir, "positive", v.name + ".artifact-id.txt").toString().replace(/\n$/, "");
    assert.equal(artifactId(input).id, wantId, v.name);
  }
  for (const v of m.negative) {
    const input = read(dir, "negative", v.name + ".input.json");
    const e = rejection(() => (v.operation === "verify" ? verifyId(input) : artifactId(input)));
    assert.equal(e.errorClass, v.error_class, `${v.name}: ${e.message}`);
  }
});

test("EP-CANONICALIZATION-v1: all 35 vectors", () => {
  const suite = JSON.parse(read(upstream, "ep-upstream", "canonicalization.v1.json").toString());
  assert.equal(suite.vectors.length, 35);
  for (const v of suite.vectors) {
    const input = v.canonicalization.input_json as string;
    if (!v.expect.valid) {
      rejection(() => jcsDigest(input));
      continue;
    }
    assert.equal(jcsDigest(input).digest, "sha256:" + v.canonicalization.expected_digest, v.id);
  }
});

test("RFC 8785 reference vectors, both profiles", () => {
  const dir = join(upstream, "jcs-upstream");
  const cases: [string, string, boolean, boolean][] = [
    ["cyberphone", "arrays", true, true],
    ["cyberphone", "french", true, true],
    ["cyberphone", "structures", true, false],
    ["cyberphone", "unicode", true, true],
    ["cyberphone", "values", false, false],
    ["cyberphone", "weird", true, true],
    ["gowebpki-extra", "true", true, true],
    ["gowebpki-extra", "false", true, true],
    ["gowebpki-extra", "null", true, true],
    ["gowebpki-extra", "simpleString", true, true],
  ];
  for (const [sub, name, jcsOK, amdOK] of cases) {
    const input = read(dir, sub, "input", name + ".json");
    if (!jcsOK) assert.equal(rejection(() => canonicalize(input, "jcs")).errorClass, "unsupported_value", name);
    else assert.deepEqual(canonicalize(input, "jcs"), read(dir, sub, "output", name + ".json"), name);
    if (!amdOK) {
      assert.equal(rejection(() => canonicalize(input, "amd")).errorClass, "unsupported_value", name);
      continue;
    }
    const want = sub === "cyberphone" ? read(dir, "derived-profile-a", "output", name + ".json") : read(dir, sub, "output", name + ".json");
    assert.deepEqual(canonicalize(input, "amd"), want, name);
  }
});

test("RFC 8785 key sorting, both orders", () => {
  const dir = join(upstream, "jcs-upstream", "rfc8785");
  const input = read(dir, "key_sorting_input.json");
  const strip = (b: Buffer) => b.toString("utf8").replace(/\n$/, "");
  assert.equal(canonicalize(input, "jcs").toString(), strip(read(dir, "derived", "key_sorting_output.jcs.json")));
  assert.equal(canonicalize(input, "amd").toString(), strip(read(dir, "derived", "key_sorting_output.profile-a.json")));
});

function isSafeIntegerText(s: string): boolean {
  s = s.replace(/^-/, "");
  if (s === "" || s.length > 16 || !/^[0-9]+$/.test(s)) return false;
  return s.length < 16 || s <= "9007199254740991";
}

test("RFC 8785 appendix B: integers in bounds written as digits, the rest refused", () => {
  const rows = read(upstream, "jcs-upstream", "rfc8785", "appendix_b.csv").toString().trim().split("\n").slice(1);
  assert.equal(rows.length, 24);
  let accepted = 0;
  for (const row of rows) {
    const want = row.split(",")[1];
    if (isSafeIntegerText(want)) {
      assert.equal(canonicalize(want, "jcs").toString(), want);
      accepted++;
    } else rejection(() => canonicalize(want, "jcs"));
  }
  assert.ok(accepted > 0);
});

function jsonl(name: string): any[] {
  return read(upstream, "jcs-upstream", "json-canon", name)
    .toString()
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l));
}

test("json-canon: core, reject, verify and offsets", () => {
  for (const r of jsonl("core.jsonl")) {
    let got: Buffer;
    try {
      got = canonicalize(r.input, "jcs");
    } catch (e) {
      const ce = e as CanonError;
      assert.ok(ce.errorClass === "unsupported_value" && (ce.code === "number.non_integer" || ce.code === "number.out_of_range"), `${r.id}: ${ce.message}`);
      continue;
    }
    assert.equal(got.toString(), r.want_stdout, r.id);
  }
  for (const r of jsonl("reject.jsonl")) {
    if (r.args && r.args.length > 0) continue;
    const decided = /NEGZERO|NONCHARACTER/.test(r.want_stderr_contains ?? "");
    let ok = true;
    try {
      canonicalize(r.input, "jcs");
    } catch {
      ok = false;
    }
    assert.equal(ok, decided, `${r.id} ${JSON.stringify(r.input)}`);
  }
  for (const r of jsonl("verify.jsonl")) {
    if (r.args && r.args.length > 0) continue;
    let canonical = false;
    try {
      canonical = canonicalize(r.input, "jcs").toString() === r.input;
    } catch {
      canonical = false;
    }
    assert.equal(canonical, r.want_exit === 0, r.id);
  }
  for (const r of jsonl("offsets.jsonl")) {
    if ((r.input as string).includes("FDD0") || /\ufdd0/.test(r.input)) {
      canonicalize(r.input, "jcs");
      continue;
    }
    const e = rejection(() => canonicalize(r.input, "jcs"));
    assert.equal("at byte " + e.offset, r.want_stderr_contains, `${r.id}: ${e.message}`);
  }
});

test("JSONTestSuite against the profile expectations", () => {
  const dir = join(upstream, "jsontestsuite");
  const lines = read(dir, "profile-expectations.tsv").toString().trim().split("\n").slice(1);
  assert.equal(lines.length, 318);
  for (const line of lines) {
    const [file, , v, reason] = line.split("\t");
    let verdict = v;
    if (verdict.startsWith("DECIDE")) verdict = "accept";
    else if (verdict.startsWith("reject-under-JCS-depth")) verdict = "reject";
    const input = read(dir, "test_parsing", file);
    for (const p of ["amd", "jcs"] as Profile[]) {
      let err: unknown = null;
      try {
        canonicalize(input, p);
      } catch (e) {
        err = e;
        assert.ok(e instanceof CanonError, `${p} ${file}: ${e}`);
      }
      if (verdict === "accept") assert.equal(err, null, `${p} ${file}: ${err}`);
      else if (verdict === "reject") {
        if (p === "jcs" && reason === "non-integer") continue;
        assert.notEqual(err, null, `${p} ${file} (${reason}) accepted`);
      } else assert.fail(`${file}: unknown verdict ${verdict}`);
    }
  }
});

test("JSONTestSuite transform files", () => {
  const dir = join(upstream, "jsontestsuite", "test_transform");
  const cases: [string, boolean, boolean][] = [
    ["number_-9223372036854775808.json", false, false],
    ["number_-9223372036854775809.json", false, false],
    ["number_1.0.json", false, true],
    ["number_1.000000000000000005.json", false, false],
    ["number_1000000000000000.json", true, true],
    ["number_10000000000000000999.json", false, false],
    ["number_1e-999.json", false, false],
    ["number_1e6.json", false, true],
    ["number_9223372036854775807.json", false, false],
    ["number_9223372036854775808.json", false, false],
    ["object_key_nfc_nfd.json", false, true],
    ["object_key_nfd_nfc.json", false, true],
    ["object_same_key_different_values.json", false, false],
    ["object_same_key_same_value.json", false, false],
    ["object_same_key_unclear_values.json", false, false],
    ["string_1_escaped_invalid_codepoint.json", false, false],
    ["string_1_invalid_codepoint.json", false, false],
    ["string_2_escaped_invalid_codepoints.json", false, false],
    ["string_2_invalid_codepoints.json", false, false],
    ["string_3_escaped_invalid_codepoints.json", false, false],
    ["string_3_invalid_codepoints.json", false, false],
    ["string_with_escaped_NULL.json", true, true],
  ];
  assert.equal(readdirSync(dir).length, cases.length);
  const ok = (f: () => unknown) => {
    try {
      f();
      return true;
    } catch (e) {
      assert.ok(e instanceof CanonError);
      return false;
    }
  };
  for (const [file, amdOK, jcsOK] of cases) {
    const input = read(dir, file);
    assert.equal(ok(() => canonicalize(input, "amd")), amdOK, "amd " + file);
    assert.equal(ok(() => canonicalize(input, "jcs")), jcsOK, "jcs " + file);
  }
  assert.equal(rejection(() => canonicalize(read(dir, "object_key_nfc_nfd.json"), "amd")).code, "nfc.collision");
});

test("Matrix canonical JSON examples", () => {
  const dir = join(upstream, "matrix-canonical");
  for (let n = 1; n <= 10; n++) {
    const name = `example${String(n).padStart(2, "0")}.json`;
    const input = read(dir, "input", name);
    if (n === 10) {
      assert.equal(rejection(() => canonicalize(input, "amd")).code, "number.exponent");
      continue;
    }
    assert.deepEqual(canonicalize(input, "amd"), read(dir, "output", name), name);
  }
});

test("binding-moment example: action and envelope digests", () => {
  assert.equal(
    jcsDigest(`{"disclose": ["travel_dates"], "recipient": "booking.example"}`).digest,
    "sha256:ff91e3166e64b892004d4b43b05ad6ed7ff0819463da80c72f27f47039c033fa",
  );
  assert.equal(
    jcsDigest(`{"disclose": ["passport_number", "travel_dates"], "recipient": "booking.example"}`).digest,
    "sha256:49be14ae6e74b950c0c7b790fa22538d45fb4853bb0f3b242b28204bee232945",
  );
  const env = jcsDigest(read(testdata, "seed002-envelope.json"));
  assert.equal(env.canonical.length, 895);
  assert.equal(env.digest, "sha256:0db384ab1b682c115d79babfefa91f014ad80c007d00c79119d748f32be232d1");
});

test("ids are stable under canonicalization, and limits refuse", () => {
  const x = Buffer.from('{"b":[1,-0,"\\u00e9"],"a":{"artifact_id":"nested"},"artifact_id":"whatever"}');
  const r = artifactId(x);
  assert.equal(artifactId(r.canonical).id, r.id);
  assert.deepEqual(canonicalize(r.canonical), r.canonical);
  assert.equal(rejection(() => artifactId(Buffer.alloc((1 << 20) + 1, 0x20))).code, "limit.size");
  assert.equal(rejection(() => artifactId("[]")).code, "value.top_level_not_object");
  assert.equal(rejection(() => artifactId('{"a":"' + "\u0301".repeat(31) + '"}')).code, "string.nonstarter_run");
  assert.equal(artifactId('{"a":"' + "\u0301".repeat(30) + '"}').canonical.length, 8 + 60);
});
