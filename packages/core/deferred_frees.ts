/**
 * Frees that wait for fences, grouped by fence and queued per stream, so that
 * checking them costs the same with none or ten thousand waiting.
 *
 * The fences of one stream complete in the order they were taken (PyTorch
 * makes the same assumption of CUDA events), so only the oldest fence of each
 * stream is checked: an allocation costs one `completed` read per stream
 * that has frees waiting, not one per waiting free. Consecutive frees that
 * take the same fence object share one group. A stream whose fences complete
 * out of order only gets its memory back later, never too early.
 *
 * @module
 */

import { AllotError, InvalidArgumentError } from "./errors.ts";
import type { Fence } from "./fence.ts";
import { describeValue } from "./validate.ts";
import { validateOptionKeys } from "./option_keys.ts";

/**
 * Options of {@linkcode DeferredFrees.synchronize} and of the allocators'
 * `synchronize()`.
 */
export interface SynchronizeOptions {
  /**
   * Stops the wait: the promise rejects with the signal's reason, and
   * nothing changes (what waits on a fence stays pending until that fence
   * completes, then returns as usual). Without it, a fence that never
   * completes makes `synchronize()` wait forever.
   */
  signal?: AbortSignal;
}

/**
 * Reads and checks {@linkcode SynchronizeOptions}.
 *
 * @param options `undefined` or the options.
 * @returns The signal, if any.
 * @throws {InvalidArgumentError} When `options` is not an object or
 * `signal` is not an `AbortSignal`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { validateSynchronizeOptions } from "@allot/core";
 *
 * const controller = new AbortController();
 * assert.equal(validateSynchronizeOptions({ signal: controller.signal }), controller.signal);
 * assert.equal(validateSynchronizeOptions(undefined), undefined);
 * assert.throws(() => validateSynchronizeOptions({ signal: {} }));
 * ```
 */
export function validateSynchronizeOptions(
  options: unknown,
): AbortSignal | undefined {
  if (options === undefined) return undefined;
  if (typeof options !== "object" || options === null) {
    throw new InvalidArgumentError(
      `Cannot synchronize: options must be an object, received ${
        describeValue(options)
      }`,
      { name: "options", value: options, limit: "SynchronizeOptions" },
    );
  }
  // a misspelt `signal` left the wait with no way to stop it, silently
  validateOptionKeys(options, ["signal"], "synchronize()");
  return validateAbortSignal(
    (options as SynchronizeOptions).signal,
    "Cannot synchronize",
  );
}

/**
 * Checks a signal read once by the caller: `undefined` or a real
 * `AbortSignal` (a brand check: a look-alike is refused).
 *
 * @param signal The value to check.
 * @param action What the error message says could not be done.
 * @returns The signal, if any.
 * @throws {InvalidArgumentError} When `signal` is neither `undefined` nor an
 * `AbortSignal`; the message names the value.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { InvalidArgumentError, validateAbortSignal } from "@allot/core";
 *
 * const controller = new AbortController();
 * assert.equal(validateAbortSignal(controller.signal, "Cannot wait"), controller.signal);
 * assert.equal(validateAbortSignal(undefined, "Cannot wait"), undefined);
 * assert.throws(
 *   () => validateAbortSignal({ aborted: false }, "Cannot wait"),
 *   InvalidArgumentError,
 * );
 * ```
 */
export function validateAbortSignal(
  signal: unknown,
  action: string,
): AbortSignal | undefined {
  if (signal === undefined) return undefined;
  let real = false;
  try {
    // a brand check: a look-alike's getter throws
    real = signal instanceof AbortSignal &&
      typeof (signal as AbortSignal).aborted === "boolean";
  } catch {
    real = false;
  }
  if (!real) {
    throw new InvalidArgumentError(
      `${action}: signal must be an AbortSignal, received ${
        describeValue(signal)
      }`,
      { name: "signal", value: signal, limit: "AbortSignal" },
    );
  }
  return signal as AbortSignal;
}

/** `promise`, or a rejection with `signal.reason` once it aborts. */
function _untilAborted<T>(
  promise: Promise<T>,
  signal: AbortSignal,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    // aborted since the caller checked (a fence's wait() can abort it): the
    // event has fired already and will not fire again
    if (signal.aborted) {
      signal.removeEventListener("abort", onAbort);
      reject(signal.reason);
      return;
    }
    promise.then((value) => {
      signal.removeEventListener("abort", onAbort);
      resolve(value);
    }, (error) => {
      signal.removeEventListener("abort", onAbort);
      reject(error);
    });
  });
}

/** An item that waits for fences: the queue keeps its count of fences left. */
export interface DeferredItem {
  /** Fences the item still waits for; written by {@linkcode DeferredFrees}. */
  waitingFences: number;
}

/**
 * A fence threw when its `completed` state was read. The frees that waited on
 * it stay held back (never reused early) until
 * {@linkcode DeferredFrees.synchronize} has waited for the fence; the
 * allocator that reports this error stays usable.
 *
 * @example
 * ```ts
 * import { DeferredFrees, FenceError, type Fence } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const released: string[] = [];
 * const frees = new DeferredFrees<{ name: string; waitingFences: number }>(
 *   (item) => released.push(item.name),
 * );
 * const lost = (): never => {
 *   throw new Error("device lost");
 * };
 * const broken: Fence = {
 *   get completed() {
 *     return lost();
 *   },
 *   wait: () => Promise.resolve(),
 * };
 * frees.defer({ name: "a", waitingFences: 0 }, [1], [broken]);
 * assert.throws(() => frees.poll(), FenceError);
 * assert.deepEqual(released, []); // held back: never reused early
 * await frees.synchronize();
 * assert.deepEqual(released, ["a"]);
 * ```
 */
export class FenceError extends AllotError {}

/** A group's fence not read in the current poll. */
const _UNREAD = 0;
/** Read in the current poll: completed. */
const _COMPLETED = 1;
/** Read in the current poll: threw (`error`). */
const _THREW = 2;

interface _Group<T> {
  fence: Fence;
  items: T[];
  /** Set by synchronize() once `fence.wait()` settled. */
  done: boolean;
  /** What the current poll read of the fence ({@linkcode _UNREAD} between polls). */
  state: number;
  /** What the fence threw, while `state` is {@linkcode _THREW}. */
  error: unknown;
}

interface _Queue<T> {
  streamId: number;
  groups: (_Group<T> | undefined)[];
  head: number;
}

/**
 * Frees held back until their fences complete.
 *
 * @typeParam T The items (blocks) whose frees wait.
 *
 * @example
 * ```ts
 * import { DeferredFrees, ManualStream } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const released: string[] = [];
 * const frees = new DeferredFrees<{ name: string; waitingFences: number }>(
 *   (item) => released.push(item.name),
 * );
 * const stream = new ManualStream();
 * frees.defer({ name: "a", waitingFences: 0 }, [stream.id], [stream.fence()]);
 * frees.poll();
 * assert.deepEqual(released, []);
 * stream.completeAll();
 * frees.poll();
 * assert.deepEqual(released, ["a"]);
 * ```
 */
export class DeferredFrees<T extends DeferredItem> {
  #release: (item: T) => void;
  #queues = new Map<number, _Queue<T>>();
  #active: _Queue<T>[] = [];
  #faulted: _Group<T>[] = [];
  #count = 0;
  #polling = false;
  #releaseFailed: { error: unknown } | undefined = undefined;

  /**
   * Creates an empty set of deferred frees.
   *
   * @param release Called once per item when its last fence completed.
   */
  constructor(release: (item: T) => void) {
    this.#release = release;
  }

  /** Items waiting for fences. */
  get count(): number {
    return this.#count;
  }

  /** Items held back because one of their fences threw. */
  get faultedCount(): number {
    let n = 0;
    for (const g of this.#faulted) n += g.items.length;
    return n;
  }

  /**
   * Holds `item` back until every fence completed. `fences[i]` was taken from
   * the stream with id `streamIds[i]`.
   *
   * @param item The item; its `waitingFences` is set here.
   * @param streamIds Ids of the streams the fences come from.
   * @param fences At least one fence, none complete.
   * @throws {InvalidArgumentError} When `fences` is empty or `streamIds` has
   * another length (the item would wait forever); nothing changes.
   */
  defer(item: T, streamIds: readonly number[], fences: readonly Fence[]): void {
    if (fences.length === 0 || streamIds.length !== fences.length) {
      throw new InvalidArgumentError(
        `Cannot defer a free: it needs at least one fence and one stream id per fence, received ${fences.length} fences and ${streamIds.length} stream ids`,
        { name: "fences", value: fences.length, limit: streamIds.length },
      );
    }
    item.waitingFences = fences.length;
    this.#count++;
    for (let i = 0; i < fences.length; i++) {
      const id = streamIds[i], fence = fences[i];
      let queue = this.#queues.get(id);
      if (queue === undefined) {
        queue = { streamId: id, groups: [], head: 0 };
        this.#queues.set(id, queue);
      }
      const groups = queue.groups;
      if (groups.length === queue.head) this.#active.push(queue);
      const tail = groups.length > queue.head
        ? groups[groups.length - 1]!
        : undefined;
      if (tail !== undefined && tail.fence === fence && !tail.done) {
        tail.items.push(item);
      } else {
        groups.push({
          fence,
          items: [item],
          done: false,
          state: _UNREAD,
          error: undefined,
        });
      }
    }
  }

  /**
   * Releases the items whose fences completed. Reads the oldest fence of each
   * stream, and the next while those complete.
   *
   * @throws {FenceError} When a fence threw on `completed`, after releasing
   * everything else that was ready; the items of that fence stay held back
   * until {@linkcode DeferredFrees.synchronize}. A `release` callback that
   * threw: its error, after every other ready item was released. A poll from
   * inside a `release` callback returns at once (the outer poll goes on).
   */
  poll(): void {
    // A poll from inside a release callback or a fence getter returns at
    // once (the outer poll goes on).
    if (this.#polling) return;
    // The common case, kept short so that it inlines into an allocation:
    // one stream waits and its oldest fence is still running (one read).
    const active = this.#active;
    if (active.length === 1) {
      const queue = active[0];
      const g = queue.groups[queue.head];
      if (g !== undefined && !g.done && g.state === _UNREAD) {
        // #read catches what the fence throws: no finally needed.
        this.#polling = true;
        const ready = this.#read(g);
        this.#polling = false;
        if (!ready) return;
      }
    }
    this.#polling = true;
    try {
      this.#pollAll();
    } finally {
      this.#polling = false;
    }
    const failed = this.#releaseFailed;
    if (failed !== undefined) {
      this.#releaseFailed = undefined;
      throw failed.error;
    }
  }

  /**
   * Reads the fence of group `g` once: whether it completed or threw (the
   * outcome is kept on the group, so that {@linkcode DeferredFrees.#pollAll}
   * does not read it again in the same poll).
   */
  #read(g: _Group<T>): boolean {
    try {
      if (g.fence.completed !== true) return false;
      g.state = _COMPLETED;
    } catch (e) {
      g.state = _THREW;
      g.error = e;
    }
    return true;
  }

  #pollAll(): void {
    const active = this.#active;
    let error: unknown = undefined;
    let threw = false;
    for (let q = 0; q < active.length;) {
      const queue = active[q];
      const groups = queue.groups;
      while (queue.head < groups.length) {
        const g = groups[queue.head]!;
        if (!g.done) {
          if (g.state === _UNREAD && !this.#read(g)) break;
          const state = g.state;
          g.state = _UNREAD;
          if (state === _THREW) {
            if (!threw) error = g.error;
            threw = true;
            g.error = undefined;
            groups[queue.head++] = undefined;
            this.#faulted.push(g);
            continue;
          }
        }
        groups[queue.head++] = undefined;
        this.#releaseGroup(g);
      }
      if (queue.head === groups.length) {
        groups.length = 0;
        queue.head = 0;
        this.#queues.delete(queue.streamId);
        active[q] = active[active.length - 1];
        active.pop();
      } else {
        if (queue.head >= 64 && queue.head * 2 >= groups.length) {
          groups.copyWithin(0, queue.head);
          groups.length -= queue.head;
          queue.head = 0;
        }
        q++;
      }
    }
    if (threw) {
      throw new FenceError(
        `Cannot check a fence: reading its completed state threw (${
          describe(error)
        }); the frees waiting on it stay held back until synchronize()`,
        { cause: error },
      );
    }
  }

  /**
   * Waits for every fence taken so far (a rejected or throwing fence also
   * ends: its work will never run), then releases the items that waited only
   * on them.
   *
   * @param options A signal that stops the wait (nothing changes then).
   * @returns Resolves when those items were released; rejects with the
   * error of a `release` callback that threw (after releasing the others),
   * or with the signal's reason once it aborts.
   * @throws {InvalidArgumentError} (as a rejection) For bad options.
   */
  async synchronize(options?: SynchronizeOptions): Promise<void> {
    const signal = validateSynchronizeOptions(options);
    signal?.throwIfAborted();
    const groups: _Group<T>[] = [...this.#faulted];
    for (const queue of this.#active) {
      for (let i = queue.head; i < queue.groups.length; i++) {
        groups.push(queue.groups[i]!);
      }
    }
    if (groups.length === 0) return;
    const all = Promise.all(groups.map((g) => {
      try {
        return g.fence.wait().catch(() => {});
      } catch {
        return undefined;
      }
    }));
    // aborted: the groups stay as they are (not done), nothing changes
    await (signal === undefined ? all : _untilAborted(all, signal));
    const faulted = this.#faulted;
    for (const g of groups) g.done = true;
    let w = 0;
    for (let r = 0; r < faulted.length; r++) {
      const g = faulted[r];
      if (g.done) this.#releaseGroup(g);
      else faulted[w++] = g;
    }
    faulted.length = w;
    try {
      this.poll();
    } catch (error) {
      // done groups are not read again; a newer fence that threw stays
      // faulted and is reported by the next poll() that meets it
      if (!(error instanceof FenceError)) throw error;
    }
    const failed = this.#releaseFailed;
    if (failed !== undefined) {
      this.#releaseFailed = undefined;
      throw failed.error;
    }
  }

  /**
   * Calls `fn` once per waiting item (for validation and reports).
   *
   * @param fn The visitor.
   */
  forEach(fn: (item: T) => void): void {
    const seen = new Set<T>();
    const visit = (g: _Group<T>): void => {
      for (const item of g.items) {
        if (!seen.has(item)) {
          seen.add(item);
          fn(item);
        }
      }
    };
    for (const g of this.#faulted) visit(g);
    for (const queue of this.#active) {
      for (let i = queue.head; i < queue.groups.length; i++) {
        visit(queue.groups[i]!);
      }
    }
  }

  #releaseGroup(g: _Group<T>): void {
    const items = g.items;
    for (let i = 0; i < items.length; i++) {
      const item = items[i];
      if (--item.waitingFences === 0) {
        this.#count--;
        try {
          this.#release(item);
        } catch (error) {
          // the rest of the group is still released; poll() rethrows
          this.#releaseFailed ??= { error };
        }
      }
    }
    items.length = 0;
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  try {
    return String(error);
  } catch {
    return "an unprintable value";
  }
}
