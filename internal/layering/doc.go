// Package layering holds no code: its test checks that the pure cores
// (wire, canon, events, api, closure, provenance, binding, projector,
// termination, signing, tlog) do no IO and read no clock, and that
// imports point one way between them (docs/ARCHITECTURE.md, "Layers");
// and that the pages (web) depend on nothing of the engine's assembly
// (service) that mounts them.
package layering
