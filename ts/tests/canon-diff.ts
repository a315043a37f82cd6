// The TypeScript side of the differential test of ts_test.go: reads JSON
// lines {"hex": input} on standard input and writes, for each, what the
// AMD and JCS canonicalizers, the artifact id and its verification answer:
// {"out": hex} or {"class", "code", "offset"}.

import { createInterface } from "node:readline";
import { artifactId, canonicalize, verifyId, CanonError } from "../src/canon.js";

function answer(f: () => Uint8Array | string): Record<string, unknown> {
  try {
    const r = f();
    return { out: typeof r === "string" ? r : Buffer.from(r).toString("hex") };
  } catch (e) {
    if (!(e instanceof CanonError)) return { panic: String(e) };
    return { class: e.errorClass, code: e.code, offset: e.offset };
  }
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line) continue;
  const src = Buffer.from(JSON.parse(line).hex, "hex");
  process.stdout.write(
    JSON.stringify({
      amd: answer(() => canonicalize(src, "amd")),
      jcs: answer(() => canonicalize(src, "jcs")),
      id: answer(() => artifactId(src).id),
      verify: answer(() => verifyId(src).id),
    }) + "\n",
  );
}
