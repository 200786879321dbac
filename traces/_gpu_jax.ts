/**
 * Sets up jax-js 0.1.25 (`@jax-js/jax`) on its WebGPU device in Deno,
 * unmodified, with its buffer requests recorded in the allot trace format:
 * the GPU traces of the fifth hold-out set, from a runtime allot's pools had
 * never seen (`traces/jax-webgpu/`).
 *
 * jax-js's WebGPU backend (`WebGPUBackend`, `src/backend/webgpu.ts`) keeps
 * a pool of its own: `malloc(size, initialData?)` rounds the size up to 4
 * bytes and takes a free `GPUBuffer` of exactly that size from a bucket
 * (last in, first out) or makes one (`STORAGE | COPY_SRC | COPY_DST`);
 * when `decRef` brings a slot's count to 0 the buffer goes back to its
 * bucket, or is destroyed when the bucket already holds 64 or it is over
 * 64 MiB. The pool's methods are private (`#acquireBuffer`,
 * `#releaseBuffer`), so the recorder wraps the public methods that call
 * them, `malloc`, `incRef` and `decRef`, on the backend instance: each
 * `malloc` of a non-empty array is an `alloc` of the bytes the pool is asked
 * for (the rounded size) with the buffer's usage and id, each last `decRef`
 * a `free`, as the TF.js traces record `BufferManager` requests.
 * Zero-size arrays share one 4-byte buffer (made once) and ask the pool for
 * nothing: not recorded as allocations, counted.
 *
 * Buffers jax-js makes outside its pool: a read-back's staging buffer
 * (`read()`: `MAP_READ | COPY_DST`, made and destroyed around each
 * `.data()`) is recorded as an `alloc`/`free` pair too, with its usage, as
 * TF.js's read-backs go through its pool (a pool in jax-js's place would
 * serve them). Uniform buffers (only its routines: sort, scatter, FFT,
 * linear algebra) are never destroyed by jax-js (left to the garbage
 * collector): the models here use none, and any `createBuffer` that is
 * neither the pool's nor a read-back's is counted (`others`) and fails the
 * recording.
 *
 * The device is recorded with `recordDevice` (its `create`/`destroy`,
 * `write`, `map`/`unmap`, `submit`), caught as onnxruntime's is: the
 * adapter's `requestDevice` hands jax-js a recorded device (restored
 * afterwards). Checks (jax-js exposes no byte counters): at every step the
 * trace's live pool allocations and bytes equal what the backend's own slot
 * table (`backend.buffers`, public) holds, and the pool's rules replayed
 * beside the trace (exact-size buckets, LIFO, 64 per size) agree with the
 * runtime at every request (the buffer handed out is the one the rules
 * give, or a new one made in that call when they give none; a release
 * destroys a buffer exactly when they say) and, at every step, the device
 * bytes the trace holds equal the replayed pool's plus the empty arrays'
 * 4-byte buffer.
 *
 * One thread, as for the CPU traces (`_cpu_jax.ts`): `Worker` is hidden
 * before jax-js is imported (its wasm backend, made when the module is
 * evaluated, would use workers otherwise), and jax-js is imported once per
 * process.
 *
 * @module
 */
import {
  type DeviceRecording,
  recordDevice,
  type TraceRecorder,
} from "../packages/trace/mod.ts";
import type { Jax } from "./_cpu_jax.ts";

/** What the models (`_cpu_jax_models.ts`, `_holdout5.ts`) use of a recording. */
export interface GpuJaxRecording {
  /** jax-js, imported by `startGpuJax`, its default device `webgpu`. */
  readonly jax: Jax;
  readonly recorder: TraceRecorder;
  /** The recorded device jax-js was given. */
  readonly recording: DeviceRecording<GPUDevice>;
  /** Marks a step and checks the trace against the runtime. */
  step(name: string): void;
  readonly checks: {
    /** Step checks made. */
    steps: number;
    /** Steps where live allocations or bytes differ from the slot table. */
    liveMismatches: number;
    /** Steps where held bytes differ from the replayed pool's. */
    heldMismatches: number;
    /** Requests and releases checked against the replayed pool's rules. */
    poolChecks: number;
    /** Those where the runtime did otherwise. */
    poolMismatches: number;
    /** Read-backs recorded (staging buffers). */
    readbacks: number;
    /** Zero-size arrays (no pool request). */
    empty: number;
    /** `createBuffer` calls neither from the pool nor a read-back. */
    others: number;
    /** `incRef`/`decRef` of a slot the recording did not see made. */
    foreign: number;
  };
  /** Live pool allocations now, by the trace. */
  readonly live: { bytes: number; count: number };
  /** Stops recording; what it returns goes to the console. */
  finish(): Record<string, unknown>;
}

interface Slot {
  readonly buffer: GPUBuffer;
  readonly size: number;
  readonly allocatedSize: number;
  readonly ref: number;
}

interface WebGpuBackendLike {
  readonly device: GPUDevice;
  readonly buffers: Map<number, Slot>;
  malloc(size: number, initialData?: Uint8Array): number;
  incRef(slot: number): void;
  decRef(slot: number): void;
  read(slot: number, start?: number, count?: number): Promise<Uint8Array>;
}

/** jax-js 0.1.25's `MAX_REUSABLE_BUFFER_BYTES` and `..._PER_SIZE`. */
const MAX_REUSABLE_BYTES = 64 * 1024 * 1024;
const MAX_PER_SIZE = 64;

/**
 * The rules of jax-js 0.1.25's WebGPU buffer pool, replayed on buffer ids
 * to check the runtime's requests against.
 */
class ReplayedPool {
  #buckets = new Map<number, number[]>();
  /** Device bytes the pool's buffers hold (handed out and free). */
  held = 0;
  /** The buffer the rules hand out for `size`, or undefined for a new one. */
  acquire(size: number): number | undefined {
    if (size > MAX_REUSABLE_BYTES) return undefined;
    const bucket = this.#buckets.get(size);
    const id = bucket?.pop();
    if (bucket && bucket.length === 0) this.#buckets.delete(size);
    return id;
  }
  /** A new buffer was made for a request. */
  made(size: number): void {
    this.held += size;
  }
  /** Whether the rules destroy buffer `id` of `size` on its release. */
  release(id: number, size: number): boolean {
    if (size > MAX_REUSABLE_BYTES) return this.#drop(size);
    const bucket = this.#buckets.get(size);
    if (!bucket) this.#buckets.set(size, [id]);
    else if (bucket.length >= MAX_PER_SIZE) return this.#drop(size);
    else bucket.push(id);
    return false;
  }
  #drop(size: number): true {
    this.held -= size;
    return true;
  }
}

/** Live and held device bytes by the trace's `create`/`destroy`. */
function deviceHeld(recording: DeviceRecording<GPUDevice>): number {
  const sizes = new Map<number, number>();
  let held = 0;
  for (const e of recording.recorder.events) {
    if (e.op === "create") sizes.set(e.id, e.size), held += e.size;
    else if (e.op === "destroy") held -= sizes.get(e.id) ?? 0;
  }
  return held;
}

/**
 * Starts jax-js's WebGPU device with its buffer requests recorded.
 *
 * @param source The trace header's source.
 * @param meta More header fields.
 * @returns The recording.
 */
export async function startGpuJax(
  source: string,
  meta: Record<string, unknown> = {},
): Promise<GpuJaxRecording> {
  Reflect.deleteProperty(globalThis, "Worker");
  let recording: DeviceRecording<GPUDevice> | undefined;
  const proto = GPUAdapter.prototype;
  const requestDevice = proto.requestDevice;
  proto.requestDevice = async function (
    this: GPUAdapter,
    desc?: GPUDeviceDescriptor,
  ) {
    const device = await requestDevice.call(this, desc);
    const info = (this as unknown as { info?: Record<string, unknown> })
      .info ?? {};
    recording = recordDevice(device, {
      source,
      meta: {
        runtime: "@jax-js/jax@0.1.25 (webgpu device)",
        host: `Deno ${Deno.version.deno}`,
        adapter: {
          vendor: info.vendor,
          architecture: info.architecture,
          description: info.description,
        },
        ...meta,
      },
    });
    return recording.device;
  };
  let jax: Jax, devices: string[];
  try {
    jax = await import("npm:@jax-js/jax@0.1.25");
    devices = await jax.init("webgpu");
  } finally {
    proto.requestDevice = requestDevice;
  }
  if (!devices.includes("webgpu") || !recording) {
    throw new Error(
      `jax-js has no webgpu device here (devices: ${devices.join(", ")})`,
    );
  }
  jax.defaultDevice("webgpu");
  const rec = recording;
  const { recorder } = rec;
  // The package's internal getBackend (as in `_cpu_jax.ts`).
  const dir = new URL("./", import.meta.resolve("npm:@jax-js/jax@0.1.25"));
  const chunk = [...Deno.readDirSync(dir)].map((e) => e.name)
    .find((n) => /^backend-[\w-]+\.js$/.test(n));
  if (!chunk) throw new Error(`no backend chunk in ${dir}`);
  const internal = await import(new URL(chunk, dir).href);
  const getBackend = Object.values(internal).find((f) =>
    typeof f === "function" && f.name === "getBackend"
  ) as ((device: string) => WebGpuBackendLike) | undefined;
  if (!getBackend) throw new Error(`no getBackend in ${chunk}`);
  const backend = getBackend("webgpu");
  if (
    backend.constructor.name !== "WebGPUBackend" ||
    backend.device !== rec.device || !(backend.buffers instanceof Map)
  ) {
    throw new Error(
      `expected jax-js's WebGPUBackend on the recorded device, got ${backend.constructor.name}`,
    );
  }
  // The empty arrays' shared buffer, made by the backend's constructor.
  const emptyBytes = deviceHeld(rec);
  if (emptyBytes !== 4) {
    throw new Error(`expected one 4-byte buffer at start, held ${emptyBytes}`);
  }

  const checks = {
    steps: 0,
    liveMismatches: 0,
    heldMismatches: 0,
    poolChecks: 0,
    poolMismatches: 0,
    readbacks: 0,
    empty: 0,
    others: 0,
    foreign: 0,
  };
  const live = { bytes: 0, count: 0 };
  const pool = new ReplayedPool();
  /** Recorded slots: trace id, the bytes asked for, the buffer's id. */
  const slots = new Map<
    number,
    { id: number; size: number; buffer: number; refs: number }
  >();
  /** Zero-size arrays' slots (no pool request). */
  const empty = new Set<number>();
  let recordingOn = true;
  let inPool = false, inRead = false;

  // Buffers made outside the pool: a read-back's staging buffer is an
  // alloc/free pair; anything else is counted.
  const device = rec.device as GPUDevice & Record<string, unknown>;
  const createBuffer = device.createBuffer;
  device.createBuffer = function (
    this: GPUDevice,
    desc: GPUBufferDescriptor,
  ) {
    const buffer = createBuffer.call(this, desc);
    if (!recordingOn || inPool) return buffer;
    if (!inRead) {
      checks.others++;
      return buffer;
    }
    checks.readbacks++;
    const id = recorder.nextId();
    recorder.push({
      op: "alloc",
      id,
      size: buffer.size,
      usage: buffer.usage,
      buffer: rec.bufferId(buffer),
    }, true);
    const destroy = buffer.destroy;
    let freed = false;
    buffer.destroy = function (this: GPUBuffer) {
      if (!freed && recordingOn) recorder.push({ op: "free", id }, false);
      freed = true;
      return destroy.call(this);
    };
    return buffer;
  };

  const malloc = backend.malloc.bind(backend);
  const incRef = backend.incRef.bind(backend);
  const decRef = backend.decRef.bind(backend);
  const read = backend.read.bind(backend);
  backend.malloc = (size, initialData) => {
    if (!recordingOn) return malloc(size, initialData);
    const before = recorder.events.length;
    inPool = true;
    let slot: number;
    try {
      slot = malloc(size, initialData);
    } finally {
      inPool = false;
    }
    const entry = backend.buffers.get(slot);
    if (!entry) throw new Error(`jax-js's malloc gave slot ${slot}, unknown`);
    if (size === 0) {
      checks.empty++;
      empty.add(slot);
      return slot;
    }
    const buffer = rec.bufferId(entry.buffer);
    if (buffer === undefined) throw new Error("a pool buffer not recorded");
    // The rules: this buffer from a bucket, or a new one made in this call.
    const expected = pool.acquire(entry.allocatedSize);
    const made = recorder.events.slice(before).filter((e) => e.op === "create");
    checks.poolChecks++;
    if (
      expected === undefined
        ? made.length !== 1 || made[0].id !== buffer
        : made.length !== 0 || expected !== buffer
    ) {
      checks.poolMismatches++;
      console.error(
        `malloc(${size}): buffer ${buffer}, the pool's rules give ${
          expected ?? "a new one"
        } (${made.length} made)`,
      );
    }
    if (expected === undefined) pool.made(entry.allocatedSize);
    const id = recorder.nextId();
    recorder.push({
      op: "alloc",
      id,
      size: entry.allocatedSize,
      usage: entry.buffer.usage,
      buffer,
    }, true);
    slots.set(slot, { id, size: entry.allocatedSize, buffer, refs: 1 });
    live.bytes += entry.allocatedSize;
    live.count++;
    return slot;
  };
  backend.incRef = (slot) => {
    incRef(slot);
    if (!recordingOn) return;
    const s = slots.get(slot);
    if (s) s.refs++;
    else if (!empty.has(slot)) checks.foreign++;
  };
  backend.decRef = (slot) => {
    const before = recorder.events.length;
    decRef(slot);
    if (!recordingOn) return;
    const s = slots.get(slot);
    if (!s) {
      if (!empty.has(slot)) checks.foreign++;
      else if (!backend.buffers.has(slot)) empty.delete(slot);
      return;
    }
    if (--s.refs > 0) return;
    slots.delete(slot);
    recorder.push({ op: "free", id: s.id }, false);
    live.bytes -= s.size;
    live.count--;
    const destroyed = recorder.events.slice(before).filter((e) =>
      e.op === "destroy"
    );
    const drop = pool.release(s.buffer, s.size);
    checks.poolChecks++;
    if (
      drop
        ? destroyed.length !== 1 || destroyed[0].id !== s.buffer
        : destroyed.length !== 0
    ) {
      checks.poolMismatches++;
      console.error(
        `decRef: buffer ${s.buffer} ${
          destroyed.length ? "destroyed" : "kept"
        }, the pool's rules ${drop ? "destroy" : "keep"} it`,
      );
    }
  };
  backend.read = (slot, start, count) => {
    inRead = true;
    try {
      return read(slot, start, count);
    } finally {
      inRead = false;
    }
  };

  return {
    jax,
    recorder,
    recording: rec,
    checks,
    live,
    step(name: string) {
      recorder.step(name);
      checks.steps++;
      let bytes = 0, count = 0;
      for (const e of backend.buffers.values()) {
        if (e.size > 0) bytes += e.allocatedSize, count++;
      }
      if (bytes !== live.bytes || count !== live.count) {
        checks.liveMismatches++;
        console.error(
          `${name}: trace live ${live.bytes} B in ${live.count}, jax-js's slots ${bytes} B in ${count}`,
        );
      }
      const held = deviceHeld(rec);
      if (held !== pool.held + emptyBytes) {
        checks.heldMismatches++;
        console.error(
          `${name}: trace holds ${held} B, the replayed pool ${
            pool.held + emptyBytes
          } B`,
        );
      }
    },
    finish() {
      recordingOn = false;
      rec.stop();
      return { liveSlots: backend.buffers.size, poolHeld: pool.held };
    },
  };
}
