import { _checkedTrace } from "./parse_trace.ts";
import type { StackFrame, Trace } from "./trace_format.ts";

/** One allocation of a timeline: when it lived, its size, tag and stack. */
export interface TimelineAllocation {
  /** Its id in the trace. */
  readonly id: number;
  /** Bytes. */
  readonly size: number;
  /** Index of its tag in {@linkcode MemoryTimeline.tags} (-1: none). */
  readonly tag: number;
  /** Index of its stack in {@linkcode MemoryTimeline.stacks} (-1: none). */
  readonly stack: number;
  /** Event index (into the timeline) of its start. */
  readonly start: number;
  /** Event index of its end (the timeline length if never freed). */
  end: number;
  /** The buffer or segment it lies in, and where, when the trace says. */
  readonly buffer?: number;
  /** Byte offset in that buffer or segment, when known. */
  readonly offset?: number;
}

/** One buffer or segment: its lifetime and size. */
export interface TimelineSegment {
  /** Its id in the trace. */
  readonly id: number;
  /** Bytes. */
  readonly size: number;
  /** WebGPU usage bits (0 for allocator segments). */
  readonly usage: number;
  /** Point index of its creation. */
  readonly start: number;
  /** Point index of its destruction (the timeline length if never). */
  end: number;
  /** Index of its tag in `tags` (-1: none). */
  readonly tag: number;
  /** Index of its stack in `stacks` (-1: none). */
  readonly stack: number;
}

/**
 * The memory story of a trace, ready to draw: one point per allocation
 * event, with live bytes (allocations outstanding) and held bytes (device
 * buffers or segments), and the allocations and segments with their spans.
 */
export interface MemoryTimeline {
  /** The trace's `source`. */
  readonly source: string;
  /** Time (ms) of each point. */
  readonly time: Float64Array;
  /** Live bytes after each point. */
  readonly live: Float64Array;
  /** Held bytes after each point (equals live when the trace has no buffers). */
  readonly held: Float64Array;
  /** The allocation each point is about (index into `allocations`, or -1 for segments). */
  readonly subject: Int32Array;
  /** +1 for an allocation or creation, -1 for a free or destroy. */
  readonly sign: Int8Array;
  /** Every allocation, in order. */
  readonly allocations: readonly TimelineAllocation[];
  /** Every buffer or segment, in order. */
  readonly segments: readonly TimelineSegment[];
  /** Tag names, indexed by the allocations' `tag`. */
  readonly tags: readonly string[];
  /** Stacks (user frames first), indexed by the allocations' `stack`. */
  readonly stacks: readonly (readonly StackFrame[])[];
  /** Step marks: point index and name. */
  readonly steps: readonly { readonly at: number; readonly name: string }[];
  /** Highest live bytes. */
  readonly peakLive: number;
  /** Point index of the live peak. */
  readonly peakLiveAt: number;
  /** Highest held bytes. */
  readonly peakHeld: number;
  /** Point index of the held peak. */
  readonly peakHeldAt: number;
  /** Entries the source said it lost. */
  readonly dropped: number;
  /** Whether live bytes come from `alloc` events (else from buffers). */
  readonly hasAllocs: boolean;
}

/**
 * Builds the {@linkcode MemoryTimeline} of a (validated) trace.
 *
 * @example
 * ```ts
 * import { memoryTimeline, parseTrace } from "@allot/trace";
 * import assert from "node:assert/strict";
 * const trace = parseTrace([
 *   `{"format":"allot-trace","version":1,"source":"demo"}`,
 *   `{"t":0,"op":"create","id":0,"size":1024,"usage":128,"tag":"weights"}`,
 *   `{"t":1,"op":"create","id":1,"size":512,"usage":128,"tag":"act"}`,
 *   `{"t":2,"op":"destroy","id":1}`,
 * ].join("\n"));
 * const tl = memoryTimeline(trace);
 * assert.equal(tl.peakHeld, 1536);
 * assert.deepEqual([...tl.held], [1024, 1536, 1024]);
 * ```
 */
export function memoryTimeline(trace: Trace): MemoryTimeline {
  trace = _checkedTrace(trace);
  const hasAllocs = trace.events.some((e) => e.op === "alloc");
  const tags: string[] = [];
  const tagIds = new Map<string, number>();
  const tagOf = (t: string | undefined) => {
    if (t === undefined) return -1;
    let i = tagIds.get(t);
    if (i === undefined) tagIds.set(t, i = tags.push(t) - 1);
    return i;
  };
  const stacks: StackFrame[][] = [];
  const stackIndex = new Map<number, number>();
  const allocations: TimelineAllocation[] = [];
  const segments: TimelineSegment[] = [];
  const liveAlloc = new Map<number, number>();
  const liveSeg = new Map<number, number>();
  const time: number[] = [], live: number[] = [], held: number[] = [];
  const subject: number[] = [], sign: number[] = [];
  const steps: { at: number; name: string }[] = [];
  let l = 0, h = 0, peakLive = 0, peakLiveAt = 0, peakHeld = 0, peakHeldAt = 0;
  let dropped = 0;
  const point = (t: number, s: number, g: number) => {
    time.push(t), live.push(l), held.push(hasAllocs ? h : l);
    subject.push(s), sign.push(g);
    const i = time.length - 1;
    if (l > peakLive) peakLive = l, peakLiveAt = i;
    const hh = hasAllocs ? h : l;
    // at equal held bytes, the later point with more live bytes shows more
    if (hh > peakHeld || (hh === peakHeld && l > live[peakHeldAt])) {
      peakHeld = hh, peakHeldAt = i;
    }
  };
  for (const e of trace.events) {
    const sIdx = e.s === undefined ? -1 : stackIndex.get(e.s) ?? -1;
    switch (e.op) {
      case "stack":
        stackIndex.set(e.sid, stacks.push(e.frames.slice()) - 1);
        break;
      case "step":
        steps.push({ at: time.length, name: e.name ?? "" });
        break;
      case "dropped":
        dropped += e.count;
        break;
      case "alloc": {
        const a: TimelineAllocation = {
          id: e.id,
          size: e.size,
          tag: tagOf(e.tag),
          stack: sIdx,
          start: time.length,
          end: -1,
          buffer: e.buffer,
          offset: e.offset,
        };
        liveAlloc.set(e.id, allocations.push(a) - 1);
        l += e.size;
        point(e.t, allocations.length - 1, 1);
        break;
      }
      case "free": {
        const k = liveAlloc.get(e.id);
        if (k === undefined) break;
        liveAlloc.delete(e.id);
        allocations[k].end = time.length;
        l -= allocations[k].size;
        point(e.t, k, -1);
        break;
      }
      case "create": {
        const seg: TimelineSegment = {
          id: e.id,
          size: e.size,
          usage: e.usage,
          start: time.length,
          end: -1,
          tag: tagOf(e.tag),
          stack: sIdx,
        };
        liveSeg.set(e.id, segments.push(seg) - 1);
        if (!hasAllocs) {
          const a: TimelineAllocation = {
            id: e.id,
            size: e.size,
            tag: seg.tag,
            stack: sIdx,
            start: time.length,
            end: -1,
            buffer: e.id,
            offset: 0,
          };
          liveAlloc.set(e.id, allocations.push(a) - 1);
          l += e.size;
          point(e.t, allocations.length - 1, 1);
        } else {
          h += e.size;
          point(e.t, -1, 1);
        }
        break;
      }
      case "destroy": {
        const k = liveSeg.get(e.id);
        if (k === undefined) break;
        liveSeg.delete(e.id);
        segments[k].end = time.length;
        if (!hasAllocs) {
          const j = liveAlloc.get(e.id)!;
          liveAlloc.delete(e.id);
          allocations[j].end = time.length;
          l -= allocations[j].size;
          point(e.t, j, -1);
        } else {
          h -= segments[k].size;
          point(e.t, -1, -1);
        }
        break;
      }
    }
  }
  const n = time.length;
  for (const a of allocations) if (a.end < 0) a.end = n;
  for (const s of segments) if (s.end < 0) s.end = n;
  return {
    source: trace.header.source ?? "",
    time: Float64Array.from(time),
    live: Float64Array.from(live),
    held: Float64Array.from(held),
    subject: Int32Array.from(subject),
    sign: Int8Array.from(sign),
    allocations,
    segments,
    tags,
    stacks,
    steps,
    peakLive,
    peakLiveAt,
    peakHeld,
    peakHeldAt,
    dropped,
    hasAllocs,
  };
}
