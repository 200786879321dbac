/**
 * Outside-in checks of `CachingAllocator` against fences that call back into
 * it: a `completed` getter (read while the allocator polls its pending frees)
 * that allocates, frees, synchronizes or empties the cache. No recursion
 * without end, no block reused before its fence completes, stats that add up
 * (`validate()`), and every pending block back in the pool once the fence is
 * done.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { InvalidArgumentError, MockSegmentSource } from "@allot/core";
import { type CachedBlock, CachingAllocator } from "./mod.ts";
import {
  modelRuns,
  REENTRANT_ACTIONS,
  type ReentrantAction,
  ReentrantStream,
} from "../core/_test_faults.ts";

type Action = ReentrantAction;
const ACTIONS = REENTRANT_ACTIONS;

interface Run {
  allocator: CachingAllocator<unknown>;
  stream: ReentrantStream;
  /** Addresses of the blocks that wait on the stream's fence. */
  pending: Set<string>;
  live: CachedBlock<unknown>[];
}

const placeOf = (b: CachedBlock<unknown>) => `${b.address}`;

function assertNotPending(run: Run, b: CachedBlock<unknown>, what: string) {
  if (run.stream.done) return;
  assert.ok(
    !run.pending.has(placeOf(b)),
    `${what} reused block ${b} before its fence completed`,
  );
}

function setup(sizes: readonly number[]): Run {
  const allocator = new CachingAllocator(new MockSegmentSource());
  const stream = new ReentrantStream();
  const run: Run = { allocator, stream, pending: new Set(), live: [] };
  for (const n of sizes) {
    const b = allocator.allocate(n);
    allocator.recordStream(b, stream);
    run.pending.add(placeOf(b));
    allocator.free(b);
  }
  return run;
}

function reenter(run: Run, action: Action, size: number): void {
  const { allocator } = run;
  switch (action) {
    case "allocate": {
      const b = allocator.allocate(size);
      assertNotPending(run, b, "a re-entrant allocate");
      run.live.push(b);
      break;
    }
    case "free":
      run.live.pop()?.release();
      break;
    case "synchronize":
      void allocator.synchronize();
      break;
    case "emptyCache":
      allocator.emptyCache();
      break;
  }
}

describe("CachingAllocator with re-entrant fences", () => {
  for (const action of ACTIONS) {
    it(`a fence whose completed getter calls ${action}() ends, reuses no block before its fence and keeps the stats right`, async () => {
      const run = setup([4096, 512, 1 << 20]);
      const { allocator, stream } = run;
      assert.equal(allocator.pendingFreeCount, 3);
      stream.onRead = () => reenter(run, action, 4096);
      for (let i = 0; i < 20; i++) {
        const b = allocator.allocate([4096, 512, 1 << 20][i % 3]);
        assertNotPending(run, b, "allocate");
        run.live.push(b);
        if (i % 4 === 3) run.live.shift()!.release();
        allocator.validate();
      }
      allocator.emptyCache();
      allocator.validate();
      assert.ok(stream.reads > 0, "the fence was never read");
      assert.ok(stream.maxDepth <= 2, `fence getter depth ${stream.maxDepth}`);
      assert.ok(stream.reads < 10_000, `${stream.reads} fence reads`);
      assert.equal(allocator.pendingFreeCount, 3, "still waiting");
      stream.onRead = () => {};
      stream.complete();
      await allocator.synchronize();
      assert.equal(allocator.pendingFreeCount, 0);
      for (const b of run.live.splice(0)) b.release();
      allocator.validate();
      assert.equal(allocator.allocatedBytes, 0);
      allocator.emptyCache();
      assert.equal(allocator.reservedBytes, 0);
    });
  }

  it("model: random re-entrant actions from fence getters never reuse a pending block, never recurse without end, and stats add up", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(512, 4096, 70_000, 1 << 20), {
          minLength: 1,
          maxLength: 4,
        }),
        fc.array(
          fc.record({
            size: fc.constantFrom(512, 4096, 70_000, 1 << 20),
            reentrant: fc.array(fc.constantFrom(...ACTIONS), { maxLength: 3 }),
            free: fc.boolean(),
          }),
          { minLength: 1, maxLength: 12 },
        ),
        fc.integer({ min: 0, max: 12 }),
        async (pendingSizes, steps, completeAt) => {
          const run = setup(pendingSizes);
          const { allocator, stream } = run;
          for (let i = 0; i < steps.length; i++) {
            if (i === completeAt) stream.complete();
            const step = steps[i];
            stream.onRead = () => {
              for (const a of step.reentrant) reenter(run, a, step.size);
            };
            const b = allocator.allocate(step.size);
            assertNotPending(run, b, "allocate");
            run.live.push(b);
            if (step.free) run.live.shift()!.release();
            allocator.validate();
            assert.ok(stream.maxDepth <= 2, `depth ${stream.maxDepth}`);
          }
          stream.onRead = () => {};
          stream.complete();
          await allocator.synchronize();
          assert.equal(allocator.pendingFreeCount, 0);
          for (const b of run.live.splice(0)) b.release();
          allocator.validate();
          assert.equal(allocator.allocatedBytes, 0);
        },
      ),
      { numRuns: modelRuns(100) },
    );
  });

  it("synchronize({ signal }) on a fence that never completes rejects with the signal's reason and changes nothing; bad signals are refused", async () => {
    const allocator = new CachingAllocator(new MockSegmentSource());
    const stream = new ReentrantStream();
    const b = allocator.allocate(4096);
    allocator.recordStream(b, stream);
    b.release();
    const syncs = () => allocator.memoryStats().numSyncAllStreams;
    assert.equal(allocator.pendingFreeCount, 1);
    for (
      const signal of [
        {},
        null,
        1,
        "abort",
        Object.create(AbortSignal.prototype),
      ]
    ) {
      await assert.rejects(
        allocator.synchronize({ signal } as never),
        InvalidArgumentError,
      );
    }
    await assert.rejects(
      allocator.synchronize(null as never),
      InvalidArgumentError,
    );
    const reason = new Error("stop waiting");
    await assert.rejects(
      allocator.synchronize({ signal: AbortSignal.abort(reason) }),
      (e) => e === reason,
    );
    assert.equal(syncs(), 0, "a refused call is not counted");
    const controller = new AbortController();
    const waiting = allocator.synchronize({ signal: controller.signal });
    await new Promise((r) => setTimeout(r, 5));
    controller.abort(reason);
    await assert.rejects(waiting, (e) => e === reason);
    assert.equal(allocator.pendingFreeCount, 1);
    allocator.validate();
    stream.complete();
    await allocator.synchronize({ signal: new AbortController().signal });
    assert.equal(allocator.pendingFreeCount, 0);
    allocator.validate();
  });
});
