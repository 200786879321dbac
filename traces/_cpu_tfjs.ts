/**
 * Sets up TF.js 4.22 on the CPU, unmodified, with its tensor memory recorded
 * in the allot trace format:
 *
 * - `wasm`: `@tensorflow/tfjs-backend-wasm` (the SIMD build, one thread). Its
 *   JavaScript side gets every tensor's memory with the module's
 *   `_malloc(bytes)` and gives it back with `_free(pointer)`; both are
 *   wrapped on the module object, so every call is an `alloc` (with the
 *   pointer as `offset`) or a `free`.
 * - `cpu`: `@tensorflow/tfjs-backend-cpu`. Tensor data lives in the backend's
 *   data store (`DataStorage`: `set` on write / makeTensorInfo, `delete` on
 *   disposeData); both are wrapped on the instance, so every tensor's data is
 *   an `alloc` of its bytes and a `free` when the store lets it go.
 *
 * At every step mark the trace's live bytes and live allocations are checked
 * against TF.js's own counters (`tf.memory().numBytes`, the backend's
 * `numDataIds()`).
 *
 * @module
 */
import * as tf from "npm:@tensorflow/tfjs@4.22.0";
import * as tfWasm from "npm:@tensorflow/tfjs-backend-wasm@4.22.0";
import { TraceRecorder } from "../packages/trace/mod.ts";

/** The CPU backends recorded. */
export type CpuBackendName = "cpu" | "wasm";

/** What the workloads in `_models.ts` use of a recording. */
export interface CpuRecording {
  readonly recording: { readonly recorder: TraceRecorder };
  /** Marks a step and checks live bytes and count against TF.js's counters. */
  step(name: string): void;
  readonly checks: {
    steps: number;
    /** Steps where live count or corrected live bytes differ from TF.js's. */
    mismatches: number;
    /** Steps where live bytes equal `tf.memory().numBytes` with no correction. */
    exact: number;
    /** `_free` of a pointer this recording did not see allocated (wasm). */
    foreignFrees: number;
    /** `set` over a data id already in the store (cpu). */
    overwrites: number;
  };
  /** Live bytes and allocations now, by the trace. */
  readonly live: { bytes: number; count: number };
  /** Stops recording (the wrappers stay but record nothing). */
  finish(): Record<string, unknown>;
}

interface WasmModule {
  _malloc(bytes: number): number;
  _free(pointer: number): void;
  /** The instance's raw exports (Emscripten's `Module.asm`). */
  asm: { malloc(bytes: number): number; free(pointer: number): void };
  HEAPU8: Uint8Array;
}

interface CpuStore {
  set(
    dataId: object,
    value: { values?: ArrayBufferView | null; dtype: string },
  ): void;
  delete(dataId: object): boolean;
  has(dataId: object): boolean;
}

// The bytes of a tensor's data in the cpu backend's store: its typed array.
function bytesOf(value: { values?: ArrayBufferView | null; dtype: string }) {
  if (value.dtype === "string" || !ArrayBuffer.isView(value.values)) {
    throw new Error(
      `cannot record tensor data of dtype ${value.dtype} without a typed array`,
    );
  }
  return value.values.byteLength;
}

/**
 * Starts TF.js on backend `name` with its tensor memory recorded.
 *
 * @param name `cpu` or `wasm`.
 * @param source The trace header's source.
 * @param meta More header fields.
 * @returns The recording.
 */
export async function startCpuTfjs(
  name: CpuBackendName,
  source: string,
  meta: Record<string, unknown> = {},
): Promise<CpuRecording> {
  let wasmFile: string | undefined;
  if (name === "wasm") {
    // Reading the namespace makes Deno evaluate the package (its CommonJS
    // build registers the "wasm" backend factory when evaluated).
    if (typeof tfWasm.setWasmPaths !== "function") {
      throw new Error("no setWasmPaths in @tensorflow/tfjs-backend-wasm");
    }
    // One thread: the threaded build needs workers from blob URLs and would
    // make the order of events depend on scheduling.
    tf.env().set("WASM_HAS_MULTITHREAD_SUPPORT", false);
    // The package's own .wasm files, next to its entry point in Deno's npm
    // cache; `true`: load them with fetch (a file: URL in Deno).
    const dir = new URL(
      "./",
      import.meta.resolve("npm:@tensorflow/tfjs-backend-wasm@4.22.0"),
    );
    tfWasm.setWasmPaths(dir.href, true);
    wasmFile = await tf.env().getAsync("WASM_HAS_SIMD_SUPPORT")
      ? "tfjs-backend-wasm-simd.wasm"
      : "tfjs-backend-wasm.wasm";
  }
  if (!(await tf.setBackend(name))) {
    throw new Error(`TF.js could not start backend ${name}`);
  }
  const recorder = new TraceRecorder({
    source,
    stacks: "none",
    meta: {
      runtime: `@tensorflow/tfjs-backend-${name}@4.22.0`,
      host: `Deno ${Deno.version.deno}`,
      ...(wasmFile ? { wasm: wasmFile, threads: 1 } : {}),
      ...meta,
    },
  });
  const live = { bytes: 0, count: 0 };
  const checks = {
    steps: 0,
    mismatches: 0,
    exact: 0,
    foreignFrees: 0,
    overwrites: 0,
  };
  // Live data ids and their bytes, for the check only: TF.js's numBytes
  // counts bytes per tensor, so a buffer that two live tensors share (a
  // variable over its initial value) counts twice there. The check adds
  // (backend.refCount(dataId) - 1) x bytes per live data id to the trace's
  // live bytes.
  const dataBytes = new Map<object, number>();
  let recording = true;
  const alloc = (size: number, offset?: number): number => {
    const id = recorder.nextId();
    recorder.push(
      offset === undefined
        ? { op: "alloc", id, size }
        : { op: "alloc", id, size, offset },
      true,
    );
    live.bytes += size;
    live.count++;
    return id;
  };
  const free = (id: number, size: number): void => {
    recorder.push({ op: "free", id }, true);
    live.bytes -= size;
    live.count--;
  };
  // deno-lint-ignore no-explicit-any
  const backend = tf.backend() as any;
  let dataIds: () => number;
  let extra: () => Record<string, unknown> = () => ({});
  if (name === "wasm") {
    const module = backend.wasm as WasmModule;
    // The raw exports: Emscripten's `Module._malloc` is a stub that replaces
    // itself with the export on its first call (and so would drop a wrapper
    // put over it); the wrappers call the exports directly.
    const malloc = module.asm.malloc, release = module.asm.free;
    const blocks = new Map<number, { id: number; size: number }>();
    let high = 0, low = Infinity;
    module._malloc = (bytes: number): number => {
      const pointer = malloc(bytes);
      if (recording) {
        const p = pointer >>> 0;
        blocks.set(p, { id: alloc(bytes, p), size: bytes });
        if (p < low) low = p;
        if (p + bytes > high) high = p + bytes;
      }
      return pointer;
    };
    module._free = (pointer: number): void => {
      if (recording) {
        const block = blocks.get(pointer >>> 0);
        if (block === undefined) checks.foreignFrees++;
        else {
          blocks.delete(pointer >>> 0);
          free(block.id, block.size);
        }
      }
      release(pointer);
    };
    const map = backend.dataIdMap as {
      set(dataId: object, v: { shape: number[]; dtype: string }): void;
      delete(dataId: object): boolean;
    };
    const mapSet = map.set.bind(map), mapDelete = map.delete.bind(map);
    map.set = (dataId, v) => {
      dataBytes.set(
        dataId,
        v.dtype === "string" ? 0 : tf.util.sizeFromShape(v.shape) *
          tf.util.bytesPerElement(v.dtype as tf.DataType),
      );
      mapSet(dataId, v);
    };
    map.delete = (dataId) => {
      dataBytes.delete(dataId);
      return mapDelete(dataId);
    };
    dataIds = () => backend.numDataIds();
    extra = () => ({
      wasmMemoryBytes: module.HEAPU8.byteLength,
      lowestPointer: low,
      highestByte: high,
    });
  } else {
    const store = backend.data as CpuStore;
    const set = store.set.bind(store), remove = store.delete.bind(store);
    const blocks = new WeakMap<object, { id: number; size: number }>();
    store.set = (dataId, value) => {
      if (recording) {
        if (store.has(dataId)) checks.overwrites++;
        else {
          const size = bytesOf(value);
          blocks.set(dataId, { id: alloc(size), size });
          dataBytes.set(dataId, size);
        }
      }
      set(dataId, value);
    };
    store.delete = (dataId) => {
      if (recording) {
        const block = blocks.get(dataId);
        if (block !== undefined) {
          blocks.delete(dataId);
          dataBytes.delete(dataId);
          free(block.id, block.size);
        }
      }
      return remove(dataId);
    };
    dataIds = () => backend.numDataIds();
  }
  const before = tf.memory();
  if (before.numBytes !== 0 || dataIds() !== 0) {
    throw new Error(
      `backend ${name} starts with ${before.numBytes} bytes in ${dataIds()} data ids: record in a fresh process`,
    );
  }
  return {
    recording: { recorder },
    live,
    checks,
    step(stepName: string) {
      recorder.step(stepName);
      checks.steps++;
      const memory = tf.memory(), ids = dataIds();
      let aliased = 0;
      for (const [dataId, bytes] of dataBytes) {
        aliased += (backend.refCount(dataId) - 1) * bytes;
      }
      if (live.bytes === memory.numBytes) checks.exact++;
      if (
        live.bytes + aliased !== memory.numBytes || live.count !== ids ||
        live.count !== memory.numDataBuffers
      ) {
        checks.mismatches++;
        console.error(
          `${stepName}: trace live ${live.bytes} B (+ ${aliased} B aliased) in ${live.count}, TF.js numBytes ${memory.numBytes} in ${ids} data ids (${memory.numDataBuffers} buffers)`,
        );
      }
    },
    finish() {
      recording = false;
      return extra();
    },
  };
}
