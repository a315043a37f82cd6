// An MCP client that is not parley's: the official TypeScript SDK, running
// a deliberation to completion through engine mcp servers (one per
// participant: architect, critic, judge and the principal, ceo), using only
// the tool schemas the servers give. It checks that every refusal carries
// its code, and that it waits for artifacts (wait_artifacts) instead of
// polling. mcpserver's TestSDKClient starts the engine and the servers and
// runs it:
//
//   node client.mjs '{"token":"…","servers":{"architect":"http://…",…},"envelope":{…}}'
//
// It prints one JSON line with what it saw, and exits 1 on the first
// failed check.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const config = JSON.parse(process.argv[2]);
const seen = { refusals: {}, waits: 0, timed_out: 0, notifications: 0, elicitations: 0, tools: 0 };

function check(cond, what, detail) {
  if (!cond) {
    console.error("FAIL: " + what + (detail === undefined ? "" : ": " + JSON.stringify(detail)));
    process.exit(1);
  }
}

async function connect(name, capabilities) {
  const client = new Client({ name: "sdk-" + name, version: "1.0.0" }, { capabilities: capabilities || {} });
  const transport = new StreamableHTTPClientTransport(new URL(config.servers[name]), {
    requestInit: { headers: { Authorization: "Bearer " + config.token } },
  });
  await client.connect(transport);
  const { tools } = await client.listTools(); // the output schemas the client validates results against
  return { name, client, tools: Object.fromEntries(tools.map((t) => [t.name, t])) };
}

// call calls a tool and returns its structured content; want says whether
// the call must take effect (true) or be refused (false).
async function call(p, tool, args, want = true) {
  check(p.tools[tool], p.name + " has no tool " + tool);
  const res = await p.client.callTool({ name: tool, arguments: args });
  const out = res.structuredContent;
  check(out && typeof out.outcome === "string", tool + ": the result carries no verdict", res);
  if (want) {
    check(!res.isError, tool + " was refused", out);
  } else {
    check(res.isError, tool + " took effect", out);
    check(typeof out.code === "string" && out.code !== "", tool + ": a refusal without a code", out);
    check(typeof out.message === "string" && out.message !== "", tool + ": a refusal without a message", out);
    seen.refusals[out.code] = out.outcome;
  }
  return out;
}

// fill builds a value for a JSON schema from the schema alone: the
// required members of an object, the first value of an enum, a string
// from texts (by member name), true for a Boolean, an empty array.
function fill(schema, texts, name) {
  if (schema.enum) return schema.enum[0];
  switch (schema.type) {
    case "object": {
      const o = {};
      for (const k of schema.required || []) o[k] = fill(schema.properties[k], texts, k);
      return o;
    }
    case "string":
      return texts[name] || "A " + name + ".";
    case "boolean":
      return true;
    case "array":
      return [];
  }
  return null;
}

function payload(p, type, texts, overrides = {}) {
  const schema = p.tools["publish_" + type].inputSchema.properties.payload;
  return { ...fill(schema, texts), ...overrides };
}

const architect = await connect("architect");
const critic = await connect("critic");
const judge = await connect("judge");
const ceo = await connect("ceo", { elicitation: {} });

// The principal's user answers the binding moment's form: the recommended
// option, as the form's default says.
ceo.client.setRequestHandler(ElicitRequestSchema, async (req) => {
  seen.elicitations++;
  const choice = req.params.requestedSchema.properties.choice;
  check(choice.enum.includes(choice.default), "the form's default is none of its choices", choice);
  return { action: "accept", content: { choice: choice.default } };
});
architect.client.setNotificationHandler(ResourceUpdatedNotificationSchema, async () => {
  seen.notifications++;
});

for (const p of [architect, critic, judge, ceo]) {
  for (const [name, t] of Object.entries(p.tools)) {
    seen.tools++;
    check(t.inputSchema && t.inputSchema.type === "object", name + ": no input schema");
    check(t.outputSchema && t.outputSchema.properties && t.outputSchema.properties.outcome, name + ": no verdict in the output schema", t.outputSchema);
  }
}
for (const type of ["claim", "evidence", "objection", "revision", "decision", "failure", "termination"]) {
  check(architect.tools["publish_" + type].inputSchema.properties.payload.required.length > 0, "publish_" + type + ": an untyped payload");
}

const open = await call(architect, "open_deliberation", {
  title: "Which cache for the catalogue?",
  participants: ["architect", "critic", "judge"],
  principal: "ceo",
});
const id = open.deliberation;
check(open.outcome === "applied" && open.ordinal === 1, "the open", open);
await architect.client.subscribeResource({ uri: "parley://deliberations/" + id });

// The critic waits for the architect's claim: its wait is under way before
// the claim exists, and returns with it.
const waiting = call(critic, "wait_artifacts", { deliberation: id, after: open.ordinal });
seen.waits++;
const claim = await call(architect, "publish_claim", {
  deliberation: id,
  payload: payload(architect, "claim", { statement: "Cache the catalogue in an LRU of 10,000 entries." }),
});
check(claim.outcome === "accepted" && claim.accepted && claim.ordinal === 2, "the claim", claim);
const got = await waiting;
check(got.artifacts && got.artifacts.length === 1 && got.artifacts[0].artifact_id === claim.artifact_id, "the wait did not return the claim", got);
check(got.artifacts[0].artifact.payload.statement.startsWith("Cache"), "the waited artifact's content", got.artifacts[0]);

// Refusals, each with its code: a payload without a member its schema
// requires (the validator's code, nothing published); a participant the
// server does not speak as; a reference to nothing (the engine's
// rejection, with its position and ordinal).
const objection = payload(critic, "objection", { statement: "An LRU thrashes under the nightly full scan." });
const { blocking, ...withoutBlocking } = objection;
check(blocking === true, "the objection schema's blocking", objection);
let r = await call(critic, "publish_objection", {
  deliberation: id,
  payload: withoutBlocking,
  references: [{ artifact_id: claim.artifact_id, relation: "objects-to" }],
}, false);
check(r.outcome === "refused" && r.code === "semantic.missing_blocking" && r.error_class === "invalid_artifact", "the objection without blocking", r);
r = await call(critic, "publish_claim", { deliberation: id, participant: "architect", payload: payload(critic, "claim", {}) }, false);
check(r.code === "mcp.participant_mismatch", "another participant", r);
r = await call(architect, "publish_evidence", {
  deliberation: id,
  payload: payload(architect, "evidence", { content: "A benchmark." }),
  references: [{ artifact_id: "sha256:" + "0".repeat(64), relation: "supports" }],
}, false);
check(r.outcome === "rejected" && r.code === "reference.unavailable" && r.position > 0 && r.ordinal > 0 && r.published, "evidence for nothing", r);
r = await call(judge, "resolve_binding", { deliberation: id, decision: claim.artifact_id, resolution: "option" }, false);
check(r.outcome === "refused", "resolving a claim", r);

// The critic's objection, not blocking; the judge asks the principal.
const obj = await call(critic, "publish_objection", {
  deliberation: id,
  payload: { ...objection, blocking: false },
  references: [{ artifact_id: claim.artifact_id, relation: "objects-to" }],
});
check(obj.outcome === "accepted", "the objection", obj);
const moment = await call(judge, "request_binding", {
  deliberation: id,
  outcome: "Ask the principal which cache to run.",
  decides: [claim.artifact_id],
  envelope: config.envelope,
});
check(moment.principal === "ceo" && moment.outcome === "accepted", "the binding moment", moment);
r = await call(judge, "resolve_binding", { deliberation: id, decision: moment.decision, resolution: "option", option_idx: 0 }, false);
check(r.code === "binding.not_principal", "the judge resolving", r);

// The principal's server asks its user (elicitation) and publishes the
// choice: a final decision, which completes the deliberation.
const resolved = await call(ceo, "resolve_binding", { deliberation: id, decision: moment.decision });
check(resolved.outcome === "accepted" && resolved.resolution === "option" && seen.elicitations === 1, "the resolution", resolved);

// The judge follows the deliberation to its end by waiting, never polling:
// each wait returns artifacts, or the deliberation has ended.
let after = moment.ordinal;
let status = "open";
const types = [];
for (let i = 0; i < 10 && status === "open"; i++) {
  const w = await call(judge, "wait_artifacts", { deliberation: id, after });
  seen.waits++;
  if (w.timed_out) seen.timed_out++;
  for (const a of w.artifacts || []) types.push(a.artifact_type + ":" + a.participant);
  after = w.next_after;
  status = w.status;
}
check(status === "completed", "the deliberation did not complete", { status, types });
check(types.includes("DECISION:ceo") && types.includes("TERMINATION:_supervisor"), "the artifacts waited for", types);
const state = await call(judge, "get_state", { deliberation: id });
check(state.status === "completed" && state.outcome === "ok", "the state", state);
const closure = await call(judge, "verify_closure", { deliberation: id, decision: resolved.artifact_id });
check(closure.ok === true && closure.outcome === "ok", "the final decision's closure", closure);
const res = await architect.client.readResource({ uri: "parley://deliberations/" + id });
check(JSON.parse(res.contents[0].text).status === "completed", "the resource", res.contents[0]);
check(seen.notifications > 0, "no resource-updated notification");

console.log(JSON.stringify({ deliberation: id, status, types, ...seen }));
for (const p of [architect, critic, judge, ceo]) await p.client.close();
