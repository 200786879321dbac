/**
 * {@linkcode QueueStream}: a device's queue as a {@linkcode Stream}, with
 * `queue.onSubmittedWorkDone()` as its fence.
 *
 * @module
 */

import {
  COMPLETED_FENCE,
  type Fence,
  PromiseFence,
  type Stream,
} from "@allot/core";
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
 * On a lost device, `fence()` returns a completed fence: the work will never
 * run, so nothing waits for it.
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
    return new PromiseFence(this.gpuDevice.queue.onSubmittedWorkDone());
  }
}
