/**
 * Test-only: one suite for every allocator that waits on fences before it
 * reuses a freed block (`CachingAllocator`, `WatermarkAllocator`), run
 * against fences that call back into it: a `completed` getter (read while
 * the allocator polls its pending frees) that allocates, frees,
 * synchronizes or empties the cache. No recursion without end, no block
 * reused before its fence completes, stats that add up (`validate()`), and
 * every pending block back in the pool once the fence is done; and
 * `synchronize({ signal })` on a fence that never completes.
 *
 * Not exported from `mod.ts`; excluded from publish (`**\/_test_*.ts`).
 * Import by relative path (`../core/_test_reentrant_fences.ts`).
 *
 * @module
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { InvalidArgumentError } from "./errors.ts";
import type { SynchronizeOptions } from "./deferred_frees.ts";
import type { Stream } from "./fence.ts";
import {
  modelRuns,
  REENTRANT_ACTIONS,
  type ReentrantAction,
  ReentrantStream,
} from "./_test_faults.ts";

/** What the suite calls on the allocator itself. */
export interface FencedAllocator<B> {
  /** Frees a block (into the pending list while its fence waits). */
  free(block: B): void;
  /** Throws on a broken invariant. */
  validate(): void;
  /** Waits for every pending free. */
  synchronize(options?: SynchronizeOptions): Promise<void>;
  /** Gives back what is cached. */
  emptyCache(): void;
  /** Counters; the suite reads `numSyncAllStreams`. */
  memoryStats(): { numSyncAllStreams: number };
}

/** How the suite drives one allocator kind. */
export interface FencedSubject<
  A extends FencedAllocator<B>,
  B extends { release(): void },
> {
  /** The class under test, as test names spell it. */
  name: string;
  /** A fresh allocator over a mock source. */
  make(): A;
  /** Allocates `byteLength` bytes. */
  allocate(allocator: A, byteLength: number): B;
  /** Records that `block` is in use on `stream`. */
  record(allocator: A, block: B, stream: Stream): void;
  /** Where a block sits (two blocks at one place are the same memory). */
  placeOf(block: B): string;
  /**
   * Asserts what waits on fences: `blocks` blocks, or at least one where
   * the allocator counts bytes only (0 means none).
   */
  assertPending(allocator: A, blocks: number, message?: string): void;
  /** Bytes handed out now. */
  allocatedBytes(allocator: A): number;
  /** Bytes held from the source now. */
  reservedBytes(allocator: A): number;
}

interface Run<A, B> {
  allocator: A;
  stream: ReentrantStream;
  /** Places of the blocks that wait on the stream's fence. */
  pending: Set<string>;
  live: B[];
}

/**
 * Registers the suite `"<name> with re-entrant fences"` for `subject`.
 *
 * @param subject How to drive the allocator under test.
 */
export function describeReentrantFences<
  A extends FencedAllocator<B>,
  B extends { release(): void },
>(subject: FencedSubject<A, B>): void {
  function assertNotPending(run: Run<A, B>, b: B, what: string) {
    if (run.stream.done) return;
    assert.ok(
      !run.pending.has(subject.placeOf(b)),
      `${what} reused block ${b} before its fence completed`,
    );
  }

  function setup(sizes: readonly number[]): Run<A, B> {
    const allocator = subject.make();
    const stream = new ReentrantStream();
    const run: Run<A, B> = { allocator, stream, pending: new Set(), live: [] };
    for (const n of sizes) {
      const b = subject.allocate(allocator, n);
      subject.record(allocator, b, stream);
      run.pending.add(subject.placeOf(b));
      allocator.free(b);
    }
    return run;
  }

  function reenter(run: Run<A, B>, action: ReentrantAction, size: number) {
    const { allocator } = run;
    switch (action) {
      case "allocate": {
        const b = subject.allocate(allocator, size);
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

  describe(`${subject.name} with re-entrant fences`, () => {
    for (const action of REENTRANT_ACTIONS) {
      it(`a fence whose completed getter calls ${action}() ends, reuses no block before its fence and keeps the stats right`, async () => {
        const run = setup([4096, 512, 1 << 20]);
        const { allocator, stream } = run;
        subject.assertPending(allocator, 3);
        stream.onRead = () => reenter(run, action, 4096);
        for (let i = 0; i < 20; i++) {
          const b = subject.allocate(allocator, [4096, 512, 1 << 20][i % 3]);
          assertNotPending(run, b, "allocate");
          run.live.push(b);
          if (i % 4 === 3) run.live.shift()!.release();
          allocator.validate();
        }
        allocator.emptyCache();
        allocator.validate();
        assert.ok(stream.reads > 0, "the fence was never read");
        assert.ok(
          stream.maxDepth <= 2,
          `fence getter depth ${stream.maxDepth}`,
        );
        assert.ok(stream.reads < 10_000, `${stream.reads} fence reads`);
        subject.assertPending(allocator, 3, "still waiting");
        stream.onRead = () => {};
        stream.complete();
        await allocator.synchronize();
        subject.assertPending(allocator, 0);
        for (const b of run.live.splice(0)) b.release();
        allocator.validate();
        assert.equal(subject.allocatedBytes(allocator), 0);
        allocator.emptyCache();
        assert.equal(subject.reservedBytes(allocator), 0);
      });
    }

    it("model: random re-entrant actions from fence getters never reuse a pending block, never recurse without end, and stats add up", async () => {
      const sizeArb = fc.constantFrom(512, 4096, 70_000, 1 << 20);
      await fc.assert(
        fc.asyncProperty(
          fc.array(sizeArb, { minLength: 1, maxLength: 4 }),
          fc.array(
            fc.record({
              size: sizeArb,
              reentrant: fc.array(fc.constantFrom(...REENTRANT_ACTIONS), {
                maxLength: 3,
              }),
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
              const b = subject.allocate(allocator, step.size);
              assertNotPending(run, b, "allocate");
              run.live.push(b);
              if (step.free) run.live.shift()!.release();
              allocator.validate();
              assert.ok(stream.maxDepth <= 2, `depth ${stream.maxDepth}`);
            }
            stream.onRead = () => {};
            stream.complete();
            await allocator.synchronize();
            subject.assertPending(allocator, 0);
            for (const b of run.live.splice(0)) b.release();
            allocator.validate();
            assert.equal(subject.allocatedBytes(allocator), 0);
          },
        ),
        { numRuns: modelRuns(100) },
      );
    });

    it("synchronize({ signal }) on a fence that never completes rejects with the signal's reason and changes nothing; bad signals are refused", async () => {
      const allocator = subject.make();
      const stream = new ReentrantStream();
      const b = subject.allocate(allocator, 4096);
      subject.record(allocator, b, stream);
      b.release();
      const syncs = () => allocator.memoryStats().numSyncAllStreams;
      subject.assertPending(allocator, 1);
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
      subject.assertPending(allocator, 1);
      allocator.validate();
      stream.complete();
      await allocator.synchronize({ signal: new AbortController().signal });
      subject.assertPending(allocator, 0);
      allocator.validate();
    });
  });
}
