/**
 * Test-only: collaborators that fail on purpose, for fault-injection model
 * tests of every allocator and pool. Each wraps a working collaborator and
 * misbehaves when told to (`arm(kind)`), once, then behaves again:
 *
 * - {@linkcode FaultyAllocator}: an `allocate()` that throws, returns a short
 *   block, a misaligned one, a released one, the same block twice, or
 *   re-enters its caller; deleters that throw.
 * - {@linkcode FaultySegmentSource}: a `tryAllocateSegment()` that throws,
 *   returns a short or misaligned segment, or re-enters; a `freeSegment()`
 *   that throws.
 * - {@linkcode FaultyFence}: a fence whose `completed` throws, completes
 *   twice (true, then false again), never completes, or whose `wait()`
 *   rejects.
 *
 * Not exported from `mod.ts`; excluded from publish (`**\/_test_*.ts`).
 * Import by relative path (`../core/_test_faults.ts`).
 *
 * @module
 */

import fc from "fast-check";
import { type Allocator, AllocatorBase } from "./allocator.ts";
import { DataPtr } from "./data_ptr.ts";
import type { Device } from "./device.ts";
import type { Fence, Stream } from "./fence.ts";
import type {
  Segment,
  SegmentRequestOptions,
  SegmentSource,
} from "./segment_source.ts";
import type { Deleter } from "./unique_void_ptr.ts";

/** Thrown by an injected fault; never a typed allot error. */
export class InjectedFault extends Error {
  constructor(what: string) {
    super(`Injected fault: ${what}`);
    this.name = "InjectedFault";
  }
}

/** Ways an allocator can misbehave. */
export type AllocatorFault =
  | "throw"
  | "short"
  | "misaligned"
  | "released"
  | "duplicate"
  | "reenter"
  | "deleter-throws";

/** Every {@linkcode AllocatorFault}. */
export const ALLOCATOR_FAULTS: readonly AllocatorFault[] = [
  "throw",
  "short",
  "misaligned",
  "released",
  "duplicate",
  "reenter",
  "deleter-throws",
];

/**
 * Wraps a host-memory allocator and misbehaves once per `arm()`. Counts the
 * bytes it has live so tests can check nothing leaked.
 */
export class FaultyAllocator<C = unknown>
  implements Allocator<ArrayBuffer, unknown> {
  readonly device: Device;
  readonly inner: Allocator<ArrayBuffer, C>;
  /** Faults that fired, by kind. */
  readonly fired: Map<AllocatorFault, number> = new Map();
  /** Called inside `allocate()` by a "reenter" fault. */
  onReenter: (() => void) | undefined;
  #armed: AllocatorFault | undefined;
  #last: DataPtr<ArrayBuffer, unknown> | undefined;
  #live = new Set<DataPtr<ArrayBuffer, unknown>>();

  constructor(inner: Allocator<ArrayBuffer, C>) {
    this.device = inner.device;
    this.inner = inner;
  }

  /** Misbehaves on the next call that can show `fault`. */
  arm(fault: AllocatorFault | undefined): void {
    this.#armed = fault;
  }

  /** Blocks handed out and not yet freed. */
  get liveCount(): number {
    return this.#live.size;
  }

  #fire(kind: AllocatorFault): boolean {
    if (this.#armed !== kind) return false;
    this.#armed = undefined;
    this.fired.set(kind, (this.fired.get(kind) ?? 0) + 1);
    countFault();
    return true;
  }

  allocate(byteLength: number): DataPtr<ArrayBuffer, unknown> {
    if (this.#fire("throw")) throw new InjectedFault("allocate() threw");
    if (this.#fire("reenter")) this.onReenter?.();
    if (this.#fire("duplicate") && this.#last && !this.#last.released) {
      return this.#last;
    }
    if (this.#fire("misaligned")) {
      // Valid memory, one byte past an aligned start.
      const inner = this.inner.allocate(byteLength + 1);
      const ptr: DataPtr<ArrayBuffer, unknown> = new DataPtr(
        inner.memory,
        inner.byteOffset + 1,
        byteLength,
        this.device,
        { context: inner, deleter: this.#deleter(() => ptr) },
      );
      this.#live.add(ptr);
      return ptr;
    }
    const inner = this.inner.allocate(byteLength);
    const wrap = (offset: number, length: number) => {
      const ptr: DataPtr<ArrayBuffer, unknown> = new DataPtr(
        inner.memory,
        offset,
        length,
        this.device,
        { context: inner, deleter: this.#deleter(() => ptr) },
      );
      this.#live.add(ptr);
      return ptr;
    };
    if (this.#fire("short") && byteLength > 0) {
      return wrap(inner.byteOffset, byteLength - 1);
    }
    const ptr = wrap(inner.byteOffset, inner.byteLength);
    if (this.#fire("released")) {
      ptr.release();
      return ptr;
    }
    this.#last = ptr;
    return ptr;
  }

  #deleter(
    self: () => DataPtr<ArrayBuffer, unknown>,
  ): Deleter<unknown> {
    return (context) => {
      this.#live.delete(self());
      (context as DataPtr).release();
      if (this.#fire("deleter-throws")) {
        throw new InjectedFault("deleter threw");
      }
    };
  }

  rawDeleter(): Deleter<unknown> | undefined {
    return undefined;
  }

  rawAllocate(byteLength: number): unknown {
    return this.inner.rawAllocate(byteLength);
  }

  rawDeallocate(context: unknown): void {
    this.inner.rawDeallocate(context as C);
  }

  copyData(
    dest: DataPtr<ArrayBuffer, unknown>,
    src: DataPtr<ArrayBuffer, unknown>,
    byteLength: number,
  ): void {
    new Uint8Array(dest.memory, dest.byteOffset, byteLength).set(
      new Uint8Array(src.memory, src.byteOffset, byteLength),
    );
  }

  clone(src: DataPtr<ArrayBuffer, unknown>): DataPtr<ArrayBuffer, unknown> {
    const dest = this.allocate(src.byteLength);
    this.copyData(dest, src, src.byteLength);
    return dest;
  }
}

/**
 * A first-fit allocator over one `ArrayBuffer` that reuses freed space, so
 * a block handed out twice or written past its end overlaps a live one
 * (which byte-pattern checks catch). Offsets are multiples of 8.
 */
export class FirstFitAllocator extends AllocatorBase<ArrayBuffer, number> {
  readonly device: Device;
  readonly memory: ArrayBuffer;
  /** Live blocks: offset to byte length. */
  readonly live: Map<number, number> = new Map();

  constructor(device: Device, byteLength = 1 << 20) {
    super();
    this.device = device;
    this.memory = new ArrayBuffer(byteLength);
  }

  allocate(byteLength: number): DataPtr<ArrayBuffer, number> {
    const need = Math.max(8, Math.ceil(byteLength / 8) * 8);
    const taken = [...this.live].sort((a, b) => a[0] - b[0]);
    let at = 0;
    for (const [offset, length] of taken) {
      if (offset - at >= need) break;
      at = Math.max(at, offset + Math.max(8, Math.ceil(length / 8) * 8));
    }
    if (at + need > this.memory.byteLength) {
      throw new InjectedFault(`first-fit heap full (${byteLength} bytes)`);
    }
    this.live.set(at, byteLength);
    return new DataPtr(this.memory, at, byteLength, this.device, {
      context: at,
      deleter: (offset) => {
        if (!this.live.delete(offset)) {
          throw new InjectedFault(`double free at ${offset}`);
        }
      },
    });
  }
}

/**
 * Writes a pattern unique to `id` into `bytes`; {@linkcode checkPattern}
 * verifies it. Two live blocks that overlap cannot both keep their pattern.
 */
export function writePattern(bytes: Uint8Array, id: number): void {
  for (let k = 0; k < bytes.length; k++) {
    bytes[k] = (id * 131 + k * 7 + (id >>> 8)) & 0xff;
  }
}

/**
 * Throws when `bytes` no longer hold the pattern of `id`, naming the first
 * changed byte.
 */
export function checkPattern(
  bytes: Uint8Array,
  id: number,
  what = "block",
): void {
  for (let k = 0; k < bytes.length; k++) {
    const want = (id * 131 + k * 7 + (id >>> 8)) & 0xff;
    if (bytes[k] !== want) {
      throw new Error(
        `Corruption: byte ${k} of ${what} ${id} is 0x${
          bytes[k].toString(16)
        }, expected 0x${want.toString(16)}`,
      );
    }
  }
}

/** Ways a segment source can misbehave. */
export type SegmentFault =
  | "throw"
  | "short"
  | "misaligned"
  | "reenter"
  | "free-throws";

/** Every {@linkcode SegmentFault}. */
export const SEGMENT_FAULTS: readonly SegmentFault[] = [
  "throw",
  "short",
  "misaligned",
  "reenter",
  "free-throws",
];

/** Wraps a segment source and misbehaves once per `arm()`. */
export class FaultySegmentSource<M> implements SegmentSource<M> {
  readonly inner: SegmentSource<M>;
  /** Faults that fired, by kind. */
  readonly fired: Map<SegmentFault, number> = new Map();
  /** Called inside `tryAllocateSegment()` by a "reenter" fault. */
  onReenter: (() => void) | undefined;
  #armed: SegmentFault | undefined;
  #lies = new Map<Segment<M>, Segment<M>>();

  constructor(inner: SegmentSource<M>) {
    this.inner = inner;
  }

  get device(): Device {
    return this.inner.device;
  }
  get alignment(): number {
    return this.inner.alignment;
  }
  get maxSegmentByteLength(): number {
    return this.inner.maxSegmentByteLength;
  }
  get capacityBytes(): number {
    return this.inner.capacityBytes;
  }

  /** Misbehaves on the next call that can show `fault`. */
  arm(fault: SegmentFault | undefined): void {
    this.#armed = fault;
  }

  #fire(kind: SegmentFault): boolean {
    if (this.#armed !== kind) return false;
    this.#armed = undefined;
    this.fired.set(kind, (this.fired.get(kind) ?? 0) + 1);
    countFault();
    return true;
  }

  tryAllocateSegment(
    byteLength: number,
    options?: SegmentRequestOptions,
  ): Segment<M> | undefined {
    if (this.#fire("throw")) throw new InjectedFault("segment source threw");
    if (this.#fire("reenter")) this.onReenter?.();
    const segment = this.inner.tryAllocateSegment(byteLength, options);
    if (segment === undefined) return undefined;
    let lie: Segment<M> | undefined;
    if (this.#fire("short") && segment.byteLength > 1) {
      lie = { ...segment, byteLength: segment.byteLength >>> 1 };
    } else if (this.#fire("misaligned")) {
      lie = { ...segment, byteOffset: segment.byteOffset + 1 };
    }
    if (lie === undefined) return segment;
    this.#lies.set(lie, segment);
    return lie;
  }

  freeSegment(segment: Segment<M>): void {
    this.inner.freeSegment(this.#lies.get(segment) ?? segment);
    this.#lies.delete(segment);
    if (this.#fire("free-throws")) {
      throw new InjectedFault("freeSegment() threw");
    }
  }
}

/** Ways a fence can misbehave. */
export type FenceFault =
  | "completed-throws"
  | "completes-twice"
  | "never"
  | "wait-rejects";

/** Every {@linkcode FenceFault}. */
export const FENCE_FAULTS: readonly FenceFault[] = [
  "completed-throws",
  "completes-twice",
  "never",
  "wait-rejects",
];

/**
 * A fence that misbehaves as told. `complete()` completes it; a
 * "completes-twice" fence reports `completed` true once, then false again,
 * then true; "completed-throws" throws on the first read of `completed`;
 * "never" ignores `complete()`; "wait-rejects" rejects `wait()`.
 */
export class FaultyFence implements Fence {
  readonly fault: FenceFault | undefined;
  #done = false;
  #reads = 0;

  constructor(fault?: FenceFault) {
    this.fault = fault;
  }

  /** Completes the fence (unless its fault is "never"). */
  complete(): void {
    if (this.fault !== "never") this.#done = true;
    else countFault();
  }

  get completed(): boolean {
    this.#reads++;
    if (this.fault === "completed-throws" && this.#reads === 1) {
      countFault();
      throw new InjectedFault("fence.completed threw");
    }
    if (this.fault === "completes-twice" && this.#done) {
      // true, false, true, true…
      if (this.#reads === 2) countFault();
      return this.#reads !== 2;
    }
    return this.#done;
  }

  wait(): Promise<void> {
    if (this.fault === "wait-rejects") {
      countFault();
      return Promise.reject(new InjectedFault("fence.wait() rejected"));
    }
    return this.#done ? Promise.resolve() : new Promise(() => {});
  }
}

/** A fast-check arbitrary: no fault most of the time, else one of `kinds`. */
export function faultArbitrary<K extends string>(
  kinds: readonly K[],
  faultEvery = 4,
): fc.Arbitrary<K | undefined> {
  return fc.integer({ min: 0, max: kinds.length * faultEvery - 1 }).map((i) =>
    i < kinds.length ? kinds[i] : undefined
  );
}

/**
 * Runs `fn`, and returns the error it threw (or `undefined`). For model
 * steps where an injected fault may or may not surface as an error.
 */
export function attempt(fn: () => void): unknown {
  try {
    fn();
    return undefined;
  } catch (error) {
    return error;
  }
}

let injected = 0;

/** Counts one injected fault: the helpers here call it when a fault fires,
 * and so do tests with fault doubles of their own. */
export function countFault(): void {
  injected++;
}

/** Faults injected so far in this process (see {@linkcode countFault}). */
export function faultsInjected(): number {
  return injected;
}

/** Number of fast-check runs for model properties: 1,000 in CI, more with
 * `ALLOT_FC_RUNS` (the nightly task). */
export function modelRuns(ci = 1000): number {
  let env: string | undefined;
  try {
    env =
      (globalThis as { Deno?: { env: { get(k: string): string | undefined } } })
        .Deno?.env.get("ALLOT_FC_RUNS");
  } catch {
    env = undefined; // no --allow-env
  }
  const n = env === undefined ? NaN : Number(env);
  return Number.isSafeInteger(n) && n > 0 ? n : ci;
}

/**
 * Throws when two of `ranges` (`[memory, start, end)`) of one memory
 * overlap: live blocks of a pool must not.
 */
export function assertDisjoint(
  ranges: Iterable<readonly [memory: unknown, start: number, end: number]>,
): void {
  const byMemory = new Map<unknown, [number, number][]>();
  for (const [memory, start, end] of ranges) {
    let list = byMemory.get(memory);
    if (!list) byMemory.set(memory, list = []);
    list.push([start, end]);
  }
  for (const list of byMemory.values()) {
    list.sort((x, y) => x[0] - y[0]);
    for (let i = 1; i < list.length; i++) {
      if (list[i][0] < list[i - 1][1]) {
        throw new Error(
          `live blocks overlap: [${list[i - 1]}) and [${list[i]})`,
        );
      }
    }
  }
}

/** What a re-entrant fence does to the allocator from inside `completed`. */
export type ReentrantAction =
  | "allocate"
  | "free"
  | "synchronize"
  | "emptyCache";
/** Every {@linkcode ReentrantAction}. */
export const REENTRANT_ACTIONS: readonly ReentrantAction[] = [
  "allocate",
  "free",
  "synchronize",
  "emptyCache",
];

/** A stream whose fences' `completed` getters run `onRead` first. */
export class ReentrantStream implements Stream {
  readonly id = 7;
  done = false;
  reads = 0;
  depth = 0;
  maxDepth = 0;
  onRead: () => void = () => {};
  #waiters: (() => void)[] = [];

  fence(): Fence {
    // deno-lint-ignore no-this-alias
    const s = this;
    return {
      get completed(): boolean {
        s.reads++;
        s.depth++;
        s.maxDepth = Math.max(s.maxDepth, s.depth);
        try {
          if (s.reads < 10_000) s.onRead();
        } finally {
          s.depth--;
        }
        return s.done;
      },
      wait(): Promise<void> {
        return s.done
          ? Promise.resolve()
          : new Promise<void>((resolve) => s.#waiters.push(resolve));
      },
    };
  }

  complete(): void {
    this.done = true;
    for (const w of this.#waiters.splice(0)) w();
  }
}
