/**
 * One runtime-like pass over a trace's requests, shared by `real_traces.ts`,
 * `trace_ab.ts` and `planned_ab.ts`: ns per alloc/free, awaiting the queue at
 * the trace's marks (untimed) when asked to; and the rotated rounds the two
 * A/B benches time their peers in.
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

/** How {@linkcode timeRotatedRounds} times each peer. */
export interface RoundsOptions {
  /** `"warm"`: one runtime-like pass per round; otherwise the mean of `reps` passes without awaits. */
  mode: string;
  rounds: number;
  reps: number;
  /** Untimed passes without awaits after the first, to warm the JIT. */
  jitPasses?: number;
  now?: () => number;
  /**
   * Reverse the rotated order every other round, so each peer follows each
   * of its two neighbours as often (a plain rotation keeps every peer's
   * predecessor the same in all rounds but the first of each).
   */
  alternate?: boolean;
}

/**
 * Which of `n` peers runs `j`-th in round `r`: the order rotated each round,
 * and, with `alternate`, reversed every other round (so each peer follows
 * each of its two neighbours as often).
 *
 * @returns The peer's index.
 */
export function rotatedPeer(
  j: number,
  r: number,
  n: number,
  alternate: boolean,
): number {
  return alternate && r % 2 === 1 ? (n - 1 - j + r) % n : (j + r) % n;
}

/**
 * Times every peer on `ops` over `rounds` rounds, the peers' order rotated
 * each round; before each measurement `gc()` (when exposed) runs and the
 * queue drains. Each peer first runs one untimed pass (its warm instance).
 *
 * @returns Per peer, ns per alloc or free of each round.
 */
export async function timeRotatedRounds(
  device: GPUDevice,
  ops: ReplayOps,
  peers: readonly ReplayPeer[],
  options: RoundsOptions,
): Promise<number[][]> {
  const { mode, rounds, reps, jitPasses = 0, now, alternate = false } = options;
  const pass = (peer: ReplayPeer, awaits: boolean) =>
    replayPass(device, ops, peer, awaits, now);
  const gc = (globalThis as { gc?: () => void }).gc;
  for (const p of peers) {
    await pass(p, true);
    for (let i = 0; i < jitPasses; i++) await pass(p, false);
  }
  const times: number[][] = peers.map(() => []);
  for (let r = 0; r < rounds; r++) {
    for (let j = 0; j < peers.length; j++) {
      const k = rotatedPeer(j, r, peers.length, alternate);
      gc?.();
      await device.queue.onSubmittedWorkDone();
      if (mode === "warm") times[k].push(await pass(peers[k], true));
      else {
        let sum = 0;
        for (let i = 0; i < reps; i++) sum += await pass(peers[k], false);
        times[k].push(sum / reps);
      }
    }
  }
  return times;
}
