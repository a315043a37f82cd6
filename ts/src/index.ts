// parley's participant library: the canonical form and artifact ids,
// sealing and opening artifacts, nkeys signatures, and a participant over
// NATS (docs/WIRE.md).

export * from "./canon.js";
export * from "./artifact.js";
export * from "./signing.js";
export * from "./wire.js";
export * from "./client.js";
