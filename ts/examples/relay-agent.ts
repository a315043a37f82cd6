// A relay participant (docs/RELAY.md, "The turn contract"): the relay runs
// it once a turn, with the turn as JSON on standard input, and reads its
// draft from standard output. It opens every artifact of the context
// (their ids and rules checked, so a tampered context is refused), objects
// to the latest artifact of another participant, and seals its draft
// before answering, so that an answer the engine would refuse never
// leaves it.
//
//   {"participants": [{"id": "reviewer", "adapter": "exec",
//                      "command": ["node", "ts/dist/examples/relay-agent.js"]}, …]}

import { readFileSync } from "node:fs";
import { canonicalizeValue, open, seal, type Draft } from "../src/index.js";

interface Turn {
  deliberation: string;
  round: number;
  participant: string;
  final: boolean;
  allowed_types: string[];
  context: { position: number; participant: string; artifact: unknown }[];
}

const turn: Turn = JSON.parse(readFileSync(0, "utf8"));
const context = turn.context.map((c) => ({ ...c, artifact: open(canonicalizeValue(c.artifact)) }));
const target = context.filter((c) => c.participant !== turn.participant).at(-1);
if (!target) throw new Error(`round ${turn.round}: nothing to review`);
const draft: Draft = {
  artifact_type: "OBJECTION",
  payload: { statement: `Round ${turn.round}: the ${target.artifact.artifact_type.toLowerCase()} of ${target.participant} shows no measurement of the tail latency.`, blocking: true },
  references: [{ artifact_id: target.artifact.id, relation: "objects-to" }],
};
if (!turn.allowed_types.includes(draft.artifact_type)) throw new Error(`round ${turn.round}: ${draft.artifact_type} is not allowed`);
seal(draft); // throws on anything the engine would refuse on its own
process.stdout.write(JSON.stringify(draft) + "\n");
