import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { generateStridedLoops } from "./_tools/build_strided_loops.ts";
import { _loopsFor } from "./_strided_loops.ts";

describe("_strided_loops.ts", () => {
  it("_strided_loops.ts is what build_strided_loops.ts generates (regenerate it when this fails)", async () => {
    const file = await Deno.readTextFile(
      new URL("./_strided_loops.ts", import.meta.url),
    );
    assert.equal(file, generateStridedLoops());
  });

  it("_loopsFor() gives each array type functions of its own", () => {
    const arrays = [
      new Uint8Array(1),
      new Uint16Array(1),
      new Int32Array(1),
      new Float64Array(1),
      new Float32Array(1), // any other type: the generic set
    ];
    const sets = arrays.map((a) => _loopsFor(a as Uint8Array));
    for (const key of ["loop", "gather", "strided", "tile"] as const) {
      const fns = new Set(sets.map((l) => l[key]));
      assert.equal(fns.size, arrays.length, `${key}: one function per type`);
      const sources = new Set(sets.map((l) => String(l[key])));
      assert.equal(sources.size, arrays.length, `${key}: distinct source text`);
    }
    assert.equal(_loopsFor(new Uint8Array(2)), sets[0], "stable per type");
  });
});
