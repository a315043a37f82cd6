// Package layering holds no code: its test checks that the pure cores
// (wire, canon, events, api, closure, provenance, binding, projector,
// termination, signing, tlog) do no IO and read no clock, and that
// imports point one way between them (docs/ARCHITECTURE.md, "Layers");
// that the pages (web) depend on nothing of the engine's assembly
// (service) that mounts them; and that each part of the engine
// (readmodel, microapi, httpapi, bindwrite, health, metrics, natsconn,
// internal/datadir, internal/fdplan) imports only the packages listed for
// it; and that only the programs, the bench programs and the relay import
// the assembly.
package layering
