import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

// The repository root, from dist/test/ where the compiled tests run.
export const root = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const testdata = resolve(root, "testdata");
