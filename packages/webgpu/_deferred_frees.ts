/**
 * Internal: frees held back until the queue has finished the work submitted
 * before them, for the GPU allocators' `"after-fence"` reuse. The frees wait
 * in `@allot/core`'s {@linkcode DeferredFrees}, the same fence-ordered queue
 * the caching and watermark allocators keep for their own streams. Frees of
 * one task share one queue fence (see `QueueStream`), so they are kept as one
 * batch, one item of that queue: deferring is an array push, and an
 * allocation checks one fence however many frees wait. A batch comes back
 * when its fence resolves (one promise reaction per task), and any
 * allocation polls too (and `synchronize()` waits for every fence).
 *
 * @module
 */

import {
  DeferredFrees,
  type DeferredItem,
  type Fence,
  type SynchronizeOptions,
} from "@allot/core";
import type { QueueStream } from "./queue_stream.ts";

/** The frees of one task: they share its queue fence. */
class _Batch implements DeferredItem {
  waitingFences = 0;
  readonly tokens: unknown[] = [];
  bytes = 0;
  constructor(readonly fence: Fence) {}
}

/** Frees waiting for queue fences. */
export class _QueueFrees {
  #stream: QueueStream;
  #release: (token: unknown) => void;
  #frees: DeferredFrees<_Batch>;
  /** the batch of the current task's fence */
  #current: _Batch | undefined;
  /** one-element arguments of `DeferredFrees.defer` */
  #streamIds: number[];
  #count = 0;
  #bytes = 0;
  #onFence = (): void => {
    try {
      this.poll();
    } catch {
      // a fence that threw stays held; the next poll() reports it
    }
  };

  /**
   * @param stream The device's queue.
   * @param release Gives a token back to its pool once its fence completed.
   */
  constructor(stream: QueueStream, release: (token: unknown) => void) {
    this.#stream = stream;
    this.#release = release;
    this.#streamIds = [stream.id];
    this.#frees = new DeferredFrees<_Batch>((batch) => {
      if (this.#current === batch) this.#current = undefined;
      this.#count -= batch.tokens.length;
      this.#bytes -= batch.bytes;
      for (const token of batch.tokens) {
        try {
          release(token);
        } catch {
          // one failed free must not keep the others from their pool
        }
      }
    });
  }

  /** Frees waiting for their fence. */
  get count(): number {
    return this.#count;
  }

  /** Bytes of the frees waiting for their fence. */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * Gives `token` back once the work submitted so far is done.
   *
   * @param token What `release` takes (a block).
   * @param bytes Its size, for the figures.
   */
  defer(token: unknown, bytes: number): void {
    const fence = this.#stream.fence();
    if (fence.completed) {
      this.#release(token);
      return;
    }
    let batch = this.#current;
    if (batch === undefined || batch.fence !== fence) {
      batch = this.#current = new _Batch(fence);
      this.#frees.defer(batch, this.#streamIds, [fence]);
      // back as soon as the queue is done (the task awaiting it is not
      // charged for it), not only at the next allocation
      fence.wait().then(this.#onFence, this.#onFence);
    }
    batch.tokens.push(token);
    batch.bytes += bytes;
    this.#count++;
    this.#bytes += bytes;
  }

  /** Gives back the frees whose fence completed. */
  poll(): void {
    if (this.#count > 0) this.#frees.poll();
  }

  /**
   * Waits for every fence taken so far, then gives their frees back.
   *
   * @returns Resolves when they are back.
   */
  synchronize(options?: SynchronizeOptions): Promise<void> {
    return this.#frees.synchronize(options);
  }
}
