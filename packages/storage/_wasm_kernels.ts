/**
 * Loads the WebAssembly transposes of `_transpose_wasm.ts` (compiled once,
 * synchronously: the module is about 6.6 KB, which browsers compile on the
 * main thread since Chrome 114 lifted its 4 KB limit; a refusal means the JS
 * kernels run). Internal.
 *
 * @module
 */

import { _TRANSPOSE_STAGED_WASM, _TRANSPOSE_WASM } from "./_transpose_wasm.ts";

/** `tN(d, da, s, sb, na, nb)`, addresses and strides in bytes. */
export type _Transpose = (
  d: number,
  da: number,
  s: number,
  sb: number,
  na: number,
  nb: number,
) => void;

/** `rows(d, ds, s, ss, len, n)`: n runs of len bytes (memory.copy). */
export type _Rows = (
  d: number,
  ds: number,
  s: number,
  ss: number,
  len: number,
  n: number,
) => void;

/** `gN(d, ds, s, ss, sb, nb, n)`: n rows of nb strided elements. */
export type _Gather = (
  d: number,
  ds: number,
  s: number,
  ss: number,
  sb: number,
  nb: number,
  n: number,
) => void;

/** An instance of the module with its own memory. */
export interface _WasmKernels {
  /** The instance's memory; read `.buffer` after every grow. */
  readonly memory: WebAssembly.Memory;
  /** Transposes by element width in bytes (1, 2, 4, 8). */
  readonly transpose: { readonly [width: number]: _Transpose };
  /** Runs of bytes. */
  readonly rows: _Rows;
  /** Strided gathers by element width in bytes. */
  readonly gather: { readonly [width: number]: _Gather };
}

interface Exports {
  t8: _Transpose;
  t16: _Transpose;
  t32: _Transpose;
  t64: _Transpose;
  rows: _Rows;
  g8: _Gather;
  g16: _Gather;
  g32: _Gather;
  g64: _Gather;
}

function kernelsOf(memory: WebAssembly.Memory, e: Exports): _WasmKernels {
  return {
    memory,
    transpose: { 1: e.t8, 2: e.t16, 4: e.t32, 8: e.t64 },
    rows: e.rows,
    gather: { 1: e.g8, 2: e.g16, 4: e.g32, 8: e.g64 },
  };
}

const PAGE = 65536;
/** Scratch kept between calls; larger requests get a temporary instance. */
const KEEP_BYTES = 16 << 20;

let module: WebAssembly.Module | null | undefined;
let kept: _WasmKernels | undefined;

function decode(b64: string): Uint8Array<ArrayBuffer> {
  const text = atob(b64);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

function compile(): WebAssembly.Module | null {
  if (module === undefined) {
    try {
      module = new WebAssembly.Module(decode(_TRANSPOSE_WASM));
    } catch {
      // no WebAssembly, no SIMD, or a CSP without wasm-unsafe-eval
      module = null;
    }
  }
  return module;
}

function instantiate(
  mod: WebAssembly.Module,
  byteLength: number,
): _WasmKernels {
  const memory = new WebAssembly.Memory({
    initial: Math.max(1, Math.ceil(byteLength / PAGE)),
  });
  const exports = new WebAssembly.Instance(mod, { env: { memory } })
    .exports as unknown as Exports;
  return kernelsOf(memory, exports);
}

/**
 * Kernels whose memory holds at least `byteLength` bytes, or `undefined`
 * where WebAssembly SIMD is unavailable.
 *
 * @param byteLength Scratch bytes needed.
 * @returns The kernels.
 */
export function _wasmKernels(byteLength: number): _WasmKernels | undefined {
  const mod = compile();
  if (mod === null) return undefined;
  if (byteLength > KEEP_BYTES) return instantiate(mod, byteLength);
  if (kept === undefined) kept = instantiate(mod, byteLength);
  const have = kept.memory.buffer.byteLength;
  if (have < byteLength) {
    kept.memory.grow(Math.ceil((byteLength - have) / PAGE));
  }
  return kept;
}

const byMemory = new WeakMap<WebAssembly.Memory, _WasmKernels | null>();
const memoryOfBuffer = new WeakMap<ArrayBufferLike, WebAssembly.Memory>();

/**
 * Records that `memory.buffer` belongs to `memory`, so copies between views
 * of it can run in place (call again after the memory grows).
 *
 * @param memory A WebAssembly memory that holds storages.
 */
export function _noteMemory(memory: WebAssembly.Memory): void {
  const buffer = memory.buffer;
  if (memoryOfBuffer.get(buffer) !== memory) memoryOfBuffer.set(buffer, memory);
}

/**
 * Kernels that work directly in the WebAssembly memory owning `buffer`, or
 * `undefined` when the buffer is not a noted memory's, or the memory cannot
 * be imported (a shared memory, no SIMD).
 *
 * @param buffer The buffer of a typed array.
 * @returns The kernels, whose `memory` is that memory.
 */
export function _wasmKernelsIn(
  buffer: ArrayBufferLike,
): _WasmKernels | undefined {
  return perMemory(byMemory, buffer, (memory) => {
    const mod = compile();
    if (mod === null) return null;
    const exports = new WebAssembly.Instance(mod, { env: { memory } })
      .exports as unknown as Exports;
    return kernelsOf(memory, exports);
  });
}

/**
 * The kernels of the noted memory owning `buffer`, made once per memory by
 * `make` (`null`, or a throw, when they cannot be made there).
 */
function perMemory<K>(
  cache: WeakMap<WebAssembly.Memory, K | null>,
  buffer: ArrayBufferLike,
  make: (memory: WebAssembly.Memory) => K | null,
): K | undefined {
  const memory = memoryOfBuffer.get(buffer);
  if (memory === undefined) return undefined;
  let kernels = cache.get(memory);
  if (kernels === undefined) {
    try {
      kernels = make(memory);
    } catch {
      // a shared memory, no SIMD, no multi-memory: another path copies
      kernels = null;
    }
    cache.set(memory, kernels);
  }
  return kernels ?? undefined;
}

/** `out(d, s, len)`: `len` bytes from the scratch at `s` to memory at `d`. */
export type _CopyOut = (d: number, s: number, len: number) => void;

/**
 * Transposes that read a storage memory and write their own scratch memory,
 * and the copy back: staged output in place.
 */
export interface _StagedKernels {
  /** The scratch memory (output staging); read `.buffer` after a grow. */
  readonly scratch: WebAssembly.Memory;
  /** Transposes by element width in bytes (1, 2, 4, 8), memory to scratch. */
  readonly transpose: { readonly [width: number]: _Transpose };
  /**
   * Transpose of 4-byte elements in 32×8 tiles (eight source rows at a time:
   * fewer lines of one cache set when source rows are a power of two apart),
   * memory to scratch.
   */
  readonly t32w: _Transpose;
  /** Scratch to memory. */
  readonly out: _CopyOut;
  /** Scratch to memory, `n` runs of `len` bytes (as `rows`). */
  readonly outRows: _Rows;
}

let stagedModule: WebAssembly.Module | null | undefined;
const stagedByMemory = new WeakMap<
  WebAssembly.Memory,
  _StagedKernels | null
>();

/**
 * Staged-output kernels for the noted WebAssembly memory owning `buffer`,
 * with a scratch of at least `scratchBytes`, or `undefined` when the buffer
 * is not a noted memory's or the runtime lacks multi-memory WebAssembly (V8
 * before 12, such as Node 20).
 *
 * @param buffer The buffer of a typed array.
 * @param scratchBytes Bytes of output staged at a time.
 * @returns The kernels.
 */
export function _stagedKernelsIn(
  buffer: ArrayBufferLike,
  scratchBytes: number,
): _StagedKernels | undefined {
  const kernels = perMemory(stagedByMemory, buffer, (memory) => {
    if (stagedModule === undefined) {
      const bytes = decode(_TRANSPOSE_STAGED_WASM);
      stagedModule = WebAssembly.validate(bytes)
        ? new WebAssembly.Module(bytes)
        : null;
    }
    if (stagedModule === null) return null;
    const scratch = new WebAssembly.Memory({
      initial: Math.max(1, Math.ceil(scratchBytes / PAGE)),
    });
    const e = new WebAssembly.Instance(stagedModule, {
      env: { memory, scratch },
    }).exports as unknown as {
      t8: _Transpose;
      t16: _Transpose;
      t32: _Transpose;
      t64: _Transpose;
      t32w: _Transpose;
      out: _CopyOut;
      outRows: _Rows;
    };
    return {
      scratch,
      transpose: { 1: e.t8, 2: e.t16, 4: e.t32, 8: e.t64 },
      t32w: e.t32w,
      out: e.out,
      outRows: e.outRows,
    };
  });
  if (kernels === undefined) return undefined;
  const have = kernels.scratch.buffer.byteLength;
  if (have < scratchBytes) {
    try {
      kernels.scratch.grow(Math.ceil((scratchBytes - have) / PAGE));
    } catch {
      // out of memory for the scratch: the caller takes another path
      return undefined;
    }
  }
  return kernels;
}
