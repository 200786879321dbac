/**
 * Streams and fences: how allot orders device work. A block freed while a
 * device may still use it returns to a pool only once its fence completes.
 * WebGPU plugs `queue.onSubmittedWorkDone()` in; tests use
 * {@linkcode ManualStream}.
 *
 * @module
 */

import { InvalidArgumentError } from "./errors.ts";
import { describeValue, validateByteLength } from "./validate.ts";

/** Completes once the work submitted before it was made is done. */
export interface Fence {
  /** Whether the work is done. Never goes back from `true` to `false`. */
  readonly completed: boolean;
  /**
   * Resolves when the work is done.
   *
   * @returns A promise that resolves once `completed` is `true`.
   */
  wait(): Promise<void>;
}

/** A queue of device work, in the manner of a CUDA stream. */
export interface Stream {
  /**
   * A stable identifier, unique per stream among those an allocator sees: a
   * safe integer held in a data property (not a getter). The caching
   * allocator makes it read-only on the stream object when it first takes
   * the stream, and refuses a getter.
   */
  readonly id: number;
  /**
   * A fence for all work submitted to this stream so far.
   *
   * @returns The fence.
   */
  fence(): Fence;
}

/** A fence that is already complete. */
export const COMPLETED_FENCE: Fence = Object.freeze({
  completed: true,
  wait: (): Promise<void> => Promise.resolve(),
});

/**
 * A fence backed by a promise, such as `queue.onSubmittedWorkDone()`.
 *
 * @example
 * ```ts
 * import { PromiseFence } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const fence = new PromiseFence(Promise.resolve());
 * assert.equal(fence.completed, false);
 * await fence.wait();
 * assert.equal(fence.completed, true);
 * ```
 */
export class PromiseFence implements Fence {
  #completed = false;
  #done: Promise<void>;

  /**
   * Wraps a promise; the fence completes when it settles.
   *
   * @param done Resolves when the work is done. A rejection also completes
   * the fence (the work will never run), and `wait()` rejects with it.
   * @throws {InvalidArgumentError} When `done` is not a promise (a thenable).
   */
  constructor(done: Promise<unknown>) {
    if (
      (typeof done !== "object" && typeof done !== "function") ||
      done === null || typeof done.then !== "function"
    ) {
      throw new InvalidArgumentError(
        `Cannot make a PromiseFence: done must be a promise, received ${
          describeValue(done)
        }`,
        { name: "done", value: done, limit: "a promise" },
      );
    }
    done = Promise.resolve(done);
    this.#done = done.then(
      () => {
        this.#completed = true;
      },
      (error) => {
        this.#completed = true;
        throw error;
      },
    );
    // A rejection is reported to whoever waits, not as unhandled.
    this.#done.catch(() => {});
  }

  /** Whether the promise has settled. */
  get completed(): boolean {
    return this.#completed;
  }

  /**
   * Resolves when the promise settles.
   *
   * @returns The settled promise.
   */
  wait(): Promise<void> {
    return this.#done;
  }
}

let nextStreamId = 1;
let makeManualFence: (stream: ManualStream, seq: number) => Fence;

/**
 * A test double for a device queue: work is "submitted" by taking a fence and
 * "completed" by calling {@linkcode ManualStream.complete}.
 *
 * @example
 * ```ts
 * import { ManualStream } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const stream = new ManualStream();
 * const first = stream.fence();
 * const second = stream.fence();
 * stream.complete(1);
 * assert.equal(first.completed, true);
 * assert.equal(second.completed, false);
 * stream.completeAll();
 * await second.wait();
 * ```
 */
export class ManualStream implements Stream {
  /** A stable identifier. */
  readonly id: number;
  #submitted = 0;
  #completedCount = 0;
  #waiters: { seq: number; resolve: () => void }[] = [];

  /** Creates a stream with a fresh id. */
  constructor() {
    this.id = nextStreamId++;
  }

  /** Number of fences taken so far. */
  get submitted(): number {
    return this.#submitted;
  }

  /** Number of fences completed so far, in order. */
  get completedCount(): number {
    return this.#completedCount;
  }

  /**
   * A fence for the work submitted so far; each call submits one more unit.
   *
   * @returns A fence that completes when {@linkcode ManualStream.complete} reaches it.
   */
  fence(): Fence {
    return makeManualFence(this, ++this.#submitted);
  }

  static {
    // A class, so that reading `completed` is one getter of one shape (an
    // object literal with a getter made a shape per fence: reading the
    // fences of several streams went megamorphic, ~50 ns a read). Declared
    // here to read the stream's private state.
    class ManualFence implements Fence {
      readonly #stream: ManualStream;
      readonly #seq: number;
      constructor(stream: ManualStream, seq: number) {
        this.#stream = stream;
        this.#seq = seq;
      }
      get completed(): boolean {
        return this.#stream.#completedCount >= this.#seq;
      }
      wait(): Promise<void> {
        const stream = this.#stream, seq = this.#seq;
        if (stream.#completedCount >= seq) return Promise.resolve();
        return new Promise((resolve) => stream.#waiters.push({ seq, resolve }));
      }
    }
    makeManualFence = (stream, seq) => new ManualFence(stream, seq);
  }

  /**
   * Completes the next `count` submitted fences, in order.
   *
   * @param count How many to complete; clamped to what was submitted.
   * @throws {InvalidArgumentError} When `count` is not a non-negative safe
   * integer; nothing completes.
   */
  complete(count = 1): void {
    validateByteLength(count, Number.MAX_SAFE_INTEGER, "count");
    this.#completedCount = Math.min(
      this.#submitted,
      this.#completedCount + Math.max(0, count),
    );
    const still: { seq: number; resolve: () => void }[] = [];
    for (const waiter of this.#waiters) {
      if (waiter.seq <= this.#completedCount) waiter.resolve();
      else still.push(waiter);
    }
    this.#waiters = still;
  }

  /** Completes every fence submitted so far. */
  completeAll(): void {
    this.complete(this.#submitted - this.#completedCount);
  }
}
