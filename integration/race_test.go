//go:build race

package integration

// underRace: the race detector slows everything several times over, so a
// test that measures a time bound reports it instead of asserting it.
const underRace = true
