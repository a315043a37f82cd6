// The example of README.md, compiled with the library (tests/readme.test.ts
// checks that both are the same).

import { Participant, RejectedError, localCredentials } from "@parley-engine/parley";

const id = process.argv[2]; // the deliberation
const me = await Participant.connect("nats://127.0.0.1:4222", "reviewer", { seed: process.env.PARLEY_SEED, nats: localCredentials("./parley-data") });
for await (const m of me.watch(id)) {
  if (!m.artifact || m.participant === me.token) continue;
  if (m.artifact.artifact_type === "TERMINATION") break;
  if (m.artifact.artifact_type !== "CLAIM") continue;
  try {
    const { artifact } = await me.submit(id, {
      artifact_type: "OBJECTION",
      payload: { statement: `Show the measurement behind: ${m.artifact.payload.statement}`, blocking: true },
      references: [{ artifact_id: m.artifact.id, relation: "objects-to" }],
    });
    console.log("objection accepted:", artifact.id);
  } catch (e) {
    if (e instanceof RejectedError) console.error("refused:", e.outcome.code, e.outcome.message);
    else throw e;
  }
}
await me.close();
