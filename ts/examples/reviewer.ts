// A reviewer that takes part in a deliberation on its own NATS connection:
// it watches the deliberation, answers every CLAIM of another participant
// with EVIDENCE that supports it and a blocking OBJECTION, and once the
// deliberation ends reports the final decision's closure as one JSON line.
//
//   PARLEY_NATS_URL=nats://127.0.0.1:4222 PARLEY_DATA=./parley-data PARLEY_DELIBERATION=<id> \
//   PARLEY_TOKEN=reviewer PARLEY_SEED=SU... node dist/examples/reviewer.js
//
// PARLEY_DATA is the engine's data directory, whose credentials.json holds
// its participant user; PARLEY_NATS_USER and PARLEY_NATS_PASSWORD give
// another engine's user instead.

import { Participant, localCredentials } from "../src/index.js";

const env = (k: string, d?: string) => process.env[k] ?? d ?? (() => { throw new Error(`${k} is not set`); })();
const id = env("PARLEY_DELIBERATION");
const nats = process.env.PARLEY_NATS_USER
  ? { user: process.env.PARLEY_NATS_USER, pass: process.env.PARLEY_NATS_PASSWORD ?? "" }
  : localCredentials(env("PARLEY_DATA", "./parley-data"));
const me = await Participant.connect(env("PARLEY_NATS_URL"), env("PARLEY_TOKEN", "reviewer"), { seed: process.env.PARLEY_SEED, nats });

const mine: string[] = [];
let end: { state: string; decision?: string } | undefined;
for await (const m of me.watch(id)) {
  const a = m.artifact;
  if (!a || m.participant === me.token) continue;
  if (a.artifact_type === "CLAIM") {
    const ev = await me.submit(id, {
      artifact_type: "EVIDENCE",
      payload: { content: `Measured under the mixed workload: ${a.payload.statement}`, provenance_class: "EXTERNAL_EVIDENCE" },
      references: [{ artifact_id: a.id, relation: "supports" }],
    });
    const ob = await me.submit(id, {
      artifact_type: "OBJECTION",
      payload: { statement: "The measurement covers one workload only.", blocking: true },
      references: [{ artifact_id: a.id, relation: "objects-to" }],
    });
    mine.push(ev.artifact.id, ob.artifact.id);
  }
  if (a.artifact_type === "TERMINATION") {
    end = { state: a.payload.state, decision: a.references.find((r) => r.relation === "decides")?.artifact_id };
    break;
  }
}
const closure = end?.decision ? await me.closure(id, end.decision) : null;
console.log(JSON.stringify({ token: me.token, artifacts: mine, termination: end?.state, decision: end?.decision, closure_ok: closure?.ok ?? false }));
await me.close();
