/**
 * The peers of the cpu benchmark: AssemblyScript's runtime TLSF (compiled at
 * bench time with the `assemblyscript` package), `@thi.ng/malloc`'s
 * `MemPool`, `typedarray-pool`, and `new ArrayBuffer`.
 *
 * @module
 */

import asc from "assemblyscript/asc";

/** The exports of the tiny AssemblyScript module. */
export interface AsTlsf {
  /** The module's memory. */
  memory: WebAssembly.Memory;
  /** `heap.alloc(size)` of the AssemblyScript runtime (TLSF). */
  alloc(size: number): number;
  /** `heap.free(ptr)`. */
  free(ptr: number): void;
  /** First address the heap hands out (`__heap_base`). */
  heapBase: number;
}

const SOURCE = `
export function alloc(size: usize): usize { return heap.alloc(size); }
export function free(ptr: usize): void { heap.free(ptr); }
export function heapBase(): usize { return __heap_base; }
`;

let binary: Uint8Array<ArrayBuffer> | undefined;
let compiled: WebAssembly.Module | undefined;

/**
 * Compiles (once per process) the tiny AssemblyScript module whose
 * `alloc`/`free` are the runtime's TLSF `heap.alloc`/`heap.free`
 * (`--runtime minimal -O3 --noAssert`).
 *
 * @returns The wasm bytes.
 */
export async function asBinary(): Promise<Uint8Array<ArrayBuffer>> {
  if (binary === undefined) {
    const result = await asc.compileString(SOURCE, {
      runtime: "minimal",
      optimizeLevel: 3,
      shrinkLevel: 0,
      noAssert: true,
    });
    if (result.error || !result.binary) {
      throw new Error(`AssemblyScript compile failed: ${result.stderr}`);
    }
    binary = result.binary as Uint8Array<ArrayBuffer>;
  }
  return binary;
}

/**
 * The compiled AssemblyScript module (once per process).
 *
 * @returns The module.
 */
export async function asModule(): Promise<WebAssembly.Module> {
  compiled ??= await WebAssembly.compile(await asBinary());
  return compiled;
}

/**
 * Instantiates a fresh AssemblyScript TLSF module with its own memory.
 *
 * @returns A fresh instance with its own memory.
 */
export async function asTlsf(): Promise<AsTlsf> {
  const compiled = await asModule();
  const instance = await WebAssembly.instantiate(compiled, {
    env: {
      abort() {
        throw new Error("AssemblyScript abort (out of memory?)");
      },
    },
  });
  const e = instance.exports as unknown as {
    memory: WebAssembly.Memory;
    alloc(size: number): number;
    free(ptr: number): void;
    heapBase(): number;
  };
  return {
    memory: e.memory,
    alloc: e.alloc,
    free: e.free,
    heapBase: e.heapBase(),
  };
}
