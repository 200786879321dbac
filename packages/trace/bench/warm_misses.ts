/**
 * Which requests make device buffers after the first warm pass, and why
 * the cache could not serve them: each recorded trace replayed `PASSES`
 * times through one `CachingAllocator` per WebGPU usage with its defaults
 * (on mock devices, as the `allot-caching` replay policy and the warm rows
 * of `packages/webgpu/bench/real_traces.ts` keep them: what is left live at
 * a pass's end freed), and for every segment made after the first pass:
 * the pass, the op (index in the replayed request stream), the request
 * (rounded), the pool, the allocator's held and live bytes, the free bytes
 * of that pool in other segments (how many blocks, the largest), the
 * segments given back in the same miss, and a cause:
 *
 * - `given back, needed again`: a segment of the request's pool at least
 *   as large as the request was given back earlier (by the give-back rule
 *   or the device): keeping it would have served the request;
 * - `fragmented`: the pool held at least the request's bytes free, but in
 *   no single block that large (placement: the layout of a later pass
 *   differs from the first's, since it starts from the first pass's
 *   segments rather than from none);
 * - `short`: the pool held fewer free bytes than the request.
 *
 * Run: `deno run -A packages/trace/bench/warm_misses.ts [--only=kv] [--usage=all] [--passes=8]`
 *
 * @module
 */
import { CachingAllocator } from "@allot/caching";
import { type MockMemory, MockSegmentSource } from "@allot/core";
import { readRecordedTrace } from "../_test_traces.ts";
import { type ReplayOps, traceOps } from "../mod.ts";
import { recordedTraceNames } from "../../../scripts/bench/recorded_traces.ts";

const only = Deno.args.find((a) => a.startsWith("--only="))?.slice(7) ?? "";
const usages = Deno.args.includes("--usage=all")
  ? ["all"] as const
  : Deno.args.includes("--usage=storage")
  ? ["storage"] as const
  : ["storage", "all"] as const;
const PASSES = Number(
  Deno.args.find((a) => a.startsWith("--passes="))?.slice(9) ?? 8,
);

/**
 * A mock device that counts segments made and remembers, per pool (read
 * from the segment's label), the byte lengths of those given back.
 */
class WatchedSource extends MockSegmentSource {
  made = 0;
  /** Byte lengths of the small / large segments given back, in order. */
  gone: { small: number[]; large: number[] } = { small: [], large: [] };
  #pool = new WeakMap<object, "small" | "large">();
  override tryAllocateSegment(
    ...args: Parameters<MockSegmentSource["tryAllocateSegment"]>
  ): ReturnType<MockSegmentSource["tryAllocateSegment"]> {
    const s = super.tryAllocateSegment(...args);
    if (s) {
      this.made++;
      const label = args[1]?.label ?? "";
      this.#pool.set(s, label.includes("small pool") ? "small" : "large");
    }
    return s;
  }
  override freeSegment(
    ...args: Parameters<MockSegmentSource["freeSegment"]>
  ): void {
    this.gone[this.#pool.get(args[0]) ?? "large"].push(args[0].byteLength);
    super.freeSegment(...args);
  }
}

interface Pool {
  allocator: CachingAllocator<MockMemory>;
  source: WatchedSource;
}

/** One line per segment made after the first of `PASSES` passes over `ops`. */
function warmMisses(ops: ReplayOps): { lines: string[]; first: number } {
  const pools = new Map<number, Pool>();
  const live = new Map<number, { block: { release(): void } }>();
  const lines: string[] = [];
  let first = 0;
  for (let pass = 0; pass < PASSES; pass++) {
    for (let i = 0; i < ops.length; i++) {
      const code = ops.code[i];
      if (code === 1) {
        const l = live.get(ops.id[i])!;
        live.delete(ops.id[i]);
        l.block.release();
        continue;
      }
      if (code !== 0) continue;
      let pool = pools.get(ops.usage[i]);
      if (pool === undefined) {
        const source = new WatchedSource({ capacityBytes: 2 ** 40 });
        pool = { allocator: new CachingAllocator(source), source };
        pools.set(ops.usage[i], pool);
      }
      const { allocator, source } = pool;
      const size = Math.max(1, ops.size[i]);
      const made = source.made;
      const small = source.gone.small.length;
      const large = source.gone.large.length;
      live.set(ops.id[i], { block: allocator.allocate(size) });
      if (source.made === made || pass === 0) continue;
      const rounded = allocator.roundSize(size);
      const snap = allocator.snapshot();
      const newest = snap.segments.reduce((a, b) => (a.id > b.id ? a : b));
      const kind = newest.pool;
      let free = 0, blocks = 0, largest = 0;
      for (const s of snap.segments) {
        if (s.id === newest.id || s.pool !== kind) continue;
        for (const b of s.blocks) {
          if (b.state !== "inactive") continue;
          free += b.byteLength;
          blocks++;
          if (b.byteLength > largest) largest = b.byteLength;
        }
      }
      // Given back before this miss (those given back in it were smaller
      // than the request, or best fit would have taken them).
      const earlier = source.gone[kind].slice(
        0,
        kind === "small" ? small : large,
      );
      const inMiss = source.gone.small.slice(small).concat(
        source.gone.large.slice(large),
      );
      const cause = earlier.some((n) => n >= rounded)
        ? "given back, needed again"
        : free >= rounded
        ? "fragmented"
        : "short";
      lines.push(
        `| ${pass} | ${i} | 0x${
          ops.usage[i].toString(16)
        } | ${rounded} | ${kind} | ${newest.byteLength} | ${allocator.reservedBytes} / ${allocator.allocatedBytes} | ${free} in ${blocks}, largest ${largest} | ${
          inMiss.join(", ") || "-"
        } | ${cause} |`,
      );
    }
    for (const [id, l] of live) {
      live.delete(id);
      l.block.release();
    }
    if (pass === 0) { for (const p of pools.values()) first += p.source.made; }
  }
  return { lines, first };
}

const names = recordedTraceNames(only);

for (const name of names) {
  const trace = await readRecordedTrace(name);
  for (const usage of usages) {
    const { lines, first } = warmMisses(traceOps(trace, usage));
    console.log(
      `\n## ${name} (${usage}): ${first} segments made in the first pass, ${lines.length} after it over ${
        PASSES - 1
      } warm passes\n`,
    );
    if (lines.length === 0) continue;
    console.log(
      "| pass | op | usage | request | pool | segment made | held / live | pool free elsewhere | given back in the miss | cause |",
    );
    console.log("|---:|---:|---|---:|---|---:|---|---|---|---|");
    for (const line of lines) console.log(line);
  }
}
