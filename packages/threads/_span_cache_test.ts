import assert from "node:assert/strict";
import fc from "fast-check";
import { SpanCache } from "./_span_cache.ts";

interface Entry {
  page: number;
  len: number;
  bin: number;
  age: number;
}

const opArb = fc.oneof(
  fc.record({
    kind: fc.constant("put" as const),
    len: fc.integer({ min: 1, max: 64 }),
    bin: fc.integer({ min: 0, max: 7 }),
  }),
  fc.record({
    kind: fc.constant("take" as const),
    from: fc.integer({ min: 0, max: 7 }),
    width: fc.integer({ min: 1, max: 3 }),
  }),
  fc.record({ kind: fc.constant("oldest" as const) }),
);

Deno.test("SpanCache matches a model: LIFO reuse within the window, oldest evicted first", () => {
  fc.assert(
    fc.property(fc.array(opArb, { maxLength: 200 }), (ops) => {
      const cache = new SpanCache(8);
      let model: Entry[] = [];
      let page = 0, age = 0;
      for (const op of ops) {
        if (op.kind === "put") {
          cache.put(page, op.len, op.bin);
          model.push({ page, len: op.len, bin: op.bin, age: age++ });
          page += op.len;
        } else if (op.kind === "take") {
          const to = Math.min(op.from + op.width, 8);
          let want: Entry | undefined;
          for (let b = op.from; b < to && !want; b++) {
            const inBin = model.filter((e) => e.bin === b);
            want = inBin.sort((x, y) => y.age - x.age)[0];
          }
          assert.equal(cache.take(op.from, to), want ? want.page : -1);
          if (want) model = model.filter((e) => e !== want);
        } else {
          const want = [...model].sort((x, y) => x.age - y.age)[0];
          assert.equal(cache.takeOldest(), want ? want.page : -1);
          if (want) model = model.filter((e) => e !== want);
        }
        assert.equal(cache.spans, model.length);
        assert.equal(cache.pages, model.reduce((s, e) => s + e.len, 0));
      }
    }),
    { numRuns: 1000 },
  );
});
