import assert from "node:assert/strict";
import { HeapBusyError, SharedHeap, SharedHeapAllocator } from "./mod.ts";
import type { Command, HandOff, Report } from "./_test_worker.ts";
import type { SharedBufferDescriptor } from "./mod.ts";

const MiB = 1 << 20;
/** Milliseconds of random work per stress run (a few seconds in CI). */
const STRESS_MS = Number(Deno.env.get("ALLOT_STRESS_MS") ?? 1000);

class Pool {
  workers: Worker[] = [];
  waiting = new Map<string, ((r: Report, i: number) => void)[]>();
  errors: string[] = [];
  onReport: (r: Report, from: number) => void = () => {};

  constructor(n: number) {
    for (let i = 0; i < n; i++) {
      const w = new Worker(new URL("./_test_worker.ts", import.meta.url), {
        type: "module",
      });
      w.onmessage = (e: MessageEvent<Report>) => this.#on(e.data, i);
      w.onerror = (e) => {
        e.preventDefault();
        this.errors.push(String(e.message));
      };
      this.workers.push(w);
    }
  }

  #on(r: Report, i: number): void {
    if (r.type === "error") this.errors.push(`worker ${i}: ${r.message}`);
    this.onReport(r, i);
    const queue = this.waiting.get(`${r.type}:${i}`);
    queue?.shift()?.(r, i);
  }

  send(i: number, c: Command): void {
    this.workers[i].postMessage(c);
  }

  next<T extends Report["type"]>(
    i: number,
    type: T,
  ): Promise<Extract<Report, { type: T }>> {
    return new Promise((resolve, reject) => {
      const key = `${type}:${i}`;
      if (!this.waiting.has(key)) this.waiting.set(key, []);
      const timer = setTimeout(
        () => reject(new Error(`no ${type} from worker ${i}: ${this.errors}`)),
        120_000,
      );
      this.waiting.get(key)!.push((r) => {
        clearTimeout(timer);
        resolve(r as Extract<Report, { type: T }>);
      });
    });
  }

  terminate(): void {
    for (const w of this.workers) w.terminate();
  }
}

function checkPattern(u8: Uint8Array, b: HandOff): void {
  const view = u8.subarray(b.byteOffset, b.byteOffset + b.byteLength);
  assert.ok(view.every((x) => x === b.tag), `block ${b.byteOffset} intact`);
}

async function stress(
  n: number,
  ms: number,
  handOffRate: number,
): Promise<void> {
  const heap = SharedHeap.create(256 * MiB);
  const allocator = new SharedHeapAllocator(heap);
  const u8 = new Uint8Array(heap.buffer);
  const pool = new Pool(n);
  let pausing = false;
  const pending: HandOff[] = [];
  const pendingBuffers: { descriptor: SharedBufferDescriptor; tag: number }[] =
    [];
  let handOffs = 0;
  pool.onReport = (r, from) => {
    // Any other Worker: blocks of one arena get freed by several others.
    const to = (from + 1 + Math.floor(Math.random() * (n - 1))) % n;
    if (r.type === "hand-off") {
      handOffs++;
      if (pausing) pending.push(r.block);
      else pool.send(to, { type: "take", block: r.block });
    } else if (r.type === "hand-off-buffer") {
      handOffs++;
      if (pausing) pendingBuffers.push(r);
      else {
        pool.send(to, {
          type: "take-buffer",
          descriptor: r.descriptor,
          tag: r.tag,
        });
      }
    }
  };
  try {
    const started = pool.workers.map((_, i) => pool.next(i, "started"));
    for (let i = 0; i < n; i++) {
      pool.send(i, {
        type: "start",
        heap: heap.descriptor(),
        seed: 1000 + i,
        maxBytes: 256 * 1024,
        handOffRate,
      });
    }
    await Promise.all(started);
    await new Promise((resolve) => setTimeout(resolve, ms));
    pausing = true;
    const paused = pool.workers.map((_, i) => pool.next(i, "paused"));
    for (let i = 0; i < n; i++) pool.send(i, { type: "pause" });
    const reports = await Promise.all(paused);
    assert.deepEqual(pool.errors, []);
    // Quiet now: the shared counts equal what the Workers hold.
    const held = reports.reduce((s, r) => s + r.live, 0);
    assert.equal(
      heap.stats().allocations.current,
      held + pending.length + pendingBuffers.length,
      "shared count = sum of the Workers' own counts + hand-offs in flight",
    );
    const ops = reports.reduce((s, r) => s + r.ops, 0);
    assert.ok(ops > 1000, `the Workers did work (${ops} ops)`);
    assert.ok(handOffs > 10, `hand-offs happened (${handOffs})`);
    for (const b of pending) {
      checkPattern(u8, b);
      heap.free(b.byteOffset); // frees into the Workers' arenas
    }
    for (const p of pendingBuffers) {
      using b = allocator.receive(p.descriptor);
      assert.ok(b.toData().every((x) => x === p.tag));
    }
    const finished = pool.workers.map((_, i) => pool.next(i, "finished"));
    for (let i = 0; i < n; i++) pool.send(i, { type: "finish" });
    await Promise.all(finished);
    assert.deepEqual(pool.errors, []);
    heap.checkIntegrity();
    const stats = heap.stats();
    assert.equal(stats.allocations.current, 0, "every block freed");
    assert.equal(stats.allocatedBytes.current, 0);
    heap.detach();
    const after = SharedHeap.attach(heap.descriptor());
    assert.equal(
      after.stats().freeBytes,
      after.stats().byteLength,
      "no byte lost: every page back in the core",
    );
    after.detach();
  } finally {
    pool.terminate();
  }
}

Deno.test("SharedHeap: 2 Workers allocate, verify, free and hand off at once", async () => {
  await stress(2, STRESS_MS, 0.1);
});

Deno.test("SharedHeap: 4 Workers allocate, verify, free and hand off at once", async () => {
  await stress(4, STRESS_MS, 0.35);
});

Deno.test("SharedHeap: Workers free one arena's blocks at once while it allocates", async () => {
  const heap = SharedHeap.create(64 * MiB);
  const pool = new Pool(2);
  try {
    const sizes = [64, 128, 192, 4096];
    const lists = [0, 1].map(() => new Int32Array(6000));
    for (let i = 0; i < 6000; i++) {
      for (const list of lists) list[i] = heap.alloc(sizes[i % 4]);
    }
    const sync = new SharedArrayBuffer(8);
    const s = new Int32Array(sync);
    const freed = [0, 1].map((i) => pool.next(i, "freed"));
    for (let i = 0; i < 2; i++) {
      pool.send(i, {
        type: "free-all",
        heap: heap.descriptor(),
        offsets: lists[i],
        sync,
      });
    }
    while (Atomics.load(s, 1) < 2) {
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    Atomics.store(s, 0, 1);
    Atomics.notify(s, 0);
    // Meanwhile the owner allocates and frees, taking remote lists back.
    const seen = new Set<number>();
    const mine: number[] = [];
    for (let round = 0; round < 40; round++) {
      for (let i = 0; i < 200; i++) mine.push(heap.alloc(sizes[i % 4]));
      while (mine.length > 100) heap.free(mine.pop()!);
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    await Promise.all(freed);
    assert.deepEqual(pool.errors, []);
    // Everything the Workers freed is handed out again exactly once.
    for (let i = 0; i < 12000; i++) {
      const at = heap.alloc(sizes[i % 4]);
      assert.ok(!seen.has(at) && !mine.includes(at), `block ${at} given twice`);
      seen.add(at);
    }
    for (const at of seen) heap.free(at);
    for (const at of mine) heap.free(at);
    heap.checkIntegrity();
    assert.equal(heap.stats().allocations.current, 0);
    heap.detach();
    const after = SharedHeap.attach(heap.descriptor());
    assert.equal(after.stats().freeBytes, after.stats().byteLength);
    after.detach();
  } finally {
    pool.terminate();
  }
});

Deno.test("SharedHeap: a terminated Worker's blocks are reported, not reused, then reclaimed", async () => {
  const heap = SharedHeap.create(128 * MiB);
  const u8 = new Uint8Array(heap.buffer);
  const pool = new Pool(1);
  try {
    const started = pool.next(0, "started");
    pool.send(0, {
      type: "start",
      heap: heap.descriptor(),
      seed: 7,
      maxBytes: 64 * 1024,
      handOffRate: 0,
    });
    const { arena } = await started;
    const holding = pool.next(0, "holding");
    pool.send(0, { type: "hold", count: 40 });
    const { blocks } = await holding;
    await new Promise((resolve) => setTimeout(resolve, 100));
    pool.terminate(); // mid-work: never detaches
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.ok(heap.arenas().some((a) => a.arena === arena));
    const reported = new Set(heap.blocksOf(arena).map((b) => b.byteOffset));
    for (const b of blocks) assert.ok(reported.has(b.byteOffset));
    // Allocate over everything else: the dead arena's blocks stay intact.
    const mine: number[] = [];
    for (let i = 0; i < 400; i++) {
      const at = heap.tryAlloc(16 << (i % 14));
      if (at === undefined) break;
      u8.fill(0x11, at, at + (16 << (i % 14)));
      mine.push(at);
    }
    for (const b of blocks) checkPattern(u8, b);
    let report;
    try {
      report = heap.reclaim(arena, { keep: [blocks[0].byteOffset] });
    } catch (error) {
      // Terminated inside the core lock: reported, never guessed at.
      assert.ok(error instanceof HeapBusyError);
      assert.equal(error.holder, arena);
      return;
    }
    assert.deepEqual(report.kept.map((b) => b.byteOffset), [
      blocks[0].byteOffset,
    ]);
    assert.ok(report.freed.length >= blocks.length - 1);
    checkPattern(u8, blocks[0]);
    heap.free(blocks[0].byteOffset);
    for (const at of mine) heap.free(at);
    heap.checkIntegrity();
    const stats = heap.stats();
    assert.equal(stats.allocations.current, 0);
    assert.equal(stats.allocatedBytes.current, 0);
    heap.detach();
    const after = SharedHeap.attach(heap.descriptor());
    assert.equal(after.stats().freeBytes, after.stats().byteLength);
    after.detach();
  } finally {
    pool.terminate();
  }
});
