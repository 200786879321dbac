import assert from "node:assert/strict";
import fc from "fast-check";
import { SharedHeap } from "./mod.ts";
import {
  H_ATTACHED,
  H_CACHE_POOL,
  H_META,
  H_PAGES,
  H_RETURNS,
  K_CACHED,
  M_KIND,
  M_LEN,
  M_OWNER,
  MAX_ARENAS,
  META_WORDS,
  R_BUDGET,
  RETURN_WORDS,
} from "./_layout.ts";

const MiB = 1 << 20;
const PAGE = 4096;

/**
 * Walks the page records: the pages each arena's span cache holds, the
 * budget each arena holds, and the pool (what no arena holds).
 */
function cacheState(heap: SharedHeap, memory: SharedArrayBuffer) {
  const i32 = new Int32Array(memory);
  const h = heap.byteOffset >> 2;
  const pages = i32[h + H_PAGES], meta = i32[h + H_META] >> 2;
  const cached = new Array<number>(MAX_ARENAS).fill(0);
  for (let p = 0; p < pages;) {
    const w = meta + p * META_WORDS, len = i32[w + M_LEN];
    if (i32[w + M_KIND] === K_CACHED) cached[i32[w + M_OWNER] & 63] += len;
    p += len > 0 ? len : 1;
  }
  const budget = Array.from(
    { length: MAX_ARENAS },
    (_, a) => i32[h + H_RETURNS + a * RETURN_WORDS + R_BUDGET],
  );
  return {
    total: pages >> 2,
    cached,
    budget,
    pool: i32[h + H_CACHE_POOL],
    attached: i32[h + H_ATTACHED],
  };
}

function checkBound(heap: SharedHeap, memory: SharedArrayBuffer): void {
  const s = cacheState(heap, memory);
  const sum = (xs: number[]) => xs.reduce((x, y) => x + y, 0);
  assert.ok(
    sum(s.cached) <= s.total,
    `all caches hold ${sum(s.cached)} pages, over the bound of ${s.total}`,
  );
  for (let a = 0; a < MAX_ARENAS; a++) {
    assert.ok(
      s.cached[a] <= s.budget[a],
      `arena ${a} caches ${s.cached[a]} pages on a budget of ${s.budget[a]}`,
    );
  }
  assert.equal(sum(s.budget) + s.pool, s.total, "budgets and pool: the total");
}

Deno.test("SharedHeap's span caches together never hold more than a quarter of the heap, whatever handles attach, free and detach", () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          op: fc.constantFrom(
            "alloc",
            "alloc",
            "free",
            "free",
            "attach",
            "detach",
          ),
          who: fc.nat(),
          pages: fc.integer({ min: 3, max: 96 }),
        }),
        { maxLength: 120 },
      ),
      (ops) => {
        const memory = new SharedArrayBuffer(4 * MiB);
        const creator = SharedHeap.create(memory);
        const handles = [creator];
        const live: { at: number; by: SharedHeap }[] = [];
        try {
          for (const { op, who, pages } of ops) {
            if (op === "attach" && handles.length < 6) {
              handles.push(SharedHeap.attach(creator.descriptor()));
            } else if (op === "detach" && handles.length > 1) {
              const i = 1 + who % (handles.length - 1);
              const [gone] = handles.splice(i, 1);
              // Its blocks are freed by the creator (another arena).
              for (const b of live) if (b.by === gone) b.by = creator;
              gone.detach();
            } else if (op === "alloc") {
              const by = handles[who % handles.length];
              const at = by.tryAlloc(pages * PAGE);
              if (at !== undefined) live.push({ at, by });
            } else if (op === "free" && live.length > 0) {
              const [b] = live.splice(who % live.length, 1);
              b.by.free(b.at);
            }
            checkBound(creator, memory);
          }
          for (const b of live) b.by.free(b.at);
          checkBound(creator, memory);
          creator.checkIntegrity();
        } finally {
          for (const h of handles.slice(1)) h.detach();
          creator.detach();
        }
      },
    ),
    { numRuns: 150 },
  );
});

Deno.test("SharedHeap shares the caches' budget: a lone handle gets it all, a second attached handle its half at the first's next miss", () => {
  const memory = new SharedArrayBuffer(4 * MiB);
  using a = SharedHeap.create(memory);
  const total = cacheState(a, memory).total;
  const spans = [a.alloc(60 * PAGE), a.alloc(60 * PAGE), a.alloc(60 * PAGE)];
  a.free(spans[0]);
  // The budget grows as needed: twice what the cache holds.
  assert.equal(cacheState(a, memory).budget[a.arena], 120);
  a.free(spans[1]);
  a.free(spans[2]);
  assert.equal(cacheState(a, memory).cached[a.arena], 180, "180 > total / 2");
  assert.equal(cacheState(a, memory).budget[a.arena], total);
  using b = SharedHeap.attach(a.descriptor());
  assert.equal(cacheState(a, memory).attached, 2);
  // The first handle's next miss gives back all over its half.
  a.free(a.alloc(200 * PAGE));
  const s = cacheState(a, memory);
  assert.ok(s.budget[a.arena] <= total >> 1, `budget ${s.budget[a.arena]}`);
  assert.ok(s.cached[a.arena] <= s.budget[a.arena]);
  // The second handle's cache grows to its half.
  const x = b.alloc(100 * PAGE);
  b.free(x);
  const t = cacheState(a, memory);
  assert.equal(t.cached[b.arena], 100);
  assert.equal(t.budget[b.arena], total >> 1);
  checkBound(a, memory);
  const arenaB = b.arena;
  b.detach();
  assert.equal(cacheState(a, memory).budget[arenaB], 0, "detach gives back");
  checkBound(a, memory);
});
