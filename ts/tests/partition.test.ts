// The partitioned record (docs/SCALING.md): a deliberation's partition as
// the Go engine and the server's mapping compute it, and the subjects a
// reader of the partitioned record gets back as published.

import { test } from "node:test";
import assert from "node:assert/strict";
import { layoutOf, mappedDeliberationFilter, partitionOf, position, publishedSubject, splitPosition, streamAt, streamIndex } from "../src/wire.js";

test("partitionOf is FNV-1a-32 mod 1024, as partition.Of", () => {
  // Values of the Go package partition (partition.Of).
  const want: Record<string, number> = {
    "0195b3c1-7c2a-7d4e-8f10-2a3b4c5d6e7f": 19,
    "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a99": 505,
    "00000000-0000-0000-0000-000000000000": 721,
    "ffffffff-ffff-4fff-bfff-ffffffffffff": 395,
    "é": 193,
  };
  for (const [d, p] of Object.entries(want)) assert.equal(partitionOf(d), p, d);
});

test("mapped filter and published subjects", () => {
  const d = "0195b3c1-7c2a-7d4e-8f10-2a3b4c5d6e7f";
  assert.equal(mappedDeliberationFilter(d), `parley.p.19.${d}.>`);
  assert.equal(publishedSubject(`parley.p.19.${d}.art.alice`), `parley.${d}.art.alice`);
  assert.equal(publishedSubject(`parley.p.19.${d}.ctl`), `parley.${d}.ctl`);
  // Unmapped subjects stay; a misplaced partition, or what the mapping
  // does not make, stays as stored.
  for (const s of [`parley.${d}.ctl`, `parley.p.20.${d}.art.alice`, `parley.p.19.${d}.binding`, "parley.p.19", "other"]) {
    assert.equal(publishedSubject(s), s);
  }
});

test("layouts over several streams, and positions, as package ledger", () => {
  assert.deepEqual(layoutOf("PARLEY"), { layout: { partitioned: false, streams: 1 }, index: 0 });
  assert.deepEqual(layoutOf("PARLEY_0000_1023"), { layout: { partitioned: true, streams: 1 }, index: 0 });
  assert.deepEqual(layoutOf("PARLEY_0768_1023"), { layout: { partitioned: true, streams: 4 }, index: 3 });
  for (const bad of ["PARLEY_0000_0599", "PARLEY_0001_0512", "PARLEY_0000_1024", "OTHER", "PARLEY_1_2"]) assert.equal(layoutOf(bad), null, bad);
  const four = { partitioned: true, streams: 4 };
  assert.deepEqual([0, 1, 2, 3].map((k) => streamAt(four, k)), ["PARLEY_0000_0255", "PARLEY_0256_0511", "PARLEY_0512_0767", "PARLEY_0768_1023"]);
  // Partition 505: the second stream of four; 19: the first.
  assert.equal(streamIndex(four, "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a99"), 1);
  assert.equal(streamIndex(four, "0195b3c1-7c2a-7d4e-8f10-2a3b4c5d6e7f"), 0);
  // Position: the stream's index times 2^43 plus its sequence (ledger.Position).
  assert.equal(position(3, 77), 3 * 2 ** 43 + 77);
  assert.equal(position(0, 77), 77);
  assert.deepEqual(splitPosition(position(2, 12345)), { index: 2, seq: 12345 });
  assert.ok(position(1023, 2 ** 43 - 1) <= Number.MAX_SAFE_INTEGER);
});
