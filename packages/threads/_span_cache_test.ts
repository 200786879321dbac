import assert from "node:assert/strict";
import fc from "fast-check";
import { SpanCache } from "./_span_cache.ts";
import { modelRuns } from "../core/_test_faults.ts";
import { binOf, M_LEN, META_WORDS } from "./_layout.ts";

interface Entry {
  page: number;
  len: number;
  bin: number;
  age: number;
}

const opArb = fc.oneof(
  fc.record({
    kind: fc.constant("put" as const),
    len: fc.integer({ min: 1, max: 40 }),
  }),
  fc.record({
    kind: fc.constant("take" as const),
    from: fc.integer({ min: 0, max: 20 }),
    width: fc.integer({ min: 1, max: 3 }),
  }),
  fc.record({ kind: fc.constant("oldest" as const) }),
  // A length near a cached span's (picked by index), so that the first
  // fit is often not the bin's newest span.
  fc.record({
    kind: fc.constant("fit" as const),
    pick: fc.nat(),
    delta: fc.integer({ min: -2, max: 2 }),
  }),
);

Deno.test("SpanCache matches a model: LIFO reuse within the window, a fit in the own bin, oldest evicted first", () => {
  fc.assert(
    fc.property(fc.array(opArb, { maxLength: 200 }), (ops) => {
      const i32 = new Int32Array(200 * 40 * META_WORDS + 64);
      const meta = 16; // records start past a few unrelated words
      const cache = new SpanCache(i32, meta);
      let model: Entry[] = [];
      let page = 0, age = 0;
      for (const op of ops) {
        if (op.kind === "put") {
          i32[meta + page * META_WORDS + M_LEN] = op.len;
          cache.put(page);
          model.push({ page, len: op.len, bin: binOf(op.len), age: age++ });
          page += op.len;
        } else if (op.kind === "take") {
          const to = op.from + op.width;
          let want: Entry | undefined;
          for (let b = op.from; b < to && !want; b++) {
            const inBin = model.filter((e) => e.bin === b);
            want = inBin.sort((x, y) => y.age - x.age)[0];
          }
          assert.equal(cache.take(op.from, to), want ? want.page : -1);
          if (want) model = model.filter((e) => e !== want);
        } else if (op.kind === "fit") {
          // The newest of the four newest spans of the length's bin that
          // has at least that many pages.
          const near = model.length ? model[op.pick % model.length].len : 8;
          const len = Math.max(1, near + op.delta), bin = binOf(len);
          const want = model.filter((e) => e.bin === bin)
            .sort((x, y) => y.age - x.age)
            .slice(0, 4)
            .find((e) => e.len >= len);
          assert.equal(cache.takeFit(bin, len), want ? want.page : -1);
          if (want) model = model.filter((e) => e !== want);
        } else {
          const want = [...model].sort((x, y) => x.age - y.age)[0];
          assert.equal(cache.takeOldest(), want ? want.page : -1);
          if (want) model = model.filter((e) => e !== want);
        }
        assert.equal(cache.spans, model.length);
        assert.equal(cache.pages, model.reduce((s, e) => s + e.len, 0));
        // The lengths it read stay as they were: it writes only the links.
        for (const e of model) {
          assert.equal(i32[meta + e.page * META_WORDS + M_LEN], e.len);
        }
      }
      assert.equal(i32[0], 0, "nothing written before the records");
    }),
    { numRuns: modelRuns() },
  );
});

Deno.test("SpanCache.takeFit() of a bin's oldest span leaves the next oldest to evict", () => {
  const i32 = new Int32Array(64 * META_WORDS);
  const cache = new SpanCache(i32, 0);
  // 9 and 8 pages share a bin; a request of 9 skips the newest two.
  assert.equal(binOf(8), binOf(9));
  for (const [page, len] of [[0, 9], [9, 8], [17, 8]]) {
    i32[page * META_WORDS + M_LEN] = len;
    cache.put(page);
  }
  assert.equal(
    cache.takeFit(binOf(9), 9),
    0,
    "the oldest, past two that do not fit",
  );
  assert.equal(cache.takeOldest(), 9);
  assert.equal(cache.takeOldest(), 17);
  assert.equal(cache.takeOldest(), -1);
  assert.equal(cache.spans, 0);
  assert.equal(cache.pages, 0);
});
