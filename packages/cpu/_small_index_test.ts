import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

// _small_index.ts keeps its own copies of heap.ts's record layout on purpose:
// V8 does not fold a constant imported from another module into the code
// (each use would be a load), and the layout slots are read on every small
// index operation. These tests hold the copies equal to heap.ts's values.

/** The top-level `const NAME = <number or 1 << n>;` lines of a module. */
function constants(file: string): Map<string, number> {
  const text = readFileSync(new URL(file, import.meta.url), "utf8");
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^const ([A-Z][A-Z0-9_]*) = ([^;]+);/gm)) {
    const expr = m[2].replace(/\/\/.*$/, "").trim();
    const shift = /^1 << (\w+)$/.exec(expr);
    if (/^-?(0x[\da-f]+|\d+)$/i.test(expr)) out.set(m[1], Number(expr));
    else if (shift) {
      const n = /^\d+$/.test(shift[1]) ? Number(shift[1]) : out.get(shift[1]);
      if (n !== undefined) out.set(m[1], 2 ** n);
    } else if (out.has(expr)) out.set(m[1], out.get(expr)!);
  }
  return out;
}

describe("SmallIndex", () => {
  it("_small_index.ts's copies of the record layout equal heap.ts's", () => {
    const heap = constants("./heap.ts");
    const small = constants("./_small_index.ts");
    for (const name of ["R_START", "R_SIZE", "R_FPREV", "R_FNEXT"]) {
      assert.ok(small.has(name), `_small_index.ts has no ${name}`);
      assert.equal(small.get(name), heap.get(name), name);
    }
    // Chunks as the chunk index's (SMALL_LOG2), at most FIRST_FIT_UNITS long
    // (heap.ts's #firstFit relies on it), bounds below FIRST_FIT_UNITS in a
    // Uint16Array.
    assert.equal(small.get("CHUNK_LOG2"), heap.get("SMALL_LOG2"));
    assert.ok(2 ** small.get("CHUNK_LOG2")! <= heap.get("FIRST_FIT_UNITS")!);
    assert.ok(heap.get("FIRST_FIT_UNITS")! <= 65536);
    assert.ok(heap.get("STRIDE")! > heap.get("R_FNEXT")!);
  });
});
