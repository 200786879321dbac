import assert from "node:assert/strict";
import { test } from "node:test";
import { parseInlining } from "./inlining.ts";

// Lines as V8 11 (Node 20) and V8 15 (Deno 2.9) print them.
const SAMPLE = `
Considering 0x1 {0x2 <SharedFunctionInfo mappingIndex>} for inlining with 0x3 {0x4 <FeedbackVector[15]>}
Considering 0x5 {0x6 <SharedFunctionInfo #relink>} for inlining with 0x7 {0x8 <FeedbackVector[81]>}
Considering 0x9 {0xa <SharedFunctionInfo #rehash>} for inlining with 0xb {0xc <FeedbackVector[49]>}
Cannot consider 0xd {0xe <SharedFunctionInfo alloc>} for inlining (reason: 5)
2 candidate(s) for inlining:
  - target: 0x1 {0x2 <SharedFunctionInfo mappingIndex>}, bytecode size: 74
Inlining 0x1 {0x2 <SharedFunctionInfo mappingIndex>} into 0xf {0x10 <SharedFunctionInfo alloc>}
Inlining 0x5 {0x6 <SharedFunctionInfo #relink>} into 0xf {0x10 <SharedFunctionInfo alloc>}
Inlining 0x1 {0x2 <SharedFunctionInfo mappingIndex>} into 0x11 {0x12 <SharedFunctionInfo free>}
`;

test("parseInlining lists what each function inlined and what never was", () => {
  const { into, neverInlined } = parseInlining(SAMPLE);
  assert.deepEqual([...into.get("alloc")!].sort(), ["#relink", "mappingIndex"]);
  assert.deepEqual([...into.get("free")!], ["mappingIndex"]);
  assert.equal(into.get("bytes"), undefined);
  // Considered and never inlined: a call where it is reached.
  assert.deepEqual([...neverInlined], ["#rehash"]);
});

test("parseInlining ignores lines that name no or other functions", () => {
  const { into, neverInlined } = parseInlining(
    "Cannot consider 0x1 {0x2 <FeedbackCell[many closures]>} for inlining\n" +
      "1 candidate(s) for inlining:\n",
  );
  assert.equal(into.size, 0);
  assert.equal(neverInlined.size, 0);
});
