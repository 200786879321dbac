import {
  describeValue,
  InvalidArgumentError,
  optionOr,
  validateObject,
  validateOptionKeys,
} from "@allot/core";
import { _messageOf } from "./_message.ts";
import { _checkedTrace } from "./parse_trace.ts";
import {
  allotCachingAfterFencePolicy,
  allotCachingQueueOrderPolicy,
  allotWatermarkPolicy,
} from "./allot_policies.ts";
import { ortBucketPolicy, tfjsExactPolicy } from "./baseline_policies.ts";
import type { PolicyFactory } from "./replay_policy.ts";
import { STORAGE_USAGE } from "./replay_policy.ts";
import type { Trace } from "./trace_format.ts";

/** The policies `replayTrace` runs when given none. */
export const DEFAULT_POLICIES: readonly PolicyFactory[] = Object.freeze([
  tfjsExactPolicy,
  ortBucketPolicy,
  allotCachingQueueOrderPolicy,
  allotCachingAfterFencePolicy,
  allotWatermarkPolicy,
]);

/** One request stream op: alloc (0), free (1), fence (2), step (3). */
export interface ReplayOps {
  /** Op codes. */
  readonly code: Uint8Array;
  /** Allocation id (alloc, free). */
  readonly id: Float64Array;
  /** Size (alloc). */
  readonly size: Float64Array;
  /** Usage bits (alloc). */
  readonly usage: Float64Array;
  /** How many ops. */
  readonly length: number;
  /** Where the requests came from: the runtime's pool (`alloc`) or the device (`create`). */
  readonly from: "alloc" | "create";
}

/** Options of {@linkcode replayTrace} and {@linkcode replayOps}. */
export interface ReplayOptions {
  /** Policies to compare (default {@linkcode DEFAULT_POLICIES}). */
  readonly policies?: readonly PolicyFactory[];
  /** `"all"` buffers (default) or only `"storage"` ones. */
  readonly usage?: "all" | "storage";
  /** Timed repetitions per policy, fresh instance each (default 3; the best is kept). */
  readonly repeat?: number;
}

/** One policy's figures. */
export interface PolicyResult {
  /** The policy's name. */
  readonly name: string;
  /** What the policy models. */
  readonly description: string;
  /** Highest bytes held (device buffers or segments) at any point. */
  readonly peakReservedBytes: number;
  /**
   * Same as `peakReservedBytes`.
   *
   * @deprecated Use `peakReservedBytes` (one name per figure across allot);
   * removed in the next minor version.
   */
  readonly peakHeldBytes: number;
  /** Device buffers (or segments) created. */
  readonly buffersCreated: number;
  /** Device buffers created after the first step mark that follows an allocation (0 on traces whose steps repeat, for a policy that reuses well). */
  readonly buffersCreatedAfterFirstStep: number;
  /** Nanoseconds per alloc or free (best of the repetitions). */
  readonly nsPerOp: number;
  /** The error message if the policy threw. */
  readonly error?: string;
}

/** The outcome of a replay. */
export interface ReplayReport {
  /** Highest live requested bytes (requests outstanding). */
  readonly peakRequestedBytes: number;
  /**
   * Same as `peakRequestedBytes`.
   *
   * @deprecated Use `peakRequestedBytes`; removed in the next minor version.
   */
  readonly peakLiveBytes: number;
  /** Bytes the app itself held at its peak (device buffers created and not destroyed), if the trace has them. */
  readonly recordedPeakReservedBytes: number | undefined;
  /**
   * Same as `recordedPeakReservedBytes`.
   *
   * @deprecated Use `recordedPeakReservedBytes`; removed in the next minor
   * version.
   */
  readonly recordedPeakHeldBytes: number | undefined;
  /** Device buffers the app created, if the trace has them. */
  readonly recordedBuffersCreated: number | undefined;
  /** Allocation requests replayed. */
  readonly allocations: number;
  /** Which events were replayed. */
  readonly from: "alloc" | "create";
  /** Which buffers were replayed. */
  readonly usage: "all" | "storage";
  /** One row per policy, in the order given. */
  readonly policies: readonly PolicyResult[];
}

/**
 * Extracts the request stream of a trace: the runtime's `alloc`/`free` when
 * it has them, else the device's `create`/`destroy`; `map` events are
 * fences, `step` events steps.
 *
 * @example
 * ```ts
 * import { parseTrace, traceOps } from "@allot/trace";
 * import assert from "node:assert/strict";
 * const trace = parseTrace([
 *   `{"format":"allot-trace","version":1,"source":"demo"}`,
 *   `{"t":0,"op":"create","id":0,"size":1024,"usage":128,"tag":"weights"}`,
 *   `{"t":1,"op":"create","id":1,"size":512,"usage":128,"tag":"act"}`,
 *   `{"t":2,"op":"destroy","id":1}`,
 * ].join("\n"));
 * const ops = traceOps(trace);
 * assert.equal(ops.from, "create");
 * assert.equal(ops.length, 3);
 * ```
 */
export function traceOps(
  trace: Trace,
  usage: "all" | "storage" = "all",
): ReplayOps {
  return opsOf(_checkedTrace(trace), checkUsage(usage));
}

function checkUsage(usage: unknown): "all" | "storage" {
  if (usage !== "all" && usage !== "storage") {
    throw new InvalidArgumentError(
      `Cannot replay: usage must be "all" or "storage", received ${
        describeValue(usage)
      }`,
      { name: "usage", value: usage, limit: '"all" or "storage"' },
    );
  }
  return usage;
}

function opsOf(trace: Trace, usage: "all" | "storage"): ReplayOps {
  const hasAlloc = trace.events.some((e) => e.op === "alloc");
  const from = hasAlloc ? "alloc" : "create";
  const n = trace.events.length;
  const code = new Uint8Array(n), id = new Float64Array(n);
  const size = new Float64Array(n), use = new Float64Array(n);
  const kept = new Set<number>();
  let k = 0;
  for (const e of trace.events) {
    if (
      (hasAlloc && e.op === "alloc") || (!hasAlloc && e.op === "create")
    ) {
      const u = e.usage ?? 0;
      if (usage === "storage" && !(u & STORAGE_USAGE)) continue;
      kept.add(e.id);
      code[k] = 0, id[k] = e.id, size[k] = e.size, use[k] = u;
      k++;
    } else if (
      (hasAlloc && e.op === "free") || (!hasAlloc && e.op === "destroy")
    ) {
      if (!kept.delete(e.id)) continue;
      code[k] = 1, id[k] = e.id;
      k++;
    } else if (e.op === "map") {
      code[k++] = 2;
    } else if (e.op === "step") {
      code[k++] = 3;
    }
  }
  return {
    code: code.subarray(0, k),
    id: id.subarray(0, k),
    size: size.subarray(0, k),
    usage: use.subarray(0, k),
    length: k,
    from,
  };
}

/**
 * Peak held and buffers created by the app itself (its `create`/`destroy`).
 *
 * @example
 * ```ts
 * import { parseTrace, recordedHeld } from "@allot/trace";
 * import assert from "node:assert/strict";
 * const trace = parseTrace([
 *   `{"format":"allot-trace","version":1,"source":"demo"}`,
 *   `{"t":0,"op":"create","id":0,"size":1024,"usage":128,"tag":"weights"}`,
 *   `{"t":1,"op":"create","id":1,"size":512,"usage":128,"tag":"act"}`,
 *   `{"t":2,"op":"destroy","id":1}`,
 * ].join("\n"));
 * assert.deepEqual(recordedHeld(trace), { peak: 1536, created: 2 });
 * ```
 */
export function recordedHeld(
  trace: Trace,
  usage: "all" | "storage" = "all",
): { peak: number; created: number } | undefined {
  return heldOf(_checkedTrace(trace), checkUsage(usage));
}

function heldOf(
  trace: Trace,
  usage: "all" | "storage",
): { peak: number; created: number } | undefined {
  let held = 0, peak = 0, created = 0, any = false;
  const sizes = new Map<number, number>();
  for (const e of trace.events) {
    if (e.op === "create") {
      any = true;
      if (usage === "storage" && !(e.usage & STORAGE_USAGE)) continue;
      sizes.set(e.id, e.size);
      held += e.size;
      created++;
      if (held > peak) peak = held;
    } else if (e.op === "destroy") {
      const s = sizes.get(e.id);
      if (s !== undefined) {
        held -= s;
        sizes.delete(e.id);
      }
    }
  }
  return any ? { peak, created } : undefined;
}

/**
 * Replays a request stream through policies; see {@linkcode replayTrace}.
 *
 * @example
 * ```ts
 * import { parseTrace, replayOps, traceOps } from "@allot/trace";
 * import assert from "node:assert/strict";
 * const trace = parseTrace([
 *   `{"format":"allot-trace","version":1,"source":"demo"}`,
 *   `{"t":0,"op":"create","id":0,"size":1024,"usage":128,"tag":"weights"}`,
 *   `{"t":1,"op":"create","id":1,"size":512,"usage":128,"tag":"act"}`,
 *   `{"t":2,"op":"destroy","id":1}`,
 * ].join("\n"));
 * const report = replayOps(traceOps(trace), { repeat: 1 });
 * assert.equal(report.peakRequestedBytes, 1536);
 * assert.ok(report.policies.length > 0);
 * ```
 */
export function replayOps(
  ops: ReplayOps,
  options: ReplayOptions = {},
): Omit<
  ReplayReport,
  | "recordedPeakReservedBytes"
  | "recordedPeakHeldBytes"
  | "recordedBuffersCreated"
  | "usage"
> {
  checkOps(ops);
  validateObject(options, "options");
  validateOptionKeys(
    options,
    ["policies", "usage", "repeat"],
    "replay options",
  );
  const policies = checkPolicies(options.policies ?? DEFAULT_POLICIES);
  const repeat = optionOr(options.repeat, 3);
  if (!Number.isSafeInteger(repeat) || repeat < 1 || repeat > 1000) {
    throw new InvalidArgumentError(
      `Cannot replay: repeat must be an integer from 1 to 1000, received ${
        describeValue(repeat)
      }`,
      { name: "repeat", value: repeat, limit: "1 to 1000" },
    );
  }
  const { code, id, size, usage } = ops;
  let live = 0, peakLive = 0, allocations = 0;
  const sizes = new Map<number, number>();
  for (let i = 0; i < ops.length; i++) {
    if (code[i] === 0) {
      live += size[i];
      sizes.set(id[i], size[i]);
      allocations++;
      if (live > peakLive) peakLive = live;
    } else if (code[i] === 1) {
      live -= sizes.get(id[i]) ?? 0;
      sizes.delete(id[i]);
    }
  }
  const results: PolicyResult[] = [];
  for (const f of policies) {
    try {
      let peak = 0, afterFirst = -1, seen = false, created = 0;
      const p = f.create();
      try {
        for (let i = 0; i < ops.length; i++) {
          const c = code[i];
          if (c === 0) {
            p.alloc(id[i], size[i], usage[i]);
            seen = true;
            const h = count(p.heldBytes(), "heldBytes()");
            if (h > peak) peak = h;
          } else if (c === 1) p.free(id[i]);
          else {
            p.sync(c === 2 ? "fence" : "step");
            if (c === 3 && seen && afterFirst < 0) {
              afterFirst = count(p.buffersCreated(), "buffersCreated()");
            }
          }
        }
        created = count(p.buffersCreated(), "buffersCreated()");
      } finally {
        p.dispose?.();
      }
      let best = Infinity, n = 0;
      for (let r = 0; r < repeat; r++) {
        const q = f.create();
        let dt: number;
        try {
          const t0 = performance.now();
          n = 0;
          for (let i = 0; i < ops.length; i++) {
            const c = code[i];
            if (c === 0) q.alloc(id[i], size[i], usage[i]), n++;
            else if (c === 1) q.free(id[i]), n++;
            else q.sync(c === 2 ? "fence" : "step");
          }
          dt = performance.now() - t0;
        } finally {
          q.dispose?.();
        }
        if (dt < best) best = dt;
      }
      results.push({
        name: f.name,
        description: f.description,
        peakReservedBytes: peak,
        peakHeldBytes: peak,
        buffersCreated: created,
        buffersCreatedAfterFirstStep: afterFirst < 0 ? 0 : created - afterFirst,
        nsPerOp: n > 0 ? (best * 1e6) / n : 0,
      });
    } catch (err) {
      results.push({
        name: f.name,
        description: f.description,
        peakReservedBytes: NaN,
        peakHeldBytes: NaN,
        buffersCreated: NaN,
        buffersCreatedAfterFirstStep: NaN,
        nsPerOp: NaN,
        error: _messageOf(err),
      });
    }
  }
  return {
    peakRequestedBytes: peakLive,
    peakLiveBytes: peakLive,
    allocations,
    from: ops.from,
    policies: results,
  };
}

/**
 * Replays a trace's allocation requests through each policy (fresh
 * instances) and reports, side by side, peak bytes held, device buffers
 * created and time per operation, beside what the app itself held.
 *
 * @example
 * ```ts
 * import { parseTrace, replayTrace } from "@allot/trace";
 * import assert from "node:assert/strict";
 * const trace = parseTrace([
 *   `{"format":"allot-trace","version":1}`,
 *   `{"t":0,"op":"alloc","id":1,"size":1000,"usage":128}`,
 *   `{"t":1,"op":"free","id":1}`,
 *   `{"t":2,"op":"alloc","id":2,"size":1000,"usage":128}`,
 * ].join("\n"));
 * const report = replayTrace(trace, { repeat: 1 });
 * assert.equal(report.peakRequestedBytes, 1000);
 * const tfjs = report.policies.find((p) => p.name === "tfjs-exact")!;
 * assert.equal(tfjs.buffersCreated, 1);
 * ```
 */
export function replayTrace(
  trace: Trace,
  options: ReplayOptions = {},
): ReplayReport {
  trace = _checkedTrace(trace);
  validateObject(options, "options");
  validateOptionKeys(
    options,
    ["policies", "usage", "repeat"],
    "replay options",
  );
  const usage = checkUsage(options.usage ?? "all");
  const ops = opsOf(trace, usage);
  const rec = heldOf(trace, usage);
  return {
    ...replayOps(ops, options),
    recordedPeakReservedBytes: rec?.peak,
    recordedPeakHeldBytes: rec?.peak,
    recordedBuffersCreated: rec?.created,
    usage,
  };
}

// A policy's figure: a finite non-negative number, or the policy is at fault.
function count(v: unknown, what: string): number {
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
    throw new InvalidArgumentError(
      `The policy's ${what} returned ${
        describeValue(v)
      }, not a byte or buffer count`,
      { name: what, value: v, limit: 0 },
    );
  }
  return v;
}

// Policies: an array of factories, each with a string name and description
// and a create() function (read once here, so a throwing getter throws before
// anything ran).
function checkPolicies(policies: unknown): readonly PolicyFactory[] {
  if (!Array.isArray(policies)) {
    throw new InvalidArgumentError(
      `Cannot replay: policies must be an array of policy factories, received ${
        describeValue(policies)
      }`,
      { name: "policies", value: policies, limit: "PolicyFactory[]" },
    );
  }
  for (const [i, f] of policies.entries()) {
    if (
      f === null || typeof f !== "object" || typeof f.name !== "string" ||
      typeof f.description !== "string" || typeof f.create !== "function"
    ) {
      throw new InvalidArgumentError(
        `Cannot replay: policies[${i}] must be {name, description, create()}, received ${
          describeValue(f)
        }`,
        { name: `policies[${i}]`, value: f, limit: "PolicyFactory" },
      );
    }
  }
  return policies;
}

// Ops: what traceOps() returns (typed arrays of at least `length` entries).
function checkOps(ops: unknown): void {
  const o = ops as ReplayOps;
  const ok = o !== null && typeof o === "object" &&
    typeof o.length === "number" && Number.isSafeInteger(o.length) &&
    o.length >= 0 && o.code instanceof Uint8Array &&
    o.id instanceof Float64Array && o.size instanceof Float64Array &&
    o.usage instanceof Float64Array && o.code.length >= o.length &&
    o.id.length >= o.length && o.size.length >= o.length &&
    o.usage.length >= o.length && (o.from === "alloc" || o.from === "create");
  if (!ok) {
    throw new InvalidArgumentError(
      `Cannot replay: ops must be what traceOps() returns, received ${
        describeValue(ops)
      }`,
      { name: "ops", value: ops, limit: "ReplayOps" },
    );
  }
  for (let i = 0; i < o.length; i++) {
    const c = o.code[i];
    if (c > 3 || (c === 0 && !(o.size[i] >= 0 && Number.isFinite(o.size[i])))) {
      throw new InvalidArgumentError(
        `Cannot replay: op ${i} has code ${c} and size ${o.size[i]}`,
        { name: `ops[${i}]`, value: c, limit: 3 },
      );
    }
  }
}
