/**
 * The policy interface of replay: anything that serves allocation requests
 * from device buffers and can say how many bytes it holds. Add a policy by
 * implementing {@linkcode ReplayPolicy} and passing its factory to
 * `replayTrace`.
 *
 * @module
 */

/** One pooling policy under replay. */
export interface ReplayPolicy {
  /** Serves allocation `id` of `size` bytes and WebGPU `usage` bits. */
  alloc(id: number, size: number, usage: number): void;
  /** Gives allocation `id` back. */
  free(id: number): void;
  /**
   * A point where the runtime waited for the GPU: `"fence"` for a readback
   * (`mapAsync`), `"step"` for a step mark. Policies that defer frees until
   * the GPU is done, or trim caches between steps, act here.
   */
  sync(kind: "fence" | "step"): void;
  /** Bytes of device memory (buffers or segments) held now. */
  heldBytes(): number;
  /** Device buffers (or segments) created so far. */
  buffersCreated(): number;
  /** Releases everything (called once after replay). */
  dispose?(): void;
}

/** Makes fresh instances of one policy. */
export interface PolicyFactory {
  /** Short name, shown in tables: `tfjs-exact`, `allot-caching`. */
  readonly name: string;
  /** One line saying what it models. */
  readonly description: string;
  /** A fresh instance. */
  create(): ReplayPolicy;
}

/** WebGPU's `GPUBufferUsage.STORAGE` bit. */
export const STORAGE_USAGE = 0x80;
/** WebGPU's `MAP_READ | MAP_WRITE` bits. */
export const MAP_USAGE: number = 0x1 | 0x2;
