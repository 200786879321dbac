import assert from "node:assert/strict";
import { restoreConsts } from "./_restore_consts.ts";

Deno.test("restoreConsts makes top-level numeric constants const, nothing else", () => {
  const bundle = [
    "var SL_LOG2 = 5;",
    "var SL_COUNT = 1 << SL_LOG2;",
    "var HASH_MULTIPLIER = 2654435761;",
    "var MAX_UNITS = 0x7fffffff;",
    "var LOW_NONE = -1;",
    "var MiB = 1 << 20;",
    "var CpuHeap = class {",
    "var NAME = makeName();",
    "  var INNER = 3;",
    "var Y = X + 1; var Z = 2;",
  ].join("\n");
  assert.deepEqual(restoreConsts(bundle).split("\n"), [
    "const SL_LOG2 = 5;",
    "const SL_COUNT = 1 << SL_LOG2;",
    "const HASH_MULTIPLIER = 2654435761;",
    "const MAX_UNITS = 0x7fffffff;",
    "const LOW_NONE = -1;",
    "var MiB = 1 << 20;",
    "var CpuHeap = class {",
    "var NAME = makeName();",
    "  var INNER = 3;",
    "var Y = X + 1; var Z = 2;",
  ]);
});
