/**
 * One runtime-like pass over a trace's requests, shared by `real_traces.ts`
 * and `trace_ab.ts`: ns per alloc/free, awaiting the queue at the trace's
 * marks (untimed) when asked to.
 *
 * @module
 */

import type { ReplayOps } from "@allot/trace";

/** A pool as the replay drives it. */
export interface ReplayPeer {
  alloc(size: number, usage: number): unknown;
  /** What a runtime reads to bind the memory: the buffer and the offset. */
  use(handle: unknown): number;
  free(handle: unknown): void;
  /** Called at step marks and after the pass, where the peer has steps. */
  step?(): void;
}

/** Keeps the offsets read by `use` observable, so no work is optimised out. */
export let replaySink = 0;

/**
 * Replays `ops` through `peer`: allocations and frees are timed, marks await
 * `device.queue.onSubmittedWorkDone()` untimed when `awaitAtMarks` (a step mark
 * calls `peer.step()` first), and what is live at the end is freed untimed.
 *
 * @returns Nanoseconds per alloc or free.
 */
export async function replayPass(
  device: GPUDevice,
  ops: ReplayOps,
  peer: ReplayPeer,
  awaitAtMarks: boolean,
): Promise<number> {
  const live = new Map<number, unknown>();
  let ms = 0, n = 0, offsets = 0;
  let t = performance.now();
  for (let i = 0; i < ops.length; i++) {
    const c = ops.code[i];
    if (c === 0) {
      const h = peer.alloc(ops.size[i], ops.usage[i]);
      offsets += peer.use(h);
      live.set(ops.id[i], h);
      n++;
    } else if (c === 1) {
      peer.free(live.get(ops.id[i]));
      live.delete(ops.id[i]);
      n++;
    } else {
      if (c === 3) peer.step?.();
      if (awaitAtMarks) {
        ms += performance.now() - t;
        await device.queue.onSubmittedWorkDone();
        t = performance.now();
      }
    }
  }
  ms += performance.now() - t;
  for (const h of live.values()) peer.free(h);
  peer.step?.();
  replaySink = offsets;
  return (ms * 1e6) / n;
}
