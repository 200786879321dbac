/**
 * Turns a recorded allocation trace (the allot trace format v1, as written by
 * `traces/record_cpu.ts` under `traces/cpu/`) into the slot trace that the
 * cpu and buddy benchmarks replay ({@linkcode Trace}).
 *
 * Only `alloc` and `free` events count. Ids become slots (a freed slot is
 * reused, last freed first, as `trace.ts` does). Allocations of 0 bytes are
 * left out with their frees (no allocator here places nothing the same way;
 * they are counted). Allocations the runtime never gave back (a model's leak)
 * are freed at the end of the pass, newest first, so that a replay leaves
 * every allocator empty. `repeat` passes are concatenated so that one timed
 * replay is long enough to measure.
 *
 * Runtime-neutral: it reads text, so that Deno and Node load the same
 * traces.
 *
 * @module
 */

import type { Trace } from "./trace.ts";

/** A slot trace made from a recorded trace, with what the conversion saw. */
export interface RealTrace extends Trace {
  /** alloc + free events of one pass in the recorded trace. */
  recordedOps: number;
  /** Passes concatenated. */
  repeat: number;
  /** Allocations of 0 bytes left out (per pass). */
  zeroSized: number;
  /** Allocations never freed in the recording, freed at the end of a pass. */
  leaked: number;
  /**
   * Highest byte minus lowest byte over the recorded `offset`s (the
   * runtime's own allocator, e.g. the wasm module's malloc), when every
   * allocation has one.
   */
  recordedFootprint?: number;
}

interface AllocFree {
  op: string;
  id?: number;
  size?: number;
  offset?: number;
}

function fail(name: string, line: number, message: string): never {
  throw new Error(`${name}: line ${line}: ${message}`);
}

/**
 * Converts the JSON Lines text of a recorded trace into a slot trace.
 *
 * @param text The trace text (header line, then one event per line).
 * @param name The trace's name in tables.
 * @param repeat Passes to concatenate (a positive integer).
 * @returns The slot trace.
 */
export function slotTraceFromText(
  text: string,
  name: string,
  repeat = 1,
): RealTrace {
  if (!Number.isInteger(repeat) || repeat < 1) {
    throw new RangeError(`repeat must be a positive integer, got ${repeat}`);
  }
  const lines = text.split("\n");
  const header = JSON.parse(lines[0]);
  if (header?.format !== "allot-trace" || header?.version !== 1) {
    fail(name, 1, "not an allot trace, version 1");
  }
  // One pass: op (1 alloc, 0 free), slot, bytes.
  const kind: number[] = [], slot: number[] = [], bytes: number[] = [];
  const live = new Map<number, { slot: number; size: number }>();
  const zero = new Set<number>();
  const freeSlots: number[] = [];
  let slots = 0, liveBytes = 0, peak = 0, allocations = 0, recordedOps = 0;
  let low = Infinity, high = 0, withOffset = 0, zeroCount = 0;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i];
    if (line === "") continue;
    const e = JSON.parse(line) as AllocFree;
    if (e.op === "alloc") {
      recordedOps++;
      const { id, size } = e;
      if (!Number.isInteger(id) || !Number.isInteger(size) || size! < 0) {
        fail(name, i + 1, "alloc without an integer id and size");
      }
      if (live.has(id!) || zero.has(id!)) {
        fail(name, i + 1, `id ${id} allocated twice`);
      }
      if (typeof e.offset === "number") {
        withOffset++;
        if (e.offset < low) low = e.offset;
        if (e.offset + size! > high) high = e.offset + size!;
      }
      if (size === 0) {
        zero.add(id!);
        zeroCount++;
        continue;
      }
      const s = freeSlots.length > 0 ? freeSlots.pop()! : slots++;
      live.set(id!, { slot: s, size: size! });
      kind.push(1), slot.push(s), bytes.push(size!);
      allocations++;
      liveBytes += size!;
      if (liveBytes > peak) peak = liveBytes;
    } else if (e.op === "free") {
      recordedOps++;
      if (zero.delete(e.id!)) continue;
      const block = live.get(e.id!);
      if (block === undefined) {
        fail(name, i + 1, `free of id ${e.id}, which is not live`);
      }
      live.delete(e.id!);
      kind.push(0), slot.push(block.slot), bytes.push(0);
      freeSlots.push(block.slot);
      liveBytes -= block.size;
    }
  }
  const leaked = live.size;
  for (const block of [...live.values()].reverse()) {
    kind.push(0), slot.push(block.slot), bytes.push(0);
  }
  const n = kind.length;
  const trace: RealTrace = {
    name,
    kind: new Uint8Array(n * repeat),
    slot: new Int32Array(n * repeat),
    byteLength: new Int32Array(n * repeat),
    slots,
    peakLiveBytes: peak,
    allocations: allocations * repeat,
    recordedOps,
    repeat,
    zeroSized: zeroCount,
    leaked,
    recordedFootprint: withOffset > 0 && withOffset === allocations + zeroCount
      ? high - low
      : undefined,
  };
  for (let r = 0; r < repeat; r++) {
    trace.kind.set(kind, r * n);
    trace.slot.set(slot, r * n);
    trace.byteLength.set(bytes, r * n);
  }
  return trace;
}

/**
 * Passes that make one replay at least `ops` operations long.
 *
 * @param trace A one-pass slot trace.
 * @param ops Operations wanted.
 * @returns The number of passes (at least 1).
 */
export function passesFor(trace: Trace, ops: number): number {
  return Math.max(1, Math.ceil(ops / trace.kind.length));
}
