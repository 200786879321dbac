/**
 * Sets up jax-js 0.1.25 (`@jax-js/jax`) on its WebAssembly device in Deno,
 * unmodified, with its tensor memory recorded in the allot trace format:
 * the CPU traces of the fourth hold-out set, from a runtime other than
 * TF.js.
 *
 * Why not onnxruntime-web's wasm backend: its Emscripten module exports
 * `_malloc`/`_free` (minified exports, reachable by wrapping the instance's
 * exports at `WebAssembly.instantiate`), but only onnxruntime's JavaScript
 * side calls them: one `_malloc` and one `_free` per input tensor per
 * `session.run` (the input's bytes), a few at session creation. Every
 * tensor the session makes (initializers, intermediates, outputs) is
 * allocated by its C++ side through direct calls to the module's own
 * `malloc` inside the WebAssembly code, which JavaScript cannot intercept
 * without rewriting the binary (see "The fourth hold-out set" in
 * `traces/README.md`).
 *
 * jax-js keeps every array's bytes in its own WebAssembly memory, placed by
 * an allocator written in JavaScript (`WasmAllocator`: size classes, a LIFO
 * free list per class, a bump pointer that grows the memory). The backend
 * asks it for memory in `malloc(size, initialData?)` (a slot, reference
 * count 1) and gives it back when `decRef` brings a slot's count to 0. The
 * recorder wraps `malloc`, `incRef` and `decRef` on the backend instance
 * (reached through the package's internal `getBackend`, which its entry
 * point does not re-export), so every allocation is an `alloc` of its bytes
 * and every last `decRef` a `free`. The pointer (`offset`) is what the
 * allocator's rules give for that sequence, replayed beside it; two checks
 * hold it to the runtime's real state: the bytes of every upload
 * (`initialData`) are found at the computed pointer in the real memory,
 * and at every step the real memory's size equals the size the replayed
 * bump pointer needs.
 *
 * One thread: jax-js uses workers over a shared memory when `Worker` and
 * `SharedArrayBuffer` exist, and then gives a kernel's inputs back when
 * the workers finish (in an order that depends on scheduling); the recorder
 * hides `Worker` before the backend starts, so kernels run on the main
 * thread, as `numThreads = 1` does for onnxruntime and TF.js. jax-js makes
 * its wasm backend (and its memory) when its module is evaluated, so the
 * recorder imports it only then, once per process, and hands it to the
 * models as `rec.jax`.
 *
 * @module
 */
import { TraceRecorder } from "../packages/trace/mod.ts";

/** The jax-js module. */
export type Jax = typeof import("npm:@jax-js/jax@0.1.25");

/** What the models in `_cpu_jax_models.ts` use of a recording. */
export interface JaxRecording {
  /** jax-js, imported by `startCpuJax` (after its patches). */
  readonly jax: Jax;
  readonly recorder: TraceRecorder;
  /** Marks a step and checks the replayed allocator against the runtime. */
  step(name: string): void;
  readonly checks: {
    steps: number;
    /** Steps where the memory's size is not the replayed bump pointer's. */
    mismatches: number;
    /** Uploads whose bytes were found at the replayed pointer. */
    uploads: number;
    /** Uploads whose bytes were not there. */
    uploadMismatches: number;
    /** `decRef`/`incRef` of a slot the recording did not see allocated. */
    foreign: number;
  };
  /** Live bytes and allocations now, by the trace. */
  readonly live: { bytes: number; count: number };
  /** Stops recording (the wrappers stay but record nothing). */
  finish(): Record<string, unknown>;
}

interface WasmBackendLike {
  malloc(size: number, initialData?: Uint8Array): number;
  incRef(slot: number): void;
  decRef(slot: number): void;
}

const PAGE = 65536;

/**
 * The placement rules of jax-js 0.1.25's `WasmAllocator`
 * (`src/backend/wasm/allocator.ts`), replayed to know each pointer.
 */
class ReplayedAllocator {
  head = 64;
  #free = new Map<number, number[]>();
  #classOf = new Map<number, number>();
  static sizeClass(size: number): number {
    const align = (n: number, a: number) => Math.ceil(n / a) * a;
    if (size <= 512) return align(size, 64);
    if (size <= 2048) return align(size, 512);
    if (size <= 65536) {
      let c = 4096;
      while (c < size) c *= 2;
      return c;
    }
    return align(size, PAGE);
  }
  malloc(size: number): number {
    if (size === 0) return 0;
    const c = ReplayedAllocator.sizeClass(size);
    let ptr = this.#free.get(c)?.pop();
    if (ptr === undefined) {
      ptr = this.head;
      this.head += Math.ceil(c / 64) * 64;
    }
    this.#classOf.set(ptr, c);
    return ptr;
  }
  free(ptr: number): void {
    if (ptr === 0) return;
    const c = this.#classOf.get(ptr)!;
    this.#classOf.delete(ptr);
    const list = this.#free.get(c);
    if (list) list.push(ptr);
    else this.#free.set(c, [ptr]);
  }
  /** The memory's size the bump pointer needs (0 before any allocation). */
  memoryBytes(): number {
    return this.head === 64 ? 0 : Math.ceil(this.head / PAGE) * PAGE;
  }
}

/**
 * Starts jax-js's wasm device with its tensor memory recorded.
 *
 * @param source The trace header's source.
 * @param meta More header fields.
 * @returns The recording.
 */
export async function startCpuJax(
  source: string,
  meta: Record<string, unknown> = {},
): Promise<JaxRecording> {
  // One thread (see the module's comment).
  Reflect.deleteProperty(globalThis, "Worker");
  // The backend's memory, caught when the backend makes it.
  const memories: WebAssembly.Memory[] = [];
  const Memory = WebAssembly.Memory;
  WebAssembly.Memory = class extends Memory {
    constructor(d: WebAssembly.MemoryDescriptor) {
      super(d);
      memories.push(this);
    }
  } as typeof WebAssembly.Memory;
  let jax: Jax, devices: string[];
  try {
    jax = await import("npm:@jax-js/jax@0.1.25");
    devices = await jax.init("wasm");
  } finally {
    WebAssembly.Memory = Memory;
  }
  if (!devices.includes("wasm")) throw new Error("jax-js has no wasm device");
  jax.defaultDevice("wasm");
  // The package's internal getBackend (its chunk, in Deno's npm cache, is
  // the module the entry point imports).
  const dir = new URL("./", import.meta.resolve("npm:@jax-js/jax@0.1.25"));
  const chunk = [...Deno.readDirSync(dir)].map((e) => e.name)
    .find((n) => /^backend-[\w-]+\.js$/.test(n));
  if (!chunk) throw new Error(`no backend chunk in ${dir}`);
  const internal = await import(new URL(chunk, dir).href);
  const getBackend = Object.values(internal).find((f) =>
    typeof f === "function" && f.name === "getBackend"
  ) as ((device: string) => WasmBackendLike) | undefined;
  if (!getBackend) throw new Error(`no getBackend in ${chunk}`);
  const backend = getBackend("wasm");
  if (backend.constructor.name !== "WasmBackend" || memories.length !== 1) {
    throw new Error(
      `expected one WasmBackend with one memory, got ${backend.constructor.name} and ${memories.length} memories`,
    );
  }
  const memory = memories[0];
  if (memory.buffer instanceof SharedArrayBuffer) {
    throw new Error("jax-js made a shared memory: workers were not hidden");
  }
  const recorder = new TraceRecorder({
    source,
    stacks: "none",
    meta: {
      runtime: "@jax-js/jax@0.1.25 (wasm device)",
      host: `Deno ${Deno.version.deno}`,
      threads: 1,
      ...meta,
    },
  });
  const live = { bytes: 0, count: 0 };
  const checks = {
    steps: 0,
    mismatches: 0,
    uploads: 0,
    uploadMismatches: 0,
    foreign: 0,
  };
  const replay = new ReplayedAllocator();
  const slots = new Map<
    number,
    { id: number; size: number; ptr: number; refs: number }
  >();
  let recording = true;
  let low = Infinity, high = 0;
  const malloc = backend.malloc.bind(backend);
  const incRef = backend.incRef.bind(backend);
  const decRef = backend.decRef.bind(backend);
  backend.malloc = (size, initialData) => {
    const slot = malloc(size, initialData);
    if (recording) {
      const ptr = replay.malloc(size);
      const id = recorder.nextId();
      recorder.push({ op: "alloc", id, size, offset: ptr }, true);
      slots.set(slot, { id, size, ptr, refs: 1 });
      live.bytes += size;
      live.count++;
      if (size > 0) {
        low = Math.min(low, ptr);
        high = Math.max(high, ptr + size);
      }
      if (initialData && size > 0) {
        const there = new Uint8Array(memory.buffer, ptr, size);
        let same = true;
        for (let i = 0; i < size && same; i++) {
          same = there[i] === initialData[i];
        }
        if (same) checks.uploads++;
        else checks.uploadMismatches++;
      }
    }
    return slot;
  };
  backend.incRef = (slot) => {
    incRef(slot);
    if (recording) {
      const s = slots.get(slot);
      if (s) s.refs++;
      else checks.foreign++;
    }
  };
  backend.decRef = (slot) => {
    decRef(slot);
    if (recording) {
      const s = slots.get(slot);
      if (!s) checks.foreign++;
      else if (--s.refs === 0) {
        slots.delete(slot);
        replay.free(s.ptr);
        recorder.push({ op: "free", id: s.id }, true);
        live.bytes -= s.size;
        live.count--;
      }
    }
  };
  return {
    jax,
    recorder,
    live,
    checks,
    step(stepName: string) {
      recorder.step(stepName);
      checks.steps++;
      if (memory.buffer.byteLength !== replay.memoryBytes()) {
        checks.mismatches++;
        console.error(
          `${stepName}: memory ${memory.buffer.byteLength} B, the replayed allocator needs ${replay.memoryBytes()} B`,
        );
      }
    },
    finish() {
      recording = false;
      return {
        wasmMemoryBytes: memory.buffer.byteLength,
        lowestPointer: low,
        highestByte: high,
        liveSlots: slots.size,
      };
    },
  };
}
