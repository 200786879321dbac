/**
 * {@linkcode GpuStaging}: moves bytes between the host and GPU ranges through
 * a bounded pool of mappable staging buffers.
 *
 * @module
 */

import {
  _bytesOf,
  _checkDevice,
  _checkLabel,
  _checkLimits,
  _checkOptions,
} from "./_validate_gpu.ts";
import { _MapMode, _Usage } from "./_flags.ts";
import {
  alignUp,
  describeValue,
  InvalidArgumentError,
  optionOr,
  validateByteLength,
  validateInteger,
} from "@allot/core";
import {
  _assertAlive,
  _deviceState,
  _lostError,
  _onDeviceLost,
} from "./_device_state.ts";
import { type GpuBinding, validateBinding } from "./gpu_binding.ts";
import { GpuKernels } from "./gpu_kernels.ts";
import { GpuStagingError } from "./gpu_staging_error.ts";

/** Options of {@linkcode GpuStaging}. */
export interface GpuStagingOptions {
  /**
   * Prefix of staging buffer labels.
   *
   * @default {"allot-staging"}
   */
  label?: string;
  /**
   * Most bytes of staging buffers alive at once, idle and in use together.
   * A request that would pass it first drops idle buffers, then waits for
   * one in use to come back. Temporary buffers are not pooled and not
   * bounded by it: a download that finds no room for all its chunks at the
   * call copies the rest aside (one `COPY_SRC | COPY_DST` buffer of that
   * many bytes, so that it reads the bytes of the call's time), and an
   * unaligned range goes through a buffer of its length; `stats()` reports
   * them as `temporaryBytes`.
   *
   * @default {67108864}
   */
  maxStagingBytes?: number;
  /**
   * Largest single staging buffer; longer transfers go in chunks.
   *
   * @default {8388608}
   */
  chunkByteLength?: number;
  /**
   * Uploads of at most this many bytes go through `queue.writeBuffer`;
   * longer ones through pooled mapped staging buffers.
   *
   * @default {262144}
   */
  writeBufferMaxByteLength?: number;
}

/** Options of {@linkcode GpuStaging.upload}. */
export interface UploadOptions {
  /**
   * Byte offset in the destination range.
   *
   * @default {0}
   */
  byteOffset?: number;
}

/** Options of {@linkcode GpuStaging.download}. */
export interface DownloadOptions {
  /**
   * Byte offset in the source range.
   *
   * @default {0}
   */
  byteOffset?: number;
  /**
   * Bytes to read.
   *
   * @default {the rest of the range}
   */
  byteLength?: number;
}

/** Figures of a {@linkcode GpuStaging} pool. */
export interface StagingStats {
  /** Bytes of staging buffers alive (idle, in use or re-mapping). */
  reservedBytes: number;
  /** Highest `reservedBytes` so far. */
  peakReservedBytes: number;
  /** Staging buffers alive. */
  liveCount: number;
  /** Idle buffers ready to hand out. */
  idleCount: number;
  /** Staging buffers created so far. */
  createdCount: number;
  /** Uploads that went through `writeBuffer`. */
  writeBufferUploads: number;
  /** Uploads that went through mapped staging buffers (completed ones). */
  stagedUploads: number;
  /** Downloads completed so far (a refused or failed one is not counted). */
  downloads: number;
  /**
   * Bytes of temporary buffers alive outside the pool, not bounded by
   * `maxStagingBytes`: the rest of a download copied aside when the pool
   * had no room at the call, and the aligned copy of an unaligned range.
   */
  temporaryBytes: number;
  /** Highest `temporaryBytes` so far. */
  peakTemporaryBytes: number;
}

type _Kind = "upload" | "download";
const MIN_STAGING = 4096;

/**
 * Upload and download through pooled staging buffers.
 *
 * - Upload: `queue.writeBuffer` for small data; larger data is copied into a
 *   `MAP_WRITE | COPY_SRC` buffer that is already mapped, unmapped, copied on
 *   the GPU, and re-mapped in the background before it is reused.
 * - Download: a `MAP_READ | COPY_DST` buffer receives a copy, `mapAsync`
 *   waits for it, the bytes are copied out and the buffer is unmapped before
 *   it goes back. Any number of downloads can be in flight at once.
 * - Every staging buffer is in exactly one state: idle (ready), in use, or
 *   re-mapping; only idle ones are handed out, so none is handed out while
 *   a map is pending or a reader holds its mapped range. The pool is
 *   bounded by `maxStagingBytes`.
 * - Ranges at byte offsets that are not multiples of 4 go through a
 *   temporary aligned buffer and {@linkcode GpuKernels.copyBytes}.
 *
 * When the device is lost the pool is dropped, waiting requests reject with
 * `DeviceLostError`, and later calls throw it.
 *
 * @example Round-trip bytes
 * ```ts
 * import { GpuStaging } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const buffer = device.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
 *   using staging = new GpuStaging(device);
 *   const binding = { buffer, offset: 0, size: 16 };
 *   await staging.upload(binding, new Uint8Array([1, 2, 3, 4, 5]), { byteOffset: 3 });
 *   const bytes = await staging.download(binding, { byteOffset: 3, byteLength: 5 });
 *   assert.deepEqual([...bytes], [1, 2, 3, 4, 5]);
 *   device.destroy();
 * }
 * ```
 */
export class GpuStaging {
  /** The device. */
  readonly gpuDevice: GPUDevice;
  /** Bound on live staging bytes. */
  readonly maxStagingBytes: number;
  /** Largest staging buffer. */
  readonly chunkByteLength: number;
  /** Largest upload that uses `writeBuffer`. */
  readonly writeBufferMaxByteLength: number;
  #label: string;
  #idle = new Map<string, GPUBuffer[]>();
  #idleCount = 0;
  #live = new Set<GPUBuffer>();
  #reservedBytes = 0;
  #peak = 0;
  #created = 0;
  #writeUploads = 0;
  #stagedUploads = 0;
  #downloads = 0;
  #temporaryBytes = 0;
  #temporarySizes = new Map<GPUBuffer, number>();
  #peakTemporary = 0;
  #waiters: { resolve: () => void; reject: (e: unknown) => void }[] = [];
  #closed = false;

  /**
   * Creates a staging pool on `device`.
   *
   * @param device The device.
   * @param options Bounds and thresholds.
   * @throws {InvalidArgumentError} For a chunk larger than the bound.
   */
  constructor(device: GPUDevice, options?: GpuStagingOptions) {
    _checkDevice(device, "Cannot make a GpuStaging");
    _checkLimits(device, "Cannot make a GpuStaging", ["maxBufferSize"]);
    options = _checkOptions(options, "options", [
      "label",
      "maxStagingBytes",
      "chunkByteLength",
      "writeBufferMaxByteLength",
    ], "GpuStaging");
    this.gpuDevice = device;
    this.#label = _checkLabel(options.label, "allot-staging");
    this.maxStagingBytes = validateByteLength(
      optionOr(options.maxStagingBytes, 64 << 20),
      Number.MAX_SAFE_INTEGER,
      "maxStagingBytes",
    );
    const chunk = optionOr(options.chunkByteLength, 8 << 20);
    this.chunkByteLength = validateInteger(
      chunk,
      MIN_STAGING,
      Math.min(this.maxStagingBytes, device.limits.maxBufferSize),
      "chunkByteLength",
    );
    this.writeBufferMaxByteLength = validateByteLength(
      optionOr(options.writeBufferMaxByteLength, 256 << 10),
      Number.MAX_SAFE_INTEGER,
      "writeBufferMaxByteLength",
    );
    _onDeviceLost(device, this, (staging) => staging.#drop(true));
  }

  /**
   * The pool's figures.
   *
   * @returns A snapshot.
   */
  stats(): StagingStats {
    return {
      reservedBytes: this.#reservedBytes,
      peakReservedBytes: this.#peak,
      liveCount: this.#live.size,
      idleCount: this.#idleCount,
      createdCount: this.#created,
      writeBufferUploads: this.#writeUploads,
      stagedUploads: this.#stagedUploads,
      downloads: this.#downloads,
      temporaryBytes: this.#temporaryBytes,
      peakTemporaryBytes: this.#peakTemporary,
    };
  }

  /**
   * Writes `data` into `dst` at `byteOffset`. The returned promise resolves
   * once the copy is submitted to the queue; work submitted after that sees
   * the bytes. `data` is read during the call (as `writeBuffer` reads it):
   * it may be refilled or transferred as soon as `upload` returns, before
   * the promise resolves.
   *
   * @param dst The destination range (a `COPY_DST` buffer).
   * @param data The bytes.
   * @param options Byte offset in `dst`.
   * @returns Resolves when the copy is submitted.
   * @throws {InvalidArgumentError} When the bytes do not fit `dst`.
   * @throws {DeviceLostError} When the device was lost.
   * @throws {GpuStagingError} When the device refused the copy into `dst`
   * (a destroyed buffer, say; the device's error is its `cause`).
   */
  async upload(
    dst: GpuBinding,
    data: ArrayBufferView | ArrayBuffer,
    options?: UploadOptions,
  ): Promise<void> {
    const what = "upload";
    this.#checkOpen(what);
    dst = validateBinding(this.gpuDevice, dst, { what, storage: false });
    const bytes = _bytesOf(data, "Cannot upload");
    options = _checkOptions(
      options,
      "options",
      ["byteOffset"],
      "GpuStaging.upload()",
    );
    const byteOffset = validateInteger(
      optionOr(options.byteOffset, 0),
      0,
      dst.size,
      "byteOffset",
    );
    if (bytes.byteLength > dst.size - byteOffset) {
      throw new InvalidArgumentError(
        `Cannot upload ${bytes.byteLength} bytes: only ${
          dst.size - byteOffset
        } fit past byteOffset ${byteOffset} of the destination`,
        {
          name: "data",
          value: bytes.byteLength,
          limit: dst.size - byteOffset,
        },
      );
    }
    if (bytes.byteLength === 0) return;
    const to = dst.offset + byteOffset;
    if (to % 4 !== 0 || bytes.byteLength % 4 !== 0) {
      _requireStorage(dst.buffer, "upload", "an unaligned range");
      await this.#uploadUnaligned(dst, bytes, byteOffset);
      return;
    }
    // a destination the device refuses (destroyed, say) rejects the upload
    // with a GpuStagingError instead of an uncaptured device error
    if (bytes.byteLength <= this.writeBufferMaxByteLength) {
      const scope = this.#scope();
      let refused: Promise<GPUError | null> | undefined;
      try {
        this.gpuDevice.queue.writeBuffer(
          dst.buffer,
          to,
          bytes as Uint8Array<ArrayBuffer>,
        );
      } finally {
        refused = scope?.();
      }
      await this.#checkScope(refused, bytes.byteLength, "upload");
      this.#writeUploads++;
      return;
    }
    // The upload sends what `data` holds at the call, as `writeBuffer`
    // does: the chunks that have a mapped staging buffer at hand are written
    // now, and what must wait for one is copied first (it was read after
    // awaits: a caller that refilled or detached `data` after the call sent
    // the new bytes, or failed with a raw `TypeError` after a partial upload).
    const refused: (Promise<GPUError | null> | undefined)[] = [];
    let done = 0;
    while (done < bytes.byteLength) {
      const n = Math.min(this.chunkByteLength, bytes.byteLength - done);
      const staging = this.#acquireNow("upload", n);
      if (staging === undefined) break;
      refused.push(this.#uploadChunk(
        staging,
        bytes.subarray(done, done + n),
        dst,
        to + done,
      ));
      done += n;
    }
    if (done < bytes.byteLength) {
      const held = bytes.slice(done);
      for (let at = 0; at < held.byteLength;) {
        const n = Math.min(this.chunkByteLength, held.byteLength - at);
        const staging = await this.#acquire("upload", n);
        refused.push(this.#uploadChunk(
          staging,
          held.subarray(at, at + n),
          dst,
          to + done + at,
        ));
        at += n;
      }
    }
    for (const chunk of refused) {
      await this.#checkScope(chunk, bytes.byteLength, "upload");
    }
    this.#stagedUploads++;
  }

  /**
   * Writes `chunk` into mapped `staging` and submits its copy to `dst`;
   * returns what the device's validation scope around the copy said.
   */
  #uploadChunk(
    staging: GPUBuffer,
    chunk: Uint8Array,
    dst: GpuBinding,
    to: number,
  ): Promise<GPUError | null> | undefined {
    const n = chunk.byteLength;
    const scope = this.#scope();
    let refused: Promise<GPUError | null> | undefined;
    try {
      new Uint8Array(staging.getMappedRange(0, n)).set(chunk);
      staging.unmap();
      const encoder = this.gpuDevice.createCommandEncoder({
        label: `${this.#label}:upload`,
      });
      encoder.copyBufferToBuffer(staging, 0, dst.buffer, to, n);
      this.gpuDevice.queue.submit([encoder.finish()]);
    } catch (error) {
      this.#discard(staging);
      throw error;
    } finally {
      refused = scope?.();
    }
    // Re-map in the background: the map completes once the copy is done.
    this.#remap(staging);
    return refused;
  }

  /**
   * Reads `byteLength` bytes of `src` from `byteOffset`: the bytes left by
   * the work submitted before the call (the copy is submitted during the
   * call, so the range may be freed or rewritten once `download` returns).
   * Every download has its own staging buffers, so many can be in flight
   * at once.
   *
   * @param src The source range (a `COPY_SRC` buffer).
   * @param options Byte offset and length in `src`.
   * @returns A new array with the bytes.
   * @throws {InvalidArgumentError} When the range leaves `src`.
   * @throws {DeviceLostError} When the device was lost.
   * @throws {GpuStagingError} When mapping a staging buffer failed on a
   * device that was not lost, or the device refused the copy from `src` (a
   * destroyed buffer, say); the device's error is its `cause`.
   */
  async download(
    src: GpuBinding,
    options?: DownloadOptions,
  ): Promise<Uint8Array<ArrayBuffer>> {
    const what = "download";
    this.#checkOpen(what);
    src = validateBinding(this.gpuDevice, src, { what, storage: false });
    options = _checkOptions(
      options,
      "options",
      ["byteOffset", "byteLength"],
      "GpuStaging.download()",
    );
    const byteOffset = validateInteger(
      optionOr(options.byteOffset, 0),
      0,
      src.size,
      "byteOffset",
    );
    const byteLength = validateInteger(
      optionOr(options.byteLength, src.size - byteOffset),
      0,
      src.size - byteOffset,
      "byteLength",
    );
    const out = new Uint8Array(byteLength);
    if (byteLength === 0) return out;
    let buffer = src.buffer;
    let from = src.offset + byteOffset;
    if (from % 4 !== 0) {
      _requireStorage(buffer, "download", "an unaligned range");
    }
    let temp: GPUBuffer | undefined;
    if (from % 4 !== 0) {
      // copyBufferToBuffer needs 4-byte offsets: move the bytes first.
      temp = this.#temporary("download", {
        label: `${this.#label}:unaligned-download`,
        size: alignUp(byteLength, 4),
        usage: _Usage.STORAGE | _Usage.COPY_SRC |
          _Usage.COPY_DST,
      });
      try {
        GpuKernels.of(this.gpuDevice).copyBytes(src, {
          buffer: temp,
          offset: 0,
          size: temp.size,
        }, { srcByteOffset: byteOffset, byteLength });
      } catch (error) {
        this.#destroyTemporary(temp);
        throw error;
      }
      buffer = temp;
      from = 0;
    }
    let rest: GPUBuffer | undefined;
    let restRefused: Promise<GPUError | null> | undefined;
    try {
      // The copies are submitted now, where staging buffers are at hand:
      // the download reads the bytes of the work submitted before the call,
      // not those of work submitted after it (a range freed and handed to
      // another allocation right after the call).
      const chunks: Promise<void>[] = [];
      let done = 0;
      for (; done < byteLength; done += this.chunkByteLength) {
        const n = Math.min(this.chunkByteLength, byteLength - done);
        const staging = this.#acquireNow("download", n);
        if (staging === undefined) break;
        chunks.push(
          this.#downloadChunk(buffer, from + done, out, done, n, staging),
        );
      }
      if (done < byteLength) {
        let at = from + done;
        if (temp === undefined) {
          // no staging room for the rest now: copy it aside first
          try {
            ({ buffer: rest, refused: restRefused } = this.#snapshot(
              buffer,
              at,
              byteLength - done,
            ));
          } catch (error) {
            await Promise.allSettled(chunks);
            throw error;
          }
          buffer = rest;
          at = 0;
        }
        for (
          let off = 0;
          done + off < byteLength;
          off += this.chunkByteLength
        ) {
          const n = Math.min(this.chunkByteLength, byteLength - done - off);
          chunks.push(
            this.#downloadChunk(buffer, at + off, out, done + off, n),
          );
        }
      }
      await Promise.all(chunks);
      await this.#checkScope(restRefused, byteLength);
    } finally {
      if (temp !== undefined) this.#destroyTemporary(temp);
      if (rest !== undefined) this.#destroyTemporary(rest);
    }
    this.#downloads++;
    return out;
  }

  /** Destroys idle staging buffers; busy ones are destroyed when they return. */
  release(): void {
    this.#drop(false);
  }

  /** Same as {@linkcode GpuStaging.release}. */
  [Symbol.dispose](): void {
    this.release();
  }

  async #downloadChunk(
    buffer: GPUBuffer,
    from: number,
    out: Uint8Array,
    at: number,
    n: number,
    given?: GPUBuffer,
  ): Promise<void> {
    const size = alignUp(n, 4);
    const staging = given ?? await this.#acquire("download", size);
    let refused: Promise<GPUError | null> | undefined;
    try {
      // a source the device refuses (destroyed, say) leaves the staging
      // bytes as they were: the scope tells, and the download rejects
      const scope = this.#scope();
      try {
        const encoder = this.gpuDevice.createCommandEncoder({
          label: `${this.#label}:download`,
        });
        // Reading past `n` up to a 4-byte boundary stays inside the buffer,
        // whose size is a multiple of 4 for every mappable or storage buffer.
        const copy = Math.min(size, buffer.size - from);
        encoder.copyBufferToBuffer(buffer, from, staging, 0, copy - (copy % 4));
        if (copy % 4 !== 0) {
          throw new InvalidArgumentError(
            `Cannot download: the source buffer's size ${buffer.size} is not a multiple of 4`,
            { name: "size", value: buffer.size, limit: 4 },
          );
        }
        this.gpuDevice.queue.submit([encoder.finish()]);
      } finally {
        refused = scope?.();
      }
      try {
        await staging.mapAsync(_MapMode.READ, 0, size);
        // a device lost after the map completed refuses the range
        out.set(new Uint8Array(staging.getMappedRange(0, size), 0, n), at);
      } catch (error) {
        throw await this.#explain(error, "download", n);
      }
    } catch (error) {
      this.#discard(staging);
      throw error;
    }
    try {
      staging.unmap();
      this.#giveBack("download", staging);
    } catch {
      // the bytes were read; a device lost since refuses the unmap
      this.#discard(staging);
    }
    await this.#checkScope(refused, n);
  }

  /**
   * Opens a validation error scope on the device when it has error scopes;
   * returns what closes it.
   */
  #scope(): (() => Promise<GPUError | null>) | undefined {
    const device = this.gpuDevice;
    if (
      typeof device.pushErrorScope !== "function" ||
      typeof device.popErrorScope !== "function"
    ) {
      return undefined;
    }
    device.pushErrorScope("validation");
    // (a lost device may refuse the pop: it says so elsewhere)
    return () => {
      try {
        return Promise.resolve(device.popErrorScope()).catch(() => null);
      } catch {
        return Promise.resolve(null);
      }
    };
  }

  /** Rejects with a GpuStagingError when the device refused a copy. */
  async #checkScope(
    refused: Promise<GPUError | null> | undefined,
    byteLength: number,
    operation: "upload" | "download" = "download",
  ): Promise<void> {
    const error = await refused;
    if (error === null || error === undefined) return;
    const which = operation === "download"
      ? "from the source buffer (destroyed, or without COPY_SRC usage?)"
      : "into the destination buffer (destroyed, or without COPY_DST usage?)";
    throw new GpuStagingError(
      `Cannot ${operation} ${byteLength} bytes: the device refused the copy ${which}: ${
        _messageOf(error)
      }`,
      { operation, byteLength, cause: error },
    );
  }

  async #uploadUnaligned(
    dst: GpuBinding,
    bytes: Uint8Array,
    byteOffset: number,
  ): Promise<void> {
    const temp = this.#temporary("upload", {
      label: `${this.#label}:unaligned-upload`,
      size: alignUp(bytes.byteLength, 4),
      usage: _Usage.STORAGE | _Usage.COPY_SRC |
        _Usage.COPY_DST,
    });
    try {
      const padded = new Uint8Array(temp.size);
      padded.set(bytes);
      await this.upload({ buffer: temp, offset: 0, size: temp.size }, padded);
      GpuKernels.of(this.gpuDevice).copyBytes(
        { buffer: temp, offset: 0, size: temp.size },
        dst,
        { dstByteOffset: byteOffset, byteLength: bytes.byteLength },
      );
    } finally {
      // WebGPU keeps the memory until the submitted copy is done.
      this.#destroyTemporary(temp);
    }
  }

  /**
   * A failed map on a device being lost becomes a DeviceLostError; any other
   * failure a GpuStagingError with the device's error as its cause.
   */
  async #explain(
    error: unknown,
    what: "download",
    byteLength: number,
  ): Promise<unknown> {
    const device = this.gpuDevice;
    let timer: ReturnType<typeof setTimeout> | undefined;
    // device.lost may resolve a moment after the map is refused.
    await Promise.race([
      device.lost,
      new Promise((resolve) => (timer = setTimeout(resolve, 10))),
    ]);
    clearTimeout(timer);
    await Promise.resolve();
    const state = _deviceState(device);
    if (state.lost) return _lostError(device, state, what);
    return new GpuStagingError(
      `Cannot ${what} ${byteLength} bytes: mapping a staging buffer failed: ${
        _messageOf(error)
      }`,
      { operation: what, byteLength, cause: error },
    );
  }

  #checkOpen(what: string): void {
    _assertAlive(this.gpuDevice, what);
  }

  /**
   * A staging buffer for `byteLength` bytes if one is idle or the bound
   * allows a new one now; `undefined` otherwise, or where `#acquire` would
   * throw (it says why).
   */
  #acquireNow(kind: _Kind, byteLength: number): GPUBuffer | undefined {
    try {
      return this.#take(kind, this.#bucket(byteLength));
    } catch {
      return undefined;
    }
  }

  #bucket(byteLength: number): number {
    const size = Math.max(
      MIN_STAGING,
      Math.min(this.chunkByteLength, 2 ** Math.ceil(Math.log2(byteLength))),
    );
    return Math.max(size, alignUp(byteLength, 4));
  }

  /**
   * Copies `byteLength` bytes of `buffer` from 4-aligned `from` into a new
   * buffer, submitted now.
   */
  #snapshot(
    buffer: GPUBuffer,
    from: number,
    byteLength: number,
  ): { buffer: GPUBuffer; refused: Promise<GPUError | null> | undefined } {
    const size = alignUp(byteLength, 4);
    const copy = Math.min(size, buffer.size - from);
    if (copy % 4 !== 0) {
      throw new InvalidArgumentError(
        `Cannot download: the source buffer's size ${buffer.size} is not a multiple of 4`,
        { name: "size", value: buffer.size, limit: 4 },
      );
    }
    const temp = this.#temporary("download", {
      label: `${this.#label}:download-rest`,
      size,
      usage: _Usage.COPY_SRC | _Usage.COPY_DST,
    });
    const scope = this.#scope();
    try {
      const encoder = this.gpuDevice.createCommandEncoder({
        label: `${this.#label}:download-rest`,
      });
      encoder.copyBufferToBuffer(buffer, from, temp, 0, copy);
      this.gpuDevice.queue.submit([encoder.finish()]);
    } catch (error) {
      this.#destroyTemporary(temp);
      void scope?.();
      throw error;
    }
    return { buffer: temp, refused: scope?.() };
  }

  /**
   * A buffer outside the pool, counted in `temporaryBytes` until destroyed;
   * one of another size than asked (a lying device) is destroyed and refused
   * before it is counted.
   */
  #temporary(what: string, descriptor: GPUBufferDescriptor): GPUBuffer {
    const buffer = this.gpuDevice.createBuffer(descriptor);
    if (buffer.size !== descriptor.size) {
      const size = buffer.size;
      try {
        buffer.destroy();
      } catch {
        // Already gone with its device.
      }
      throw new InvalidArgumentError(
        `Cannot ${what}: the device made a buffer of ${size} bytes for a request of ${descriptor.size}`,
        { name: "size", value: size, limit: descriptor.size },
      );
    }
    this.#temporaryBytes += descriptor.size;
    this.#temporarySizes.set(buffer, descriptor.size);
    if (this.#temporaryBytes > this.#peakTemporary) {
      this.#peakTemporary = this.#temporaryBytes;
    }
    return buffer;
  }

  #destroyTemporary(buffer: GPUBuffer): void {
    const size = this.#temporarySizes.get(buffer);
    if (size !== undefined) {
      this.#temporarySizes.delete(buffer);
      this.#temporaryBytes -= size;
    }
    try {
      buffer.destroy();
    } catch {
      // Already gone with its device.
    }
  }

  async #acquire(kind: _Kind, byteLength: number): Promise<GPUBuffer> {
    const bucket = this.#bucket(byteLength);
    for (;;) {
      const buffer = this.#take(kind, bucket);
      if (buffer !== undefined) return buffer;
      await new Promise<void>((resolve, reject) =>
        this.#waiters.push({ resolve, reject })
      );
    }
  }

  /** An idle buffer of `bucket` bytes, a new one, or `undefined` (full). */
  #take(kind: _Kind, bucket: number): GPUBuffer | undefined {
    const key = `${kind}:${bucket}`;
    const state = _deviceState(this.gpuDevice);
    if (state.lost) throw _lostError(this.gpuDevice, state, kind);
    const idle = this.#idle.get(key);
    if (idle !== undefined && idle.length > 0) {
      this.#idleCount--;
      return idle.pop()!;
    }
    if (this.#reservedBytes + bucket > this.maxStagingBytes) {
      this.#evictIdle(this.#reservedBytes + bucket - this.maxStagingBytes);
    }
    if (this.#reservedBytes + bucket <= this.maxStagingBytes) {
      const buffer = this.gpuDevice.createBuffer({
        label: `${this.#label}:${kind}#${this.#created + 1}`,
        size: bucket,
        usage: kind === "upload"
          ? _Usage.MAP_WRITE | _Usage.COPY_SRC
          : _Usage.MAP_READ | _Usage.COPY_DST,
        mappedAtCreation: kind === "upload",
      });
      if (buffer.size !== bucket) {
        // A device that lies about its buffers would break the figures.
        buffer.destroy();
        throw new InvalidArgumentError(
          `Cannot ${kind}: the device made a staging buffer of ${buffer.size} bytes for a request of ${bucket}`,
          { name: "size", value: buffer.size, limit: bucket },
        );
      }
      this.#created++;
      this.#live.add(buffer);
      this.#reservedBytes += bucket;
      if (this.#reservedBytes > this.#peak) this.#peak = this.#reservedBytes;
      return buffer;
    }
    return undefined;
  }

  #remap(staging: GPUBuffer): void {
    let mapped: Promise<undefined>;
    try {
      mapped = staging.mapAsync(_MapMode.WRITE);
    } catch {
      // a map that throws at once: the buffer was counted live forever,
      // and enough of them starved every later upload
      this.#discard(staging);
      return;
    }
    Promise.resolve(mapped).then(
      () => this.#giveBack("upload", staging),
      () => this.#discard(staging),
    );
  }

  #giveBack(kind: _Kind, buffer: GPUBuffer): void {
    if (this.#closed || !this.#live.has(buffer)) {
      this.#discard(buffer);
      return;
    }
    const key = `${kind}:${buffer.size}`;
    let idle = this.#idle.get(key);
    if (idle === undefined) {
      idle = [];
      this.#idle.set(key, idle);
    }
    idle.push(buffer);
    this.#idleCount++;
    this.#wake();
  }

  #discard(buffer: GPUBuffer): void {
    if (this.#live.delete(buffer)) this.#reservedBytes -= buffer.size;
    try {
      buffer.destroy();
    } catch {
      // Already gone with its device.
    }
    this.#wake();
  }

  #evictIdle(bytes: number): void {
    for (const [key, idle] of this.#idle) {
      while (idle.length > 0 && bytes > 0) {
        const buffer = idle.pop()!;
        this.#idleCount--;
        bytes -= buffer.size;
        if (this.#live.delete(buffer)) this.#reservedBytes -= buffer.size;
        buffer.destroy();
      }
      if (idle.length === 0) this.#idle.delete(key);
      if (bytes <= 0) return;
    }
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const waiter of waiters) waiter.resolve();
  }

  #drop(lost: boolean): void {
    for (const idle of this.#idle.values()) {
      for (const buffer of idle) {
        if (this.#live.delete(buffer)) this.#reservedBytes -= buffer.size;
        try {
          buffer.destroy();
        } catch {
          // Already gone with its device.
        }
      }
    }
    this.#idle.clear();
    this.#idleCount = 0;
    if (lost) {
      this.#closed = true;
      const state = _deviceState(this.gpuDevice);
      const waiters = this.#waiters;
      this.#waiters = [];
      for (const waiter of waiters) {
        waiter.reject(_lostError(this.gpuDevice, state, "stage"));
      }
    }
  }
}

/** Refuses `buffer` without STORAGE usage, which an unaligned copy needs. */
function _requireStorage(buffer: GPUBuffer, what: string, range: string): void {
  if ((buffer.usage & _Usage.STORAGE) === 0) {
    throw new InvalidArgumentError(
      `Cannot ${what} ${range}: buffer ${
        JSON.stringify(buffer.label)
      } lacks STORAGE usage (has ${buffer.usage}), which the byte copy kernel needs; align offset and length to 4`,
      { name: "usage", value: buffer.usage, limit: "STORAGE" },
    );
  }
}

/** The message of a thrown value, read without running its code. */
function _messageOf(error: unknown): string {
  if (error instanceof Error) {
    const own = Object.getOwnPropertyDescriptor(error, "message");
    if (own !== undefined && typeof own.value === "string") return own.value;
  }
  if (typeof DOMException !== "undefined" && error instanceof DOMException) {
    try {
      return `${error.name}: ${error.message}`;
    } catch {
      // a subclass with throwing getters
    }
  }
  return describeValue(error);
}
