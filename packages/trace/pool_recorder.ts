import { describeValue, InvalidArgumentError } from "@allot/core";
import type { DeviceLike, DeviceRecording } from "./device_recorder.ts";
import { _read } from "./_read_member.ts";
import { TraceRecorder } from "./trace_recorder.ts";

/** Pools being recorded now: a second recording would wrap the first. */
const _recording = new WeakSet<object>();

/**
 * The shape of a runtime's buffer pool that hands out whole device buffers:
 * TF.js's WebGPU `BufferManager` (`backend.bufferManager`) has it.
 */
export interface BufferPoolLike {
  /** Hands out a buffer of `size` bytes and `usage`. */
  acquireBuffer(size: number, usage: number, ...rest: unknown[]): unknown;
  /** Takes a buffer back. */
  releaseBuffer(buffer: unknown, ...rest: unknown[]): unknown;
  /** When present, a release that does not lower it is not recorded. */
  readonly numBytesUsed?: number;
}

/**
 * Records a runtime's pool as logical `alloc` / `free` events (what the
 * runtime asked for), beside the device's `create` / `destroy` (what it
 * held). Patches the pool instance's `acquireBuffer` / `releaseBuffer`;
 * returns a function that restores them. Errors pass through unchanged.
 *
 * @throws {InvalidArgumentError} When `pool` lacks the two methods, is
 * already being recorded, or `recording` is not what `recordDevice()`
 * returns. The function returned stops recording and gives the pool its own
 * methods back.
 *
 * @example TF.js's WebGPU backend
 * ```ts ignore
 * const rec = recordDevice(device);
 * const backend = new WebGPUBackend(rec.device);
 * recordBufferPool(backend.bufferManager, rec);
 * ```
 */
export function recordBufferPool<D extends DeviceLike>(
  pool: BufferPoolLike,
  recording: DeviceRecording<D>,
): () => void {
  // each method read once: what is checked is what is called
  const acquire = pool === null || typeof pool !== "object"
    ? undefined
    : _read(pool, "acquireBuffer", "a pool") as BufferPoolLike["acquireBuffer"];
  const release = typeof acquire !== "function"
    ? undefined
    : _read(pool, "releaseBuffer", "a pool") as BufferPoolLike["releaseBuffer"];
  if (typeof acquire !== "function" || typeof release !== "function") {
    throw new InvalidArgumentError(
      `Cannot record a pool: it must have acquireBuffer and releaseBuffer methods, received ${
        describeValue(pool)
      }`,
      {
        name: "pool",
        value: pool,
        limit: "acquireBuffer and releaseBuffer methods",
      },
    );
  }
  if (
    recording === null || typeof recording !== "object" ||
    !(recording.recorder instanceof TraceRecorder) ||
    typeof recording.bufferId !== "function"
  ) {
    throw new InvalidArgumentError(
      `Cannot record a pool: recording must be what recordDevice() returns, received ${
        describeValue(recording)
      }`,
      { name: "recording", value: recording, limit: "a DeviceRecording" },
    );
  }
  if (_recording.has(pool)) {
    throw new InvalidArgumentError(
      "Cannot record a pool: it is already recorded (stop that recording first)",
      { name: "pool", value: pool, limit: "a pool not yet recorded" },
    );
  }
  const { recorder } = recording;
  const live = new Map<unknown, number>();
  const ownAcquire = Object.hasOwn(pool, "acquireBuffer");
  const ownRelease = Object.hasOwn(pool, "releaseBuffer");
  const p = pool as unknown as Record<string, unknown>;
  const recordedAcquire = function (
    this: BufferPoolLike,
    size: number,
    usage: number,
    ...rest: unknown[]
  ) {
    const buffer = acquire.call(this, size, usage, ...rest);
    // a request the trace format cannot hold (the pool accepted it) is an
    // "error" event, so the trace stays valid
    if (
      !Number.isSafeInteger(size) || size < 0 ||
      !Number.isSafeInteger(usage) || usage < 0
    ) {
      recorder.push({
        op: "error",
        call: "acquireBuffer",
        message: `accepted size ${describeValue(size)}, usage ${
          describeValue(usage)
        }`,
      }, false);
      return buffer;
    }
    const id = recorder.nextId();
    live.set(buffer, id);
    const ev: Record<string, unknown> = { op: "alloc", id, size, usage };
    const b = recording.bufferId(buffer as object);
    if (b !== undefined) ev.buffer = b;
    recorder.push(ev as { op: "alloc" }, true, 1);
    return buffer;
  };
  const recordedRelease = function (
    this: BufferPoolLike,
    buffer: unknown,
    ...rest: unknown[]
  ) {
    const before = this.numBytesUsed;
    const out = release.call(this, buffer, ...rest);
    const id = live.get(buffer);
    if (
      id !== undefined &&
      (before === undefined || this.numBytesUsed !== before)
    ) {
      live.delete(buffer);
      recorder.push({ op: "free", id }, false);
    }
    return out;
  };
  const restore = (): void => {
    // a pool whose methods were its own gets them back, not deleted
    if (ownAcquire) p.acquireBuffer = acquire;
    else delete p.acquireBuffer;
    if (ownRelease) p.releaseBuffer = release;
    else delete p.releaseBuffer;
  };
  try {
    p.acquireBuffer = recordedAcquire;
    p.releaseBuffer = recordedRelease;
  } catch (error) {
    // a frozen pool (or a method without a setter): it was left
    // half-recorded and marked recorded for good, with the engine's error
    try {
      restore();
    } catch {
      // what could not be set was not set
    }
    throw new InvalidArgumentError(
      `Cannot record a pool: its methods cannot be replaced (${
        error instanceof Error ? error.message : "a non-error was thrown"
      }); a frozen pool cannot be recorded`,
      {
        name: "pool",
        value: pool,
        limit: "a pool whose methods can be replaced",
      },
      { cause: error },
    );
  }
  _recording.add(pool);
  let stopped = false;
  return () => {
    if (stopped) return;
    stopped = true;
    _recording.delete(pool);
    restore();
  };
}
