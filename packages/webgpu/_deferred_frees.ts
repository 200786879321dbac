/**
 * Internal: frees held back until the queue has finished the work submitted
 * before them. Frees of one task share one queue fence (see `QueueStream`),
 * so they are kept in one batch and handed back together when it completes:
 * O(1) per free, and nothing to poll on the allocation path.
 *
 * @module
 */

import type { Fence } from "@allot/core";
import type { QueueStream } from "./queue_stream.ts";

interface _Batch {
  fence: Fence;
  items: unknown[];
  bytes: number;
}

/** Frees waiting for queue fences. */
export class _DeferredFrees {
  #stream: QueueStream;
  #free: (item: unknown) => void;
  #current: _Batch | undefined;
  #waits = new Set<Promise<void>>();
  #count = 0;
  #bytes = 0;

  constructor(stream: QueueStream, free: (item: unknown) => void) {
    this.#stream = stream;
    this.#free = free;
  }

  /** Frees waiting for their fence. */
  get count(): number {
    return this.#count;
  }

  /** Bytes of frees waiting for their fence. */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * Frees `item` once the work submitted so far is done.
   *
   * @param item What the free function takes (a block).
   * @param bytes Its size, for the figures.
   */
  defer(item: unknown, bytes: number): void {
    const fence = this.#stream.fence();
    if (fence.completed) {
      this.#free(item);
      return;
    }
    let batch = this.#current;
    if (batch === undefined || batch.fence !== fence) {
      const fresh: _Batch = { fence, items: [], bytes: 0 };
      batch = this.#current = fresh;
      const wait: Promise<void> = fence.wait().catch(() => {}).then(() => {
        this.#waits.delete(wait);
        if (this.#current === fresh) this.#current = undefined;
        this.#count -= fresh.items.length;
        this.#bytes -= fresh.bytes;
        const free = this.#free;
        for (const item of fresh.items) {
          try {
            free(item);
          } catch {
            // One failed free must not keep the others from their pool.
          }
        }
      });
      this.#waits.add(wait);
    }
    batch.items.push(item);
    batch.bytes += bytes;
    this.#count++;
    this.#bytes += bytes;
  }

  /**
   * Resolves once every free deferred so far has run.
   *
   * @returns The promise.
   */
  async settle(): Promise<void> {
    while (this.#waits.size > 0) await Promise.all([...this.#waits]);
  }
}

/**
 * The owner a GPU allocator gives its allocations: under `"after-fence"`
 * frees wait in `deferred` for the queue, under `"queue-order"` they go
 * back at once. Items are handles of the pooling allocator (`release()`).
 *
 * @param stream The device's queue stream.
 * @param afterFence Whether frees wait for the queue.
 * @param bytesOf Bytes of an item, for the pending figures.
 * @returns The deferred frees and the owner.
 */
export function _releaseOwner(
  stream: QueueStream,
  afterFence: boolean,
  bytesOf: (item: unknown) => number,
): { deferred: _DeferredFrees; owner: { free(item: unknown): void } } {
  const release = (item: unknown): void =>
    (item as { release(): void }).release();
  const deferred = new _DeferredFrees(stream, release);
  const owner = afterFence
    ? { free: (item: unknown) => deferred.defer(item, bytesOf(item)) }
    : { free: release };
  return { deferred, owner };
}
