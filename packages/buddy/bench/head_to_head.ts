/**
 * The runtime-neutral core of the buddy benchmark: `BuddyAllocator` against
 * the `alloc` npm package's buddy allocator, warm (one instance reused: the
 * headline) and fresh (made inside the timing), replayed round-robin. It
 * imports nothing Deno-specific, so the same code runs under Deno (from
 * `run.ts`) and under Node (bundled from `node_main.ts`).
 *
 * @module
 */

import process from "node:process";
import { BuddyAllocator } from "../mod.ts";
import alloc from "alloc";
import type { Trace } from "../../cpu/bench/trace.ts";

const MiB = 1 << 20;

export interface PeerBuddy {
  alloc(size: number): Uint8Array | null;
  free(block: Uint8Array): void;
}

export function cpuSeconds(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
}

export function makeOurs(): BuddyAllocator {
  return new BuddyAllocator({
    initialPoolByteLength: 64 * MiB,
    maxPoolByteLength: 2048 * MiB,
  });
}

export function replayOurs(
  buddy: BuddyAllocator,
  trace: Trace,
  view: boolean,
): number {
  const seconds = view
    ? replayWithViews(buddy, trace)
    : replayBare(buddy, trace);
  if (buddy.allocatedBytes !== 0) {
    throw new Error("BuddyAllocator replay leaked");
  }
  return seconds;
}

// One timed loop per function, as the peer's replay has: two loops in one
// function share TurboFan's inlining budget, which left `alloc` a call in
// the loop with views (it was measured at about 5% of that row).
function replayWithViews(buddy: BuddyAllocator, trace: Trace): number {
  const { kind, slot, byteLength } = trace;
  const addresses = new Float64Array(trace.slots);
  const views: (Uint8Array | undefined)[] = new Array(trace.slots);
  const n = kind.length;
  const t0 = cpuSeconds();
  for (let i = 0; i < n; i++) {
    const s = slot[i];
    if (kind[i] === 1) {
      const len = byteLength[i];
      const address = buddy.alloc(len);
      addresses[s] = address;
      views[s] = buddy.bytes(address, len);
    } else {
      buddy.free(addresses[s]);
      views[s] = undefined;
    }
  }
  return cpuSeconds() - t0;
}

function replayBare(buddy: BuddyAllocator, trace: Trace): number {
  const { kind, slot, byteLength } = trace;
  const addresses = new Float64Array(trace.slots);
  const n = kind.length;
  const t0 = cpuSeconds();
  for (let i = 0; i < n; i++) {
    const s = slot[i];
    if (kind[i] === 1) addresses[s] = buddy.alloc(byteLength[i]);
    else buddy.free(addresses[s]);
  }
  return cpuSeconds() - t0;
}

export function makePeer(trace: Trace): PeerBuddy {
  // One power-of-two Buffer; room for power-of-two rounding and buddy
  // fragmentation.
  let size = 1;
  while (size < trace.peakLiveBytes * 4) size *= 2;
  return new alloc.BuddyAllocator(Math.min(size, 2 ** 30), {
    minSize: 256,
  }) as PeerBuddy;
}

export function replayPeer(trace: Trace, warm: PeerBuddy | undefined): number {
  const { kind, slot, byteLength } = trace;
  const blocks: (Uint8Array | null)[] = new Array(trace.slots);
  const n = kind.length;
  const t0 = cpuSeconds();
  // A fresh run makes its Buffer inside the timing, as ours gets its pools.
  const peer = warm ?? makePeer(trace);
  for (let i = 0; i < n; i++) {
    const s = slot[i];
    if (kind[i] === 1) {
      const block = peer.alloc(byteLength[i]);
      if (block === null) throw new Error("alloc: out of memory");
      blocks[s] = block;
    } else {
      peer.free(blocks[s]!);
      blocks[s] = null;
    }
  }
  return cpuSeconds() - t0;
}

// Round-robin over the rows, so load that comes and goes on a shared machine
// hits all of them alike; each row keeps its best run.
export function bestOfAll(
  rounds: number,
  rows: [string, () => number][],
): Map<string, number> {
  const best = new Map<string, number>();
  for (let r = 0; r < rounds; r++) {
    for (const [name, f] of rows) {
      const seconds = f();
      if (!(seconds >= (best.get(name) ?? Infinity))) best.set(name, seconds);
    }
  }
  return best;
}

/**
 * The rows of one trace: best CPU seconds per row name.
 *
 * @param trace The trace.
 * @param reps Replays per row.
 * @returns Seconds per row: `oursWarm`, `oursViewWarm`, `peerWarm` (the
 * headline) and `ours`, `oursView`, `peer` (fresh instances).
 */
export function measure(trace: Trace, reps: number): Map<string, number> {
  const warmOurs = makeOurs();
  replayOurs(warmOurs, trace, false);
  const warmPeer = makePeer(trace);
  replayPeer(trace, warmPeer);
  return bestOfAll(reps, [
    ["oursWarm", () => replayOurs(warmOurs, trace, false)],
    ["oursViewWarm", () => replayOurs(warmOurs, trace, true)],
    ["peerWarm", () => replayPeer(trace, warmPeer)],
    ["ours", () => replayOurs(makeOurs(), trace, false)],
    ["oursView", () => replayOurs(makeOurs(), trace, true)],
    ["peer", () => replayPeer(trace, undefined)],
  ]);
}
