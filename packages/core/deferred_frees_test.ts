import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { DeferredFrees, FenceError } from "./deferred_frees.ts";
import type { Fence } from "./fence.ts";
import { modelRuns } from "./_test_faults.ts";

interface Item {
  id: number;
  waitingFences: number;
  fences: TestFence[];
}

/** A fence of a test stream: completes in order, may throw or lie. */
class TestFence implements Fence {
  done = false;
  throwsLeft = 0;
  reads = 0;
  get completed(): boolean {
    this.reads++;
    if (this.throwsLeft > 0) {
      this.throwsLeft--;
      throw new Error("device lost");
    }
    return this.done;
  }
  wait(): Promise<void> {
    this.done = true;
    return Promise.resolve();
  }
}

describe("DeferredFrees", () => {
  it("DeferredFrees.poll() reads one fence per stream, however many frees wait", () => {
    const frees = new DeferredFrees<Item>(() => {});
    const fences: TestFence[] = [];
    for (let i = 0; i < 10_000; i++) {
      const f = new TestFence();
      fences.push(f);
      frees.defer({ id: i, waitingFences: 0, fences: [f] }, [1], [f]);
    }
    frees.poll();
    frees.poll();
    assert.equal(fences[0].reads, 2);
    assert.equal(fences.reduce((n, f) => n + f.reads, 0), 2);
    assert.equal(frees.count, 10_000);
  });

  it("DeferredFrees groups frees that share a fence", () => {
    const released: number[] = [];
    const frees = new DeferredFrees<Item>((item) => released.push(item.id));
    const f = new TestFence();
    for (let i = 0; i < 5; i++) {
      frees.defer({ id: i, waitingFences: 0, fences: [f] }, [1], [f]);
    }
    frees.poll();
    f.done = true;
    frees.poll();
    assert.deepEqual(released, [0, 1, 2, 3, 4]);
    assert.equal(f.reads, 2);
  });

  it("DeferredFrees.poll() reports a throwing fence as FenceError and keeps serving", async () => {
    const released: number[] = [];
    const frees = new DeferredFrees<Item>((item) => released.push(item.id));
    const bad = new TestFence(), good = new TestFence();
    bad.throwsLeft = Infinity;
    frees.defer({ id: 1, waitingFences: 0, fences: [bad] }, [1], [bad]);
    frees.defer({ id: 2, waitingFences: 0, fences: [good] }, [2], [good]);
    good.done = true;
    assert.throws(() => frees.poll(), FenceError);
    assert.deepEqual(released, [2]);
    assert.equal(frees.count, 1);
    assert.equal(frees.faultedCount, 1);
    frees.poll(); // not read again
    await frees.synchronize();
    assert.deepEqual(released, [2, 1]);
    assert.equal(frees.count, 0);
  });

  it("DeferredFrees.poll() with one stream waiting reads its oldest fence once, and reports a throw", async () => {
    // One stream waiting is poll()'s short path: a completed fence, a
    // running one and a throwing one must each be read once per poll.
    const released: number[] = [];
    const frees = new DeferredFrees<Item>((item) => released.push(item.id));
    const fences = [new TestFence(), new TestFence(), new TestFence()];
    fences.forEach((f, i) => {
      frees.defer({ id: i, waitingFences: 0, fences: [f] }, [7], [f]);
    });
    frees.poll();
    assert.deepEqual(fences.map((f) => f.reads), [1, 0, 0]);
    fences[0].done = true;
    frees.poll(); // releases the first, stops at the second
    assert.deepEqual(released, [0]);
    assert.deepEqual(fences.map((f) => f.reads), [2, 1, 0]);
    fences[1].throwsLeft = 1;
    assert.throws(() => frees.poll(), FenceError);
    assert.deepEqual(fences.map((f) => f.reads), [2, 2, 1]);
    assert.equal(frees.count, 2);
    assert.equal(frees.faultedCount, 1);
    fences[2].done = true;
    frees.poll(); // the third completes; the faulted one waits for sync
    assert.deepEqual(released, [0, 2]);
    assert.equal(fences[1].reads, 2);
    await frees.synchronize();
    assert.deepEqual(released, [0, 2, 1]);
    assert.equal(frees.count, 0);
  });

  it("DeferredFrees.poll() may be re-entered from a release callback", () => {
    // The callback polls while the outer poll empties the only queue: the
    // short path meets no group at the head and must not read one.
    const released: number[] = [];
    const frees: DeferredFrees<Item> = new DeferredFrees<Item>((item) => {
      released.push(item.id);
      frees.poll();
    });
    const fences = [new TestFence(), new TestFence()];
    fences.forEach((f, i) => {
      frees.defer({ id: i, waitingFences: 0, fences: [f] }, [3], [f]);
    });
    for (const f of fences) f.done = true;
    frees.poll();
    assert.deepEqual(released, [0, 1]);
    assert.equal(frees.count, 0);
  });

  it("DeferredFrees never releases an item before all its fences complete (model)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.oneof(
            fc.record({
              kind: fc.constant("defer" as const),
              streams: fc.uniqueArray(fc.integer({ min: 0, max: 3 }), {
                minLength: 1,
                maxLength: 3,
              }),
              reuse: fc.boolean(),
              throws: fc.integer({ min: 0, max: 2 }),
            }),
            fc.record({
              kind: fc.constant("complete" as const),
              stream: fc.integer({ min: 0, max: 3 }),
              count: fc.integer({ min: 1, max: 3 }),
            }),
            fc.constant({ kind: "poll" as const }),
            fc.constant({ kind: "sync" as const }),
          ),
          { maxLength: 60 },
        ),
        async (ops) => {
          const released = new Set<number>();
          const frees = new DeferredFrees<Item>((item) => {
            assert.ok(!released.has(item.id), "released twice");
            for (const f of item.fences) {
              assert.ok(f.done, "released before its fence");
            }
            released.add(item.id);
          });
          const queues: TestFence[][] = [[], [], [], []];
          const completed = [0, 0, 0, 0];
          const items: Item[] = [];
          for (const op of ops) {
            if (op.kind === "defer") {
              const fences = op.streams.map((s) => {
                const q = queues[s];
                const last = q[q.length - 1];
                if (op.reuse && last !== undefined && !last.done) return last;
                const f = new TestFence();
                f.throwsLeft = op.throws === 2 ? Infinity : op.throws;
                q.push(f);
                return f;
              });
              const item = { id: items.length, waitingFences: 0, fences };
              items.push(item);
              frees.defer(item, op.streams, fences);
            } else if (op.kind === "complete") {
              const q = queues[op.stream];
              for (
                let i = 0;
                i < op.count && completed[op.stream] < q.length;
                i++
              ) {
                q[completed[op.stream]++].done = true;
              }
            } else if (op.kind === "poll") {
              try {
                frees.poll();
              } catch (e) {
                assert.ok(e instanceof FenceError);
              }
            } else await frees.synchronize();
            assert.equal(frees.count, items.length - released.size);
          }
          await frees.synchronize();
          assert.equal(released.size, items.length, "everything returned");
          assert.equal(frees.count, 0);
        },
      ),
      { numRuns: modelRuns() },
    );
  });
});
