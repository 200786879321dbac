import { validateByteLength } from "@allot/core";
import type { PolicyFactory, ReplayPolicy } from "./replay_policy.ts";
import { MAP_USAGE, STORAGE_USAGE } from "./replay_policy.ts";

/**
 * TF.js's WebGPU `BufferManager` (tfjs-backend-webgpu 4.x): a released
 * buffer is kept in a free list keyed by exact size and usage and handed out
 * again only for the same size and usage; nothing is ever destroyed.
 */
export const tfjsExactPolicy: PolicyFactory = Object.freeze({
  name: "tfjs-exact",
  description:
    "TF.js BufferManager: reuse a free buffer of the exact size+usage, never destroy",
  create(): ReplayPolicy {
    const free = new Map<string, number>();
    const live = new Map<number, string>();
    let held = 0, created = 0;
    return {
      alloc(id, size, usage) {
        const key = `${size}_${usage}`;
        const n = free.get(key) ?? 0;
        if (n > 0) free.set(key, n - 1);
        else {
          held += size;
          created++;
        }
        live.set(id, key);
      },
      free(id) {
        const key = live.get(id)!;
        live.delete(id);
        free.set(key, (free.get(key) ?? 0) + 1);
      },
      sync() {},
      heldBytes: () => held,
      buffersCreated: () => created,
    };
  },
});

/**
 * onnxruntime-web's JSEP WebGPU `GpuDataManager` buckets: sizes below
 * 16 B aligned, rounded up to the first bucket that fits (64 B ... 160 MiB;
 * larger sizes keep their own size); a released buffer goes to a free list
 * keyed by usage and bucket size and is reused at once; after each run
 * (here: each step mark) mapped staging buffers are destroyed, and each
 * storage free list longer than its bucket's limit (or of a non-bucket size)
 * gives one buffer back.
 */
export const ortBucketPolicy: PolicyFactory = Object.freeze({
  name: "ort-buckets",
  description:
    "onnxruntime-web GpuDataManager: bucketed sizes, per-bucket free-list limits trimmed per run",
  create(): ReplayPolicy {
    const free = new Map<number, Map<number, number[]>>();
    const live = new Map<number, [usage: number, size: number]>();
    let held = 0, created = 0;
    const list = (usage: number, size: number): number[] => {
      let u = free.get(usage);
      if (!u) free.set(usage, u = new Map());
      let l = u.get(size);
      if (!l) u.set(size, l = []);
      return l;
    };
    return {
      alloc(id, size, usage) {
        const b = ortBucketSize(size);
        const l = list(usage, b);
        if (l.length > 0) l.pop();
        else {
          held += b;
          created++;
        }
        live.set(id, [usage, b]);
      },
      free(id) {
        const [usage, b] = live.get(id)!;
        live.delete(id);
        list(usage, b).push(b);
      },
      sync(kind) {
        if (kind !== "step") return;
        for (const [usage, sizes] of free) {
          for (const [size, l] of sizes) {
            if (usage & MAP_USAGE) {
              held -= size * l.length;
              l.length = 0;
            } else if (usage & STORAGE_USAGE) {
              const max = _ORT_CAPS.get(size);
              if (l.length > 0 && (max === undefined || l.length >= max)) {
                l.pop();
                held -= size;
              }
            }
          }
        }
      },
      heldBytes: () => held,
      buffersCreated: () => created,
    };
  },
});

/**
 * onnxruntime-web's buffer buckets: bucket size in bytes -> the most free
 * buffers of that size its JSEP WebGPU pool keeps.
 */
export const ORT_BUCKETS: ReadonlyMap<number, number> = new Map([
  [64, 250],
  [128, 200],
  [256, 200],
  [512, 200],
  [1024, 200],
  [2048, 230],
  [4096, 200],
  [8192, 50],
  [16384, 50],
  [32768, 50],
  [65536, 50],
  [131072, 50],
  [262144, 50],
  [524288, 50],
  [1048576, 50],
  [2097152, 30],
  [4194304, 20],
  [8388608, 10],
  [12582912, 10],
  [16777216, 10],
  [26214400, 15],
  [33554432, 22],
  [44236800, 2],
  [58982400, 6],
  [67108864, 6],
  [134217728, 6],
  [167772160, 6],
]);
// The policy reads its own copy: a caller's change to the exported map
// (typed readonly, but a Map all the same) never reaches a replay.
const _ORT_CAPS: ReadonlyMap<number, number> = new Map(ORT_BUCKETS);
const BUCKETS = [..._ORT_CAPS.keys()];

/**
 * onnxruntime-web's bucket size for a request: 16 B aligned, then the first bucket that fits.
 *
 * @example
 * ```ts
 * import { ortBucketSize } from "@allot/trace";
 * import assert from "node:assert/strict";
 * assert.equal(ortBucketSize(20_000_000), 26214400);
 * ```
 */
export function ortBucketSize(size: number): number {
  validateByteLength(size, Number.MAX_SAFE_INTEGER - 15, "size");
  const n = Math.ceil(size / 16) * 16;
  for (const b of BUCKETS) if (n <= b) return b;
  return n;
}
