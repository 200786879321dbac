/**
 * {@linkcode QueueStream}: a device's queue as a {@linkcode Stream}, with
 * `queue.onSubmittedWorkDone()` as its fence.
 *
 * @module
 */

import { _checkDevice } from "./_validate_gpu.ts";
import { COMPLETED_FENCE, type Fence, type Stream } from "@allot/core";
import { _deviceState } from "./_device_state.ts";

// Far from the small ids of core's ManualStream, so both can share an allocator.
let nextId = 0x40000000;
const streams = new WeakMap<GPUDevice, QueueStream>();

/**
 * The queue of a `GPUDevice` as a stream: a fence covers every command
 * buffer submitted to the queue before it was taken, and completes when
 * `queue.onSubmittedWorkDone()` resolves. A block freed with such a fence
 * goes back to its pool only after the work that may use it is done.
 *
 * Every `fence()` call of one task (up to the next microtask checkpoint)
 * gets the same fence, which takes `onSubmittedWorkDone()` right after the
 * task: the queue runs in order, so that later promise covers everything
 * submitted before each call. On a lost device, `fence()` returns a
 * completed fence: the work will never run, so nothing waits for it.
 *
 * @example Wait for submitted work
 * ```ts
 * import { QueueStream } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const stream = QueueStream.of(device);
 *   assert.equal(QueueStream.of(device), stream);
 *   const fence = stream.fence();
 *   await fence.wait();
 *   assert.equal(fence.completed, true);
 *   device.destroy();
 * }
 * ```
 */
export class QueueStream implements Stream {
  /** A stable identifier, unique among allot streams. */
  readonly id: number;
  /** The device whose queue this is. */
  readonly gpuDevice: GPUDevice;
  #current: _QueueFence | undefined;

  /**
   * The stream of `device`'s queue, one per device.
   *
   * @param device The device.
   * @returns Its queue stream.
   */
  static of(device: GPUDevice): QueueStream {
    let stream = streams.get(device);
    if (stream === undefined) {
      stream = new QueueStream(device);
      streams.set(device, stream);
    }
    return stream;
  }

  /**
   * Wraps `device.queue`. Prefer {@linkcode QueueStream.of}, which keeps one
   * stream per device.
   *
   * @param device The device.
   */
  constructor(device: GPUDevice) {
    _checkDevice(device, "Cannot make a queue stream");
    this.id = nextId++;
    this.gpuDevice = device;
    _deviceState(device);
  }

  /** Whether the device was lost. */
  get lost(): boolean {
    return _deviceState(this.gpuDevice).lost;
  }

  /**
   * A fence for all work submitted to the queue so far.
   *
   * @returns A fence over `queue.onSubmittedWorkDone()`, or a completed fence
   * when the device was lost.
   */
  fence(): Fence {
    if (this.lost) return COMPLETED_FENCE;
    if (this.#current === undefined) {
      const fence: _QueueFence = new _QueueFence(() => {
        if (this.#current === fence) this.#current = undefined;
        return this.lost
          ? undefined
          : this.gpuDevice.queue.onSubmittedWorkDone();
      });
      this.#current = fence;
    }
    return this.#current;
  }
}

/**
 * A queue fence shared by every `fence()` call of one task: it takes
 * `onSubmittedWorkDone()` in a microtask after the first call, so it covers
 * all work submitted before any of those calls (the queue runs in order, and
 * a later promise covers more work, never less). One promise per task
 * instead of one per free: `onSubmittedWorkDone` costs about as much as
 * `createBuffer` in some implementations.
 */
class _QueueFence implements Fence {
  #completed = false;
  #done: Promise<void>;

  constructor(seal: () => Promise<undefined> | undefined) {
    this.#done = new Promise<void>((resolve, reject) => {
      queueMicrotask(() => {
        let work: Promise<undefined> | undefined;
        try {
          work = seal();
        } catch (error) {
          // A queue that throws will never say its work is done.
          this.#completed = true;
          reject(error);
          return;
        }
        if (work === undefined) {
          this.#completed = true;
          resolve();
          return;
        }
        // A queue that returns something other than a promise: take it as
        // a value, so the fence settles instead of throwing in a microtask.
        Promise.resolve(work).then(() => {
          this.#completed = true;
          resolve();
        }, (error) => {
          // The work will never run: nothing waits for it any longer.
          this.#completed = true;
          reject(error);
        });
      });
    });
    this.#done.catch(() => {});
  }

  get completed(): boolean {
    return this.#completed;
  }

  wait(): Promise<void> {
    return this.#done;
  }
}
