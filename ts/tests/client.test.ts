// The participant against a real engine: PARLEY_NATS_URL names one (the
// Go test ts_test.go starts an engine and sets it; without it these tests
// are skipped).

import { test } from "node:test";
import assert from "node:assert/strict";
import { createUser } from "@nats-io/nkeys";
import { Participant, RejectedError, ServiceError, seal, newDeliberationId, artifactSubject, H, localCredentials } from "../src/index.js";
import { connect } from "@nats-io/transport-node";

const url = process.env.PARLEY_NATS_URL;
const data = process.env.PARLEY_DATA;
const skip = url && data ? false : "PARLEY_NATS_URL and PARLEY_DATA are not set (ts_test.go sets them)";
// The engine's participant user, from its data directory.
const nats = () => localCredentials(data);

function userSeed(): { seed: string; key: string } {
  const kp = createUser();
  return { seed: new TextDecoder().decode(kp.getSeed()), key: kp.getPublicKey() };
}

async function rejects(p: Promise<unknown>): Promise<any> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  assert.fail("resolved");
}

test("open, publish, verdicts, state, reads and watch", { skip }, async () => {
  const alice = userSeed();
  const bob = userSeed();
  const a = await Participant.connect(url!, "alice", { seed: alice.seed, nats: nats() });
  const b = await Participant.connect(url!, "bob", { seed: bob.seed, nats: nats() });
  const unsigned = await Participant.connect(url!, "alice", { nats: nats() });
  try {
    // A charter the engine refuses: the open's verdict says why.
    const bad = await rejects(a.open({ title: "x", limits: { max_artifactz: 3 } } as any));
    assert.ok(bad instanceof RejectedError, String(bad));
    assert.equal(bad.outcome.outcome, "rejected");
    assert.equal(bad.outcome.code, "control.invalid");

    const { id } = await a.open({ title: "typescript", participants: ["alice", "bob"], keys: { alice: alice.key, bob: bob.key }, require_signatures: true });
    const claim = await a.submit(id, { artifact_type: "CLAIM", payload: { statement: "The cache halves p99." } });
    assert.equal(claim.outcome.outcome, "accepted");
    assert.equal(claim.outcome.participant, "alice");
    assert.equal(claim.outcome.artifact_id, claim.artifact.id);

    // The same artifact again: the stream's dedupe window absorbs the retry.
    const again = await a.publish(id, claim.artifact);
    assert.equal(again.duplicate, true);
    assert.equal(again.position, claim.position);

    // Unsigned where signatures are required: refused, with the reason.
    const u = await unsigned.publish(id, { artifact_type: "CLAIM", payload: { statement: "not signed" } });
    const uo = await unsigned.waitOutcome(id, u.position, u.artifact.id);
    assert.equal(uo.outcome, "rejected");
    assert.equal(uo.code, "signature.missing");
    assert.equal(uo.error_class, "invalid_signature");
    // Signed, but by bob's key under alice's token.
    const wrong = await new Participant(b.nc, "alice", { seed: bob.seed }).publish(id, { artifact_type: "CLAIM", payload: { statement: "bob as alice" } });
    assert.equal((await b.waitOutcome(id, wrong.position)).code, "signature.wrong_key");
    // A reference to nothing in the DAG.
    const dangling = await rejects(b.submit(id, { artifact_type: "OBJECTION", payload: { statement: "no", blocking: true }, references: [{ artifact_id: "sha256:" + "0".repeat(64), relation: "objects-to" }] }));
    assert.equal(dangling.outcome.code, "reference.unavailable");

    const obj = await b.submit(id, { artifact_type: "OBJECTION", payload: { statement: "One workload only.", blocking: true }, references: [{ artifact_id: claim.artifact.id, relation: "objects-to" }] });
    const view = await b.state(id);
    assert.equal(view.status, "open");
    assert.deepEqual(view.open_blocking_objections, [obj.artifact.id]);
    assert.equal(view.rejections_by_code["signature.missing"], 1);

    // Reads: the artifact itself, opened; listings page by page.
    const got = await b.artifact(id, claim.artifact.id);
    assert.deepEqual(got?.bytes, claim.artifact.bytes);
    assert.equal(await b.artifact(id, "sha256:" + "1".repeat(64)), null);
    const listed: string[] = [];
    for await (const e of b.artifacts(id, 1)) listed.push(e.artifact_id);
    assert.deepEqual(listed, [claim.artifact.id, obj.artifact.id]);
    let found = false;
    for await (const d of a.deliberations({ status: "open", limit: 1 })) if (d.id === id) found = true;
    assert.ok(found);
    const rej = await a.rejections(id);
    assert.equal(rej.total, 3);

    // The API's refusals are classified.
    const nf = await rejects(a.state(newDeliberationId()));
    assert.ok(nf instanceof ServiceError);
    assert.equal(nf.status, 404);
    assert.equal(nf.code, "not_found");
    const br = await rejects(a.outcome(id, 0));
    assert.equal(br.status, 400);
    assert.equal(br.code, "bad_request");
    const lim = await rejects(a.request("artifacts", { id, limit: 5000 }));
    assert.equal(lim.code, "limit.invalid");

    // The final decision disposes of the objection; the supervisor ends it.
    const dec = await a.submit(id, {
      artifact_type: "DECISION",
      payload: { outcome: "Adopt it.", status: "final", objection_dispositions: [{ objection: obj.artifact.id, disposition: "addressed", rationale: "Measured on three workloads." }], unresolved_issues: [] },
      references: [{ artifact_id: claim.artifact.id, relation: "decides" }],
    });
    const closure = await a.closure(id, dec.artifact.id);
    assert.equal(closure.ok, true);

    // Watch from the start: every message in stream order, artifacts opened.
    const seen: string[] = [];
    for await (const m of b.watch(id)) {
      if (m.kind === "ctl") seen.push("ctl:" + m.control?.op);
      else if (m.artifact) seen.push(`${m.participant}:${m.artifact.artifact_type}`);
      else seen.push(`${m.participant}:error`);
      if (m.artifact?.artifact_type === "TERMINATION") {
        assert.equal(m.artifact.payload.state, "completed");
        assert.equal(m.participant, "_supervisor");
        break;
      }
      if (m.position === claim.position) assert.deepEqual(m.signature?.key, [alice.key]);
      if (m.position === wrong.position) assert.deepEqual(m.signature?.key, [bob.key]);
      if (m.position === u.position) assert.equal(m.signature, undefined);
    }
    assert.deepEqual(seen.filter((s) => !s.endsWith("FAILURE")), [
      "ctl:open",
      "alice:CLAIM",
      "alice:CLAIM",
      "alice:CLAIM",
      "bob:OBJECTION",
      "bob:OBJECTION",
      "alice:DECISION",
      "_supervisor:TERMINATION",
    ]);
    const end = await a.state(id);
    assert.equal(end.status, "completed");
    // After the end, an artifact is late.
    const late = await rejects(b.submit(id, { artifact_type: "CLAIM", payload: { statement: "after the end" } }));
    assert.equal(late.outcome.outcome, "late");
  } finally {
    await a.close();
    await b.close();
    await unsigned.close();
  }
});

test("publish headers: dedupe id, expected stream and the signature on the stored message", { skip }, async () => {
  const k = userSeed();
  const p = await Participant.connect(url!, "carol", { seed: k.seed, nats: nats() });
  try {
    const { id } = await p.open({ title: "headers" });
    const a = seal({ artifact_type: "CLAIM", payload: { statement: "headers" } });
    const pub = await p.publish(id, a);
    // The stored message, read back through the watch.
    for await (const m of p.watch(id, { fromPosition: pub.position })) {
      assert.equal(m.position, pub.position);
      assert.match(m.headers?.get(H.msgId) ?? "", /^[0-9a-f]{32}$/);
      assert.equal(m.headers?.get(H.expectedStream), "PARLEY");
      assert.equal(m.subject, artifactSubject(id, "carol"));
      assert.deepEqual(m.signature, { key: [k.key], signature: [p.signer!.sign(id, "carol", a.id).signature] });
      break;
    }
    // A control message over 4 KiB never leaves the participant.
    await assert.rejects(p.control(id, { op: "cancel", reason: "x".repeat(5000) }), RangeError);
  } finally {
    await p.close();
  }
});

test("a client without credentials reads but cannot write; localCredentials says what is missing", { skip }, async () => {
  const nc = await connect({ servers: url! });
  const anon = new Participant(nc, "mallory", { attemptTimeoutMs: 300, retryForMs: 1500 });
  try {
    const e = await rejects(anon.open({ title: "junk" }));
    assert.match(String(e), /permission|Permissions|timeout|TIMEOUT/i, String(e));
  } finally {
    await nc.close();
  }
  assert.throws(() => localCredentials("/nonexistent-parley-data"), /is an engine running with --data/);
});
