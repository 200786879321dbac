/**
 * Local allocation traces for the benchmark: seeded, deterministic
 * sequences of `alloc`/`free` events shaped like tensor-runtime workloads.
 * (`@allot/caching` plans its own trace generators; until they exist, the
 * benchmark uses these and replays the same trace through both allocators.)
 *
 * @module
 */

/** One event of a trace. */
export interface TraceEvent {
  /** `alloc` makes buffer `id`; `free` releases it. */
  kind: "alloc" | "free";
  /** Buffer id, unique in the trace. */
  id: number;
  /** Bytes asked for (`alloc` only). */
  byteLength: number;
}

/** A named trace with its peak of live requested bytes. */
export interface Trace {
  /** Short name. */
  name: string;
  /** The events. */
  events: TraceEvent[];
  /** Highest sum of live requested bytes. */
  peakRequestedBytes: number;
}

const KiB = 1024;
const MiB = 1024 * KiB;

function rng(seed: number): () => number {
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
  events: TraceEvent[] = [];
  #live = new Map<number, number>();
  #nextId = 1;
  #liveBytes = 0;
  peak = 0;

  alloc(byteLength: number): number {
    const id = this.#nextId++;
    const n = Math.max(1, Math.round(byteLength));
    this.events.push({ kind: "alloc", id, byteLength: n });
    this.#live.set(id, n);
    this.#liveBytes += n;
    if (this.#liveBytes > this.peak) this.peak = this.#liveBytes;
    return id;
  }

  free(id: number): void {
    const n = this.#live.get(id);
    if (n === undefined) throw new Error(`trace frees ${id} twice`);
    this.#live.delete(id);
    this.#liveBytes -= n;
    this.events.push({ kind: "free", id, byteLength: 0 });
  }

  freeAll(): void {
    for (const id of [...this.#live.keys()]) this.free(id);
  }

  build(name: string): Trace {
    this.freeAll();
    return { name, events: this.events, peakRequestedBytes: this.peak };
  }
}

/**
 * A training loop: persistent parameters and optimizer state, then per step
 * forward activations (batch size varies), small temporaries, backward
 * gradients freed in reverse order.
 *
 * @param steps Training steps.
 * @param seed PRNG seed.
 * @returns The trace.
 */
export function trainingTrace(steps: number, seed = 1): Trace {
  const r = rng(seed);
  const b = new Builder();
  const layers = 24;
  const params: number[] = [];
  for (let i = 0; i < layers; i++) {
    const bytes = (1 + Math.floor(r() * 12)) * MiB + Math.floor(r() * 4096);
    params.push(bytes);
    b.alloc(bytes); // weight
    b.alloc(bytes); // optimizer state
  }
  for (let s = 0; s < steps; s++) {
    const batch = 0.5 + r(); // varying batch or sequence length
    const acts: number[] = [];
    for (let i = 0; i < layers; i++) {
      acts.push(b.alloc((2 + r() * 6) * MiB * batch));
      const tmp = [b.alloc(r() * 256 * KiB + 64), b.alloc(r() * 4 * MiB)];
      for (const t of tmp) b.free(t);
    }
    for (let i = layers - 1; i >= 0; i--) {
      const grad = b.alloc(params[i]);
      const tmp = b.alloc(r() * 2 * MiB * batch + 128);
      b.free(tmp);
      b.free(acts[i]);
      b.free(grad);
    }
    for (let i = 0; i < 8; i++) b.free(b.alloc(4 + r() * 60)); // scalars
  }
  return b.build(`training (${steps} steps)`);
}

/**
 * Inference with varying sequence lengths: per request a growing KV cache
 * (each growth allocates a larger buffer and frees the old one) and
 * per-token temporaries.
 *
 * @param requests Requests served.
 * @param seed PRNG seed.
 * @returns The trace.
 */
export function inferenceTrace(requests: number, seed = 2): Trace {
  const r = rng(seed);
  const b = new Builder();
  for (let i = 0; i < 16; i++) b.alloc((4 + r() * 12) * MiB); // weights
  const active: { cache: number; bytes: number; left: number }[] = [];
  let served = 0;
  while (served < requests || active.length > 0) {
    if (served < requests && active.length < 6 && r() < 0.5) {
      const bytes = (64 + r() * 512) * KiB;
      active.push({ cache: b.alloc(bytes), bytes, left: 8 + (r() * 48 | 0) });
      served++;
    }
    for (let j = active.length - 1; j >= 0; j--) {
      const a = active[j];
      const tmp = [b.alloc(r() * 512 * KiB + 256), b.alloc(r() * 3 * MiB)];
      if (r() < 0.25) {
        const bytes = a.bytes * 1.5;
        const next = b.alloc(bytes);
        b.free(a.cache);
        a.cache = next;
        a.bytes = bytes;
      }
      for (const t of tmp) b.free(t);
      if (--a.left <= 0) {
        b.free(a.cache);
        active.splice(j, 1);
      }
    }
  }
  return b.build(`inference (${requests} requests)`);
}

/**
 * Random churn: log-uniform sizes from 256 bytes to 64 MiB, live bytes kept
 * near a target by freeing random buffers.
 *
 * @param ops Allocations.
 * @param seed PRNG seed.
 * @returns The trace.
 */
export function churnTrace(ops: number, seed = 3): Trace {
  const r = rng(seed);
  const b = new Builder();
  const live: { id: number; bytes: number }[] = [];
  let liveBytes = 0;
  const target = 256 * MiB;
  for (let i = 0; i < ops; i++) {
    const bytes = Math.exp(
      Math.log(256) + r() * (Math.log(64 * MiB) - Math.log(256)),
    );
    live.push({ id: b.alloc(bytes), bytes });
    liveBytes += bytes;
    while (liveBytes > target || (live.length > 0 && r() < 0.3)) {
      const [x] = live.splice((r() * live.length) | 0, 1);
      b.free(x.id);
      liveBytes -= x.bytes;
    }
  }
  return b.build(`log-uniform churn (${ops} allocations)`);
}
