// Retries, against a bare NATS server with JetStream and no engine
// (PARLEY_BARE_NATS_URL, which ts_test.go sets).

import { test } from "node:test";
import assert from "node:assert/strict";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager, RetentionPolicy, StorageType, DiscardPolicy } from "@nats-io/jetstream";
import { Participant, newDeliberationId, STREAM_NAME, STREAM_SUBJECTS, H } from "../src/index.js";

const url = process.env.PARLEY_BARE_NATS_URL;
const skip = url ? false : "PARLEY_BARE_NATS_URL is not set (ts_test.go sets it)";

test("a publish no stream answers is sent again with the same dedupe id until one does", { skip }, async () => {
  const nc = await connect({ servers: url! });
  const watcher = await connect({ servers: url! });
  try {
    const p = new Participant(nc, "alice", { attemptTimeoutMs: 300, retryForMs: 20000 });
    const id = newDeliberationId();
    // Every attempt is seen on core NATS; the first one makes the stream
    // appear, as an engine starting late would.
    const attempts: string[] = [];
    const sub = watcher.subscribe(`parley.${id}.>`);
    const seen = (async () => {
      for await (const m of sub) {
        attempts.push(m.headers?.get(H.msgId) ?? "");
        if (attempts.length === 1) {
          const jsm = await jetstreamManager(watcher);
          await jsm.streams.add({ name: STREAM_NAME, subjects: [...STREAM_SUBJECTS], storage: StorageType.File, retention: RetentionPolicy.Limits, discard: DiscardPolicy.New });
        }
      }
    })();
    const pub = await p.publish(id, { artifact_type: "CLAIM", payload: { statement: "retried" } });
    assert.equal(pub.position, 1);
    assert.equal(pub.duplicate, false);
    // Every attempt sent before the acknowledgement has reached the watcher.
    await watcher.flush();
    await sub.drain();
    await seen;
    assert.ok(attempts.length >= 2, `${attempts.length} attempts`);
    assert.match(attempts[0], /^[0-9a-f]{32}$/);
    assert.ok(attempts.every((a) => a === attempts[0]), `dedupe ids differ: ${attempts}`);
    assert.equal(p.position, 1);
  } finally {
    await nc.close();
    await watcher.close();
  }
});

test("a read nobody answers is retried until the deadline, then fails", { skip }, async () => {
  const nc = await connect({ servers: url! });
  try {
    const p = new Participant(nc, "alice", { attemptTimeoutMs: 200, retryForMs: 600 });
    const start = Date.now();
    await assert.rejects(p.state(newDeliberationId()), (e: Error) => /parley\.api\.deliberation/.test(e.message));
    const took = Date.now() - start;
    assert.ok(took >= 600 && took < 600 + 1000, `gave up after ${took} ms`);
  } finally {
    await nc.close();
  }
});
