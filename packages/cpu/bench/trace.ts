/**
 * Deterministic allocation traces shared by the cpu and buddy benchmarks.
 *
 * A trace is a list of operations on slots: `kind[i]` is 1 for "allocate
 * `byteLength[i]` bytes into slot `slot[i]`" and 0 for "free slot `slot[i]`".
 *
 * @module
 */

/** One replayable trace. */
export interface Trace {
  /** Short name for tables. */
  name: string;
  /** 1 = allocate, 0 = free. */
  kind: Uint8Array;
  /** Slot of each operation. */
  slot: Int32Array;
  /** Bytes of each allocation (0 for frees). */
  byteLength: Int32Array;
  /** Number of slots. */
  slots: number;
  /** Highest sum of live requested bytes. */
  peakLiveBytes: number;
  /** Number of allocations. */
  allocations: number;
}

/** mulberry32: a small deterministic PRNG. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class Builder {
  kind: number[] = [];
  slot: number[] = [];
  byteLength: number[] = [];
  live = new Map<number, number>();
  freeSlots: number[] = [];
  slots = 0;
  liveBytes = 0;
  peak = 0;
  allocations = 0;

  alloc(n: number): number {
    const s = this.freeSlots.length > 0 ? this.freeSlots.pop()! : this.slots++;
    this.kind.push(1);
    this.slot.push(s);
    this.byteLength.push(n);
    this.live.set(s, n);
    this.liveBytes += n;
    this.allocations++;
    if (this.liveBytes > this.peak) this.peak = this.liveBytes;
    return s;
  }

  free(s: number): void {
    const n = this.live.get(s)!;
    this.live.delete(s);
    this.liveBytes -= n;
    this.kind.push(0);
    this.slot.push(s);
    this.byteLength.push(0);
    this.freeSlots.push(s);
  }

  build(name: string): Trace {
    return {
      name,
      kind: Uint8Array.from(this.kind),
      slot: Int32Array.from(this.slot),
      byteLength: Int32Array.from(this.byteLength),
      slots: this.slots,
      peakLiveBytes: this.peak,
      allocations: this.allocations,
    };
  }
}

/**
 * The trace: `operations` alloc/free operations, sizes log-uniform in
 * [16 B, 1 MiB], about `live` blocks live (random frees), every block freed at
 * the end.
 *
 * @param operations Number of operations (at least 2 × live).
 * @param live Target number of live blocks.
 * @param seed PRNG seed.
 * @returns The trace.
 */
export function logUniformTrace(
  operations: number,
  live = 1000,
  seed = 42,
): Trace {
  const random = prng(seed);
  const b = new Builder();
  const slots: number[] = [];
  const size = () => Math.floor(16 * 2 ** (16 * random()));
  for (let i = 0; i < live; i++) slots.push(b.alloc(size()));
  while (b.kind.length < operations - slots.length) {
    // Keep the live count near `live`: free more when above, alloc more below.
    const pAlloc = 0.5 + (live - slots.length) / (4 * live);
    if (random() < pAlloc || slots.length === 0) slots.push(b.alloc(size()));
    else {
      const i = Math.floor(random() * slots.length);
      const s = slots[i];
      slots[i] = slots[slots.length - 1];
      slots.pop();
      b.free(s);
    }
  }
  while (slots.length > 0) b.free(slots.pop()!);
  return b.build(`log-uniform 16 B..1 MiB, ~${live} live`);
}

/**
 * A tensor-shaped trace: training steps of a small convolutional network on
 * f32 tensors. Weights and their gradients live throughout; each step
 * allocates activations layer by layer (forward), then walks back allocating
 * a gradient per activation and freeing activations in reverse (backward),
 * with short-lived workspace buffers per layer and a varying batch size
 * (which makes the sizes shift from step to step).
 *
 * @param steps Number of training steps.
 * @param seed PRNG seed.
 * @returns The trace.
 */
export function tensorTrace(steps: number, seed = 7): Trace {
  const random = prng(seed);
  const b = new Builder();
  const layers: { c: number; h: number; k: number }[] = [];
  let c = 3, h = 64;
  for (let i = 0; i < 24; i++) {
    const out = Math.min(256, i % 4 === 3 ? c * 2 : c === 3 ? 32 : c);
    layers.push({ c: out, h, k: c * out * 9 });
    c = out;
    if (i % 4 === 3 && h > 4) h /= 2;
  }
  for (const layer of layers) {
    b.alloc(layer.k * 4); // weight
    b.alloc(layer.k * 4); // weight gradient
    b.alloc(layer.c * 4); // bias
  }
  for (let step = 0; step < steps; step++) {
    const batch = 1 + Math.floor(random() * 8);
    const acts: number[] = [];
    for (const layer of layers) {
      const ws = b.alloc(Math.max(64, layer.k * 4 / 4)); // im2col workspace
      acts.push(b.alloc(batch * layer.c * layer.h * layer.h * 4));
      b.free(ws);
    }
    let grad = b.alloc(batch * 1000 * 4); // loss gradient
    for (let i = layers.length - 1; i >= 0; i--) {
      const layer = layers[i];
      const ws = b.alloc(Math.max(64, layer.k * 4 / 4));
      const g = b.alloc(batch * layer.c * layer.h * layer.h * 4);
      b.free(ws);
      b.free(grad);
      b.free(acts[i]);
      grad = g;
    }
    b.free(grad);
  }
  for (const s of [...b.live.keys()]) b.free(s);
  return b.build(`tensor-shaped (conv net training, ${steps} steps)`);
}

/**
 * The synthetic traces of the cpu and buddy benchmarks (the same on Deno and
 * Node): the log-uniform trace (the headline), then the tensor-shaped one.
 *
 * @param quick Smaller traces for a smoke run.
 * @returns The two traces.
 */
export function benchTraces(quick: boolean): Trace[] {
  return quick
    ? [logUniformTrace(20_000, 300), tensorTrace(40)]
    : [logUniformTrace(200_000, 1000), tensorTrace(1000)];
}

/** What {@linkcode replay} needs of an allocator: offsets in, offsets out. */
export interface OffsetAllocator {
  alloc(byteLength: number): number;
  free(byteOffset: number): void;
}

/**
 * Replays `trace` on `allocator` (every allocation is freed by the end).
 * For footprints and tests, not for timing: the timed replays keep a loop
 * per contender so that each stays monomorphic.
 *
 * @param allocator The allocator.
 * @param trace The trace.
 */
export function replay(allocator: OffsetAllocator, trace: Trace): void {
  const offsets = new Float64Array(trace.slots);
  const { kind, slot, byteLength } = trace;
  for (let i = 0; i < kind.length; i++) {
    if (kind[i] === 1) offsets[slot[i]] = allocator.alloc(byteLength[i]);
    else allocator.free(offsets[slot[i]]);
  }
}
