/**
 * Internal: checks a {@linkcode MemoryTimeline} handed to the drawing
 * functions (`timelineSvg`, `tagGroups`, `reportHtml`), which index arrays
 * by the numbers inside it: a timeline made by `memoryTimeline()` always
 * passes; a forged or edited one is refused with a typed error instead of
 * drawing garbage or crashing.
 *
 * @module
 */

import { describeValue, InvalidArgumentError } from "@allot/core";
import type { MemoryTimeline } from "./memory_timeline.ts";

function bad(what: string, value: unknown, limit: unknown): never {
  throw new InvalidArgumentError(
    `Invalid timeline: ${what}, received ${describeValue(value)}`,
    { name: "timeline", value, limit },
  );
}

function index(v: unknown, min: number, max: number, what: string): void {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    bad(`${what} must be an integer in [${min}, ${max}]`, v, [min, max]);
  }
}

function size(v: unknown, what: string): void {
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
    bad(`${what} must be a finite non-negative number`, v, 0);
  }
}

/** Throws `InvalidArgumentError` unless `tl` is a consistent timeline. */
export function _checkTimeline(tl: unknown): MemoryTimeline {
  if (tl === null || typeof tl !== "object") {
    bad("must be what memoryTimeline() returns", tl, "a MemoryTimeline");
  }
  const t = tl as MemoryTimeline;
  const typed: [string, unknown, new (n: number) => ArrayLike<number>][] = [
    ["time", t.time, Float64Array],
    ["live", t.live, Float64Array],
    ["held", t.held, Float64Array],
    ["subject", t.subject, Int32Array],
    ["sign", t.sign, Int8Array],
  ];
  const n = t.time instanceof Float64Array ? t.time.length : 0;
  for (const [name, v, ctor] of typed) {
    if (!(v instanceof ctor) || (v as ArrayLike<number>).length !== n) {
      bad(`${name} must be a ${ctor.name} of length ${n}`, v, n);
    }
  }
  for (const name of ["allocations", "segments", "tags", "stacks", "steps"]) {
    const v = (t as unknown as Record<string, unknown>)[name];
    if (!Array.isArray(v)) bad(`${name} must be an array`, v, "an array");
  }
  if (typeof t.source !== "string") {
    bad("source must be a string", t.source, "a string");
  }
  for (const tag of t.tags) {
    if (typeof tag !== "string") {
      bad("a tag must be a string", tag, "a string");
    }
  }
  for (const stack of t.stacks) {
    if (!Array.isArray(stack)) {
      bad("a stack must be an array", stack, "an array");
    }
    for (const f of stack) {
      if (
        f === null || typeof f !== "object" || typeof f.at !== "string" ||
        typeof f.kind !== "string"
      ) {
        bad("a frame must be {at, kind}", f, "a frame");
      }
    }
  }
  const tags = t.tags.length, stacks = t.stacks.length;
  for (const list of [t.allocations, t.segments]) {
    for (const a of list) {
      if (a === null || typeof a !== "object") {
        bad("an entry must be an object", a, "an object");
      }
      size(a.size, "size");
      index(a.tag, -1, tags - 1, "tag");
      index(a.stack, -1, stacks - 1, "stack");
      index(a.start, 0, n, "start");
      index(a.end, a.start, n, "end");
    }
  }
  for (let i = 0; i < n; i++) {
    index(t.subject[i], -1, t.allocations.length - 1, "subject");
  }
  for (const s of t.steps) {
    if (s === null || typeof s !== "object") {
      bad("a step must be an object", s, "an object");
    }
    index(s.at, 0, n, "step at");
    if (typeof s.name !== "string") {
      bad("a step name must be a string", s.name, "a string");
    }
  }
  size(t.peakLive, "peakLive");
  size(t.peakHeld, "peakHeld");
  size(t.dropped, "dropped");
  index(t.peakLiveAt, 0, n, "peakLiveAt");
  index(t.peakHeldAt, 0, n, "peakHeldAt");
  if (typeof t.hasAllocs !== "boolean") {
    bad("hasAllocs must be a boolean", t.hasAllocs, "a boolean");
  }
  return t;
}
