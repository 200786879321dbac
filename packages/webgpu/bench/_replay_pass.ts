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
 * @param now The clock, in milliseconds: wall-clock time by default, or
 * {@linkcode threadCpuClock} (time this thread ran, so a loaded machine's
 * preemptions are not charged to the peer that was running).
 * @returns Nanoseconds per alloc or free.
 */
export async function replayPass(
  device: GPUDevice,
  ops: ReplayOps,
  peer: ReplayPeer,
  awaitAtMarks: boolean,
  now: () => number = () => performance.now(),
): Promise<number> {
  const live = new Map<number, unknown>();
  let ms = 0, n = 0, offsets = 0;
  let t = now();
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
        ms += now() - t;
        await device.queue.onSubmittedWorkDone();
        t = now();
      }
    }
  }
  ms += now() - t;
  for (const h of live.values()) peer.free(h);
  peer.step?.();
  replaySink = offsets;
  return (ms * 1e6) / n;
}

/**
 * The CPU time of the calling thread in milliseconds
 * (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)` through Deno's FFI, Linux), or
 * `undefined` where it cannot be had. One read costs about 1-4 µs (a system
 * call), charged alike to every peer (the no-op peer shows it).
 *
 * @returns The clock, or `undefined`.
 */
export function threadCpuClock(): (() => number) | undefined {
  if (Deno.build.os !== "linux") return undefined;
  try {
    const lib = Deno.dlopen("libc.so.6", {
      clock_gettime: { parameters: ["i32", "buffer"], result: "i32" },
    });
    const time = new BigInt64Array(2);
    const bytes = new Uint8Array(time.buffer);
    const CLOCK_THREAD_CPUTIME_ID = 3;
    return () => {
      lib.symbols.clock_gettime(CLOCK_THREAD_CPUTIME_ID, bytes);
      return Number(time[0]) * 1e3 + Number(time[1]) / 1e6;
    };
  } catch {
    return undefined;
  }
}
