/**
 * {@linkcode GpuKernels}: the copy kernels of the WebGPU layer: strided to
 * contiguous, byte copy with arbitrary offsets, and fill.
 *
 * @module
 */

import {
  _checkDevice,
  _checkLabel,
  _checkLimits,
  _checkOptions,
} from "./_validate_gpu.ts";
import { _Usage } from "./_flags.ts";
import {
  alignUp,
  AllotError,
  describeValue,
  findStridedAlias,
  InvalidArgumentError,
  optionOr,
  UnsupportedOperationError,
  validateInteger,
  validateObject,
} from "@allot/core";
import { _assertAlive, _onDeviceLost } from "./_device_state.ts";
import { dtypeByteSize, encodeElement, type GpuDtype } from "./dtype.ts";
import { type GpuBinding, validateBinding } from "./gpu_binding.ts";
import { dispatchSize, type Kernel, kernelPipeline } from "./kernel.ts";
import { _blockPlan } from "./_block_plan.ts";
import {
  _span,
  _splitRun,
  _splitStrided,
  _wordOwned,
  MAX_PIECES,
} from "./_kernel_pieces.ts";
import {
  _blockTransposeKernel,
  _copyBytesKernel,
  _fillKernel,
  _sourceWritable,
  _stridedKernel,
  ELEMENTS_PER_INVOCATION,
  MAX_RANK,
  META_WORDS,
  WORDS_PER_INVOCATION,
} from "./_wgsl.ts";

export { MAX_PIECES, MAX_RANK };

/** A strided view of elements: shape, strides and offset, in elements. */
export interface StridedLayout {
  /** Extent of each dimension. */
  readonly shape: readonly number[];
  /** Element step of each dimension; may be 0 (broadcast) or negative. */
  readonly strides: readonly number[];
  /** Element index of the view's first element. */
  readonly offset: number;
}

/** Options of {@linkcode GpuKernels.contiguous}. */
export interface ContiguousOptions {
  /** Element type of both ranges. */
  dtype: GpuDtype;
  /**
   * Element offset of the output in `dst`.
   *
   * @default {0}
   */
  dstOffset?: number;
}

/** Options of {@linkcode GpuKernels.copyBytes}. */
export interface CopyBytesOptions {
  /**
   * Byte offset in `src`.
   *
   * @default {0}
   */
  srcByteOffset?: number;
  /**
   * Byte offset in `dst`.
   *
   * @default {0}
   */
  dstByteOffset?: number;
  /**
   * Bytes to copy.
   *
   * @default {the most both ranges hold past their offsets}
   */
  byteLength?: number;
}

/** Options of {@linkcode GpuKernels.fill}. */
export interface FillOptions {
  /** Element type of the range. */
  dtype: GpuDtype;
  /**
   * First element to fill.
   *
   * @default {0}
   */
  offset?: number;
  /**
   * Elements to fill.
   *
   * @default {every element from `offset` to the end of `dst`}
   */
  length?: number;
}

/** Options of {@linkcode GpuKernels}. */
export interface GpuKernelsOptions {
  /**
   * Prefix of the labels of command encoders and bind groups.
   *
   * @default {"allot"}
   */
  label?: string;
  /**
   * Invocations per workgroup, clamped to the device's limits.
   *
   * @default {256}
   */
  workgroupSize?: number;
  /**
   * Most bytes one storage binding of a dispatch may span, clamped to the
   * device's `maxStorageBufferBindingSize` and rounded down to a multiple
   * of 4. Views, byte ranges and fills whose bound range is wider are split
   * into pieces that each bind within it. A smaller value (at least 4)
   * forces pieces: useful to test the split without huge buffers.
   *
   * @default {the device's maxStorageBufferBindingSize}
   */
  maxBindingByteLength?: number;
}

interface _Range {
  binding: GpuBinding;
  /** Absolute byte range the kernel touches. */
  start: number;
  end: number;
}

interface _Bound {
  entries: GPUBindGroupEntry[];
  /** Byte offset of each range's binding start from its bound start. */
  shifts: number[];
  aliased: boolean;
  /** One buffer bound twice, both read-write (ranges too far apart). */
  twice: boolean;
}

/** A dispatch of a split call, waiting for the call's one submit. */
interface _Queued {
  kernel: Kernel;
  pipeline: GPUComputePipeline;
  bound: _Bound;
  meta: Uint32Array;
  x: number;
  y: number;
}

/** The keys of {@linkcode FillOptions}. */
const FILL_KEYS: readonly string[] = ["dtype", "offset", "length"];
/** Dispatches of a split call per command buffer (bounds its meta slots). */
const PIECES_PER_SUBMIT = 4096;
const kernelsByDevice = new WeakMap<GPUDevice, GpuKernels>();
/** Blocks per invocation of the block transpose, where the shape allows. */
const BLOCKS_PER_INVOCATION = 4;
const I32_MAX = 0x7fffffff;

/**
 * Copy kernels on one device. Each call validates everything, then encodes
 * and submits one command buffer, so later queue work sees its result. A
 * range wider than one binding (`maxBindingByteLength`) runs as pieces that
 * each bind within it, in that one command buffer (see the README).
 * Shapes, strides and offsets go to the shader in a storage buffer; only
 * element width, aliasing and workgroup size select a pipeline.
 *
 * Bindings may start at any byte offset that is a multiple of the element
 * size: the kernels bind from the enclosing `minStorageBufferOffsetAlignment`
 * boundary. When source and destination share a buffer, the union is bound
 * once, read-write (WebGPU forbids one buffer as read-only and writable
 * storage in one dispatch); overlapping ranges are refused.
 *
 * @example Make a transposed view contiguous
 * ```ts
 * import { GpuKernels, GpuStaging } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
 *   const a = device.createBuffer({ size: 24, usage });
 *   const b = device.createBuffer({ size: 24, usage });
 *   device.queue.writeBuffer(a, 0, new Float32Array([1, 2, 3, 4, 5, 6]));
 *   const kernels = GpuKernels.of(device);
 *   // The 2x3 matrix read as its 3x2 transpose.
 *   kernels.contiguous({ buffer: a, offset: 0, size: 24 }, { shape: [3, 2], strides: [1, 3], offset: 0 }, { buffer: b, offset: 0, size: 24 }, { dtype: "f32" });
 *   const staging = new GpuStaging(device);
 *   const bytes = await staging.download({ buffer: b, offset: 0, size: 24 });
 *   assert.deepEqual([...new Float32Array(bytes.buffer)], [1, 4, 2, 5, 3, 6]);
 *   device.destroy();
 * }
 * ```
 */
export class GpuKernels {
  /** The device the kernels run on. */
  readonly gpuDevice: GPUDevice;
  /** Invocations per workgroup. */
  readonly workgroupSize: number;
  /**
   * Most bytes one storage binding spans: wider ranges are split into
   * pieces (see {@linkcode GpuKernelsOptions.maxBindingByteLength}).
   */
  readonly maxBindingByteLength: number;
  #label: string;
  #meta: GPUBuffer | undefined;
  /** Meta slots of the pieces of a split call, one aligned slot each. */
  #pieceMeta: GPUBuffer | undefined;
  /** Dispatches of a split call, collected for one submit. */
  #batch: _Queued[] | undefined;
  #metaData = new Uint32Array(META_WORDS);
  #dispatches = 0;
  #pending = new Set<Promise<void>>();
  #failure: GpuKernelError | undefined;

  /**
   * The shared kernels of `device`, one instance per device.
   *
   * @param device The device.
   * @returns Its kernels.
   */
  static of(device: GPUDevice): GpuKernels {
    let kernels = kernelsByDevice.get(device);
    if (kernels === undefined) {
      kernels = new GpuKernels(device);
      kernelsByDevice.set(device, kernels);
    }
    return kernels;
  }

  /**
   * Creates kernels on `device`. Prefer {@linkcode GpuKernels.of}.
   *
   * @param device The device.
   * @param options Label prefix and workgroup size.
   */
  constructor(device: GPUDevice, options?: GpuKernelsOptions) {
    _checkDevice(device, "Cannot make GpuKernels");
    _checkLimits(device, "Cannot make GpuKernels", [
      "maxComputeInvocationsPerWorkgroup",
      "maxComputeWorkgroupSizeX",
      "maxStorageBufferBindingSize",
    ]);
    options = _checkOptions(options, "options", [
      "label",
      "workgroupSize",
      "maxBindingByteLength",
    ], "GpuKernels");
    const label = _checkLabel(options.label, "allot");
    const wanted = validateInteger(
      optionOr(options.workgroupSize, 256),
      1,
      2 ** 31,
      "workgroupSize",
    );
    const limits = device.limits;
    const binding = validateInteger(
      optionOr(
        options.maxBindingByteLength,
        limits.maxStorageBufferBindingSize,
      ),
      4,
      Number.MAX_SAFE_INTEGER,
      "maxBindingByteLength",
    );
    this.maxBindingByteLength =
      Math.floor(Math.min(binding, limits.maxStorageBufferBindingSize) / 4) *
      4;
    this.gpuDevice = device;
    this.#label = label;
    this.workgroupSize = Math.max(
      1,
      Math.min(
        wanted,
        limits.maxComputeInvocationsPerWorkgroup,
        limits.maxComputeWorkgroupSizeX,
      ),
    );
    _onDeviceLost(device, this, (kernels) => {
      kernels.#meta = undefined;
      kernels.#pieceMeta = undefined;
    });
  }

  /** Kernel dispatches submitted so far. */
  get dispatchCount(): number {
    return this.#dispatches;
  }

  /**
   * Copies the strided view `layout` of `src` into contiguous elements of
   * `dst`, row-major, starting at element `dstOffset`. A view that is
   * already row-major goes through {@linkcode GpuKernels.copyBytes}
   * (`copyBufferToBuffer` when aligned).
   *
   * @param src The source range; the layout's element indices count from
   * its start.
   * @param layout Shape, strides and offset of the view, in elements. Any
   * rank: above `MAX_RANK` (16), dimensions that are one run in memory are
   * folded, and what stays above runs as one dispatch per index of the
   * leading dimensions.
   * @param dst The destination range.
   * @param options Element type and destination offset.
   * @throws {InvalidArgumentError} For a bad layout, a view reaching outside
   * `src`, an output not fitting `dst`, or overlapping ranges.
   * @throws {UnsupportedOperationError} When a range wider than
   * `maxBindingByteLength` needs more than `MAX_PIECES` pieces, or one
   * element cannot bind (nothing is submitted).
   * @throws {DeviceLostError} When the device was lost.
   */
  contiguous(
    src: GpuBinding,
    layout: StridedLayout,
    dst: GpuBinding,
    options: ContiguousOptions,
  ): void {
    const what = "copy a strided view";
    _checkOptions(
      options,
      "options",
      ["dtype", "dstOffset"],
      "GpuKernels.contiguous()",
    );
    this.#anyRank(
      what,
      src,
      _layoutOf(what, layout, ""),
      dst,
      undefined,
      options,
    );
  }

  /**
   * Copies the strided view `srcLayout` of `src` into the strided view
   * `dstLayout` of `dst`, element for element in row-major logical order.
   * Both layouts must have the same shape; the destination must not be a
   * broadcast view (a stride of 0 over more than one element) and must not
   * overlap the source. A destination whose elements alias through strides
   * that are not 0 (shape `[2, 2]`, strides `[1, 1]`: invocations running in
   * parallel would leave either value) is refused the same way, naming two
   * indices that reach one element. A contiguous destination at any offset
   * takes the faster {@linkcode GpuKernels.contiguous} path; 1- and 2-byte
   * elements scattered to a strided destination use atomic word updates.
   *
   * @param src The source range.
   * @param srcLayout The source view, in elements from `src`'s start.
   * @param dst The destination range.
   * @param dstLayout The destination view, in elements from `dst`'s start.
   * @param dtype Element type of both views.
   * @throws {InvalidArgumentError} For bad or mismatched layouts, views
   * reaching outside their bindings, a destination whose elements alias (a
   * broadcast view or strides such as `[1, 1]`), or overlap.
   * @throws {UnsupportedOperationError} When a range wider than
   * `maxBindingByteLength` needs more than `MAX_PIECES` pieces, or one
   * element cannot bind (nothing is submitted).
   * @throws {DeviceLostError} When the device was lost.
   */
  copyStrided(
    src: GpuBinding,
    srcLayout: StridedLayout,
    dst: GpuBinding,
    dstLayout: StridedLayout,
    dtype: GpuDtype,
  ): void {
    const what = "copy between strided views";
    srcLayout = _layoutOf(what, srcLayout, "");
    dstLayout = _layoutOf(what, dstLayout, "destination ");
    const shape = srcLayout.shape;
    const dstShape = dstLayout.shape;
    if (
      dstShape.length !== shape.length ||
      dstShape.some((n, d) => n !== shape[d])
    ) {
      throw new InvalidArgumentError(
        `Cannot ${what}: shapes differ, source [${shape}] and destination [${dstShape}]`,
        { name: "dstLayout", value: [...dstShape], limit: [...shape] },
      );
    }
    if (_isRowMajor(dstLayout)) {
      this.#anyRank(what, src, srcLayout, dst, undefined, {
        dtype,
        dstOffset: dstLayout.offset,
      });
    } else {
      this.#anyRank(what, src, srcLayout, dst, dstLayout, { dtype });
    }
  }

  /**
   * Views of any rank (storage allows 64): folds dimensions that are one
   * run in memory on both sides; when the rank is still above `MAX_RANK`,
   * validates the whole copy first, then runs one dispatch per index of the
   * leading dimensions.
   */
  #anyRank(
    what: string,
    src: GpuBinding,
    layout: StridedLayout,
    dst: GpuBinding,
    dstLayout: StridedLayout | undefined,
    options: ContiguousOptions,
  ): void {
    if (!Array.isArray(layout?.shape) || layout.shape.length <= MAX_RANK) {
      this.#strided(what, src, layout, dst, dstLayout, options);
      return;
    }
    _assertAlive(this.gpuDevice, what);
    this.#throwFailure();
    // read once: every dispatch below uses the dtype validated here
    const dtype = options?.dtype;
    const size = dtypeByteSize(dtype);
    src = this.#checkBinding(src, what, size);
    dst = this.#checkBinding(dst, what, size);
    // validate the whole copy before anything is dispatched
    const source = _reach(what, layout, "", src.size / size, 64);
    const dstOffset = dstLayout === undefined
      ? validateInteger(
        optionOr(options.dstOffset, 0),
        0,
        0xffffffff,
        "dstOffset",
      )
      : dstLayout.offset;
    const target = dstLayout === undefined
      ? { lo: dstOffset, hi: dstOffset + source.count - 1 }
      : _reach(what, dstLayout, "destination ", dst.size / size, 64);
    if (dstLayout !== undefined) _refuseAliasing(what, dstLayout);
    const dstElements = Math.floor(dst.size / size);
    if (source.count > 0 && target.hi >= dstElements) {
      throw new InvalidArgumentError(
        `Cannot ${what}: ${source.count} elements at offset ${dstOffset} do not fit the destination of ${dstElements} elements`,
        { name: "dstOffset", value: target.hi + 1, limit: dstElements },
      );
    }
    if (source.count === 0) return;
    _refuseOverlap(what, src, dst, size, source, target);
    const denseDst = dstLayout === undefined
      ? _rowMajorStrides(layout.shape)
      : dstLayout.strides;
    const folded = _fold(layout.shape, layout.strides, denseDst);
    const lead = Math.max(0, folded.shape.length - MAX_RANK);
    const inner = {
      shape: folded.shape.slice(lead),
      srcStrides: folded.a.slice(lead),
      dstStrides: folded.b.slice(lead),
    };
    const index = new Array<number>(lead).fill(0);
    for (;;) {
      let srcOffset = layout.offset;
      let dstAt = dstOffset;
      for (let d = 0; d < lead; d++) {
        srcOffset += index[d] * folded.a[d];
        dstAt += index[d] * folded.b[d];
      }
      const innerSrc = {
        shape: inner.shape,
        strides: inner.srcStrides,
        offset: srcOffset,
      };
      if (dstLayout === undefined) {
        this.#strided(what, src, innerSrc, dst, undefined, {
          dtype,
          dstOffset: dstAt,
        });
      } else {
        this.#strided(what, src, innerSrc, dst, {
          shape: inner.shape,
          strides: inner.dstStrides,
          offset: dstAt,
        }, { dtype });
      }
      let d = lead - 1;
      while (d >= 0 && ++index[d] === folded.shape[d]) index[d--] = 0;
      if (d < 0) break;
    }
  }

  #strided(
    what: string,
    src: GpuBinding,
    layout: StridedLayout,
    dst: GpuBinding,
    dstLayout: StridedLayout | undefined,
    options: ContiguousOptions,
  ): void {
    _assertAlive(this.gpuDevice, what);
    this.#throwFailure();
    const dtype = options?.dtype;
    const size = dtypeByteSize(dtype);
    src = this.#checkBinding(src, what, size);
    dst = this.#checkBinding(dst, what, size);
    const source = _reach(what, layout, "", src.size / size);
    const count = source.count;
    let dstOffset: number;
    let target: { lo: number; hi: number };
    if (dstLayout === undefined) {
      dstOffset = validateInteger(
        optionOr(options.dstOffset, 0),
        0,
        0xffffffff,
        "dstOffset",
      );
      const dstElements = Math.floor(dst.size / size);
      if (count > 0 && dstOffset + count > dstElements) {
        throw new InvalidArgumentError(
          `Cannot ${what}: ${count} elements at offset ${dstOffset} do not fit the destination of ${dstElements} elements`,
          { name: "dstOffset", value: dstOffset + count, limit: dstElements },
        );
      }
      target = { lo: dstOffset, hi: dstOffset + count - 1 };
    } else {
      const reach = _reach(what, dstLayout, "destination ", dst.size / size);
      dstLayout.shape.forEach((n, d) => {
        if (n > 1 && dstLayout.strides[d] === 0) {
          throw new InvalidArgumentError(
            `Cannot ${what}: the destination is a broadcast view (stride 0 over ${n} elements in dimension ${d})`,
            { name: `dstLayout.strides[${d}]`, value: 0, limit: "non-zero" },
          );
        }
      });
      _refuseAliasing(what, dstLayout);
      dstOffset = dstLayout.offset;
      target = reach;
    }
    if (count === 0) return;
    const [srcStart, srcEnd, dstStart, dstEnd] = _refuseOverlap(
      what,
      src,
      dst,
      size,
      source,
      target,
    );
    if (dstLayout === undefined && _isRowMajor(layout)) {
      // Dense on both sides: a byte copy (copyBufferToBuffer when aligned).
      this.copyBytes(src, dst, {
        srcByteOffset: layout.offset * size,
        dstByteOffset: dstOffset * size,
        byteLength: count * size,
      });
      return;
    }
    if (
      this.#fits([
        { binding: src, start: srcStart, end: srcEnd },
        { binding: dst, start: dstStart, end: dstEnd },
      ])
    ) {
      this.#stridedPiece(
        what,
        src,
        layout,
        dst,
        dstLayout,
        dstOffset,
        source,
        size,
      );
      return;
    }
    this.#stridedPieces(what, src, layout, dst, dstLayout, dstOffset, size);
  }

  /**
   * A view whose bound ranges exceed the binding limit: split into boxes of
   * the iteration space that each fit (see `_splitStrided`), all planned
   * before the first is dispatched, so a refused split submits nothing.
   */
  #stridedPieces(
    what: string,
    src: GpuBinding,
    layout: StridedLayout,
    dst: GpuBinding,
    dstLayout: StridedLayout | undefined,
    dstOffset: number,
    size: 1 | 2 | 4 | 8,
  ): void {
    const shape = layout.shape;
    const dstStrides = dstLayout?.strides ?? _rowMajorStrides(shape);
    const limit = this.maxBindingByteLength;
    const align = this.gpuDevice.limits.minStorageBufferOffsetAlignment;
    const result = _splitStrided({
      shape,
      srcStrides: layout.strides,
      dstStrides,
      srcOffset: layout.offset,
      dstOffset,
      budget: Math.floor((limit - align - 4) / size),
      maxPieces: MAX_PIECES,
      dstUnit: 4 / size,
      fits: (sLo, sHi, dLo, dHi) =>
        this.#fits([
          {
            binding: src,
            start: src.offset + sLo * size,
            end: src.offset + (sHi + 1) * size,
          },
          {
            binding: dst,
            start: dst.offset + dLo * size,
            end: dst.offset + (dHi + 1) * size,
          },
        ]),
    });
    if ("refused" in result) {
      throw new UnsupportedOperationError(
        result.refused === "element"
          ? `Cannot ${what}: one element (${size} bytes; with the source and destination in one buffer, the span between them) does not bind within ${limit} bytes (maxBindingByteLength, at most maxStorageBufferBindingSize ${this.gpuDevice.limits.maxStorageBufferBindingSize})`
          : `Cannot ${what}: the view needs more than ${MAX_PIECES} pieces of at most ${limit} bytes (maxBindingByteLength) each`,
      );
    }
    this.#inPieces(() => {
      for (const piece of result.pieces) {
        const pieceSrc = {
          shape: piece.shape,
          strides: layout.strides,
          offset: piece.srcOffset,
        };
        const [lo, hi] = _span(piece.shape, layout.strides, piece.srcOffset);
        const count = piece.shape.reduce((a, b) => a * b, 1);
        const pieceDst = {
          shape: piece.shape,
          strides: dstStrides,
          offset: piece.dstOffset,
        };
        if (dstLayout === undefined && _isRowMajor(pieceDst)) {
          this.#stridedPiece(
            what,
            src,
            pieceSrc,
            dst,
            undefined,
            piece.dstOffset,
            { count, lo, hi },
            size,
            true,
          );
        } else {
          this.#stridedPiece(
            what,
            src,
            pieceSrc,
            dst,
            pieceDst,
            piece.dstOffset,
            { count, lo, hi },
            size,
            true,
          );
        }
      }
    });
  }

  /** One dispatch of a view whose bound ranges fit the binding limit. */
  #stridedPiece(
    what: string,
    src: GpuBinding,
    layout: StridedLayout,
    dst: GpuBinding,
    dstLayout: StridedLayout | undefined,
    dstOffset: number,
    source: { count: number; lo: number; hi: number },
    size: 1 | 2 | 4 | 8,
    piece = false,
  ): void {
    const count = source.count;
    const target = dstLayout === undefined
      ? [dstOffset, dstOffset + count - 1]
      : _span(dstLayout.shape, dstLayout.strides, dstLayout.offset);
    const bound = this.#bind(what, [
      {
        binding: src,
        start: src.offset + source.lo * size,
        end: src.offset + (source.hi + 1) * size,
      },
      {
        binding: dst,
        start: dst.offset + target[0] * size,
        end: dst.offset + (target[1] + 1) * size,
      },
    ]);
    const srcBase = bound.shifts[0] / size + layout.offset;
    const dstBase = bound.shifts[1] / size + dstOffset;
    if (
      dstLayout === undefined &&
      this.#blockTranspose(bound, layout, srcBase, dstBase, size)
    ) return;
    let invocations = Math.ceil(count / ELEMENTS_PER_INVOCATION);
    if (size < 4 && dstLayout === undefined) {
      const per = 4 / size;
      const words = Math.floor((dstBase + count - 1) / per) -
        Math.floor(dstBase / per) + 1;
      invocations = Math.ceil(words / WORDS_PER_INVOCATION);
    }
    const meta = this.#metaData;
    meta.fill(0);
    meta[0] = invocations;
    meta[1] = count;
    meta[2] = layout.shape.length;
    meta[3] = srcBase;
    meta[4] = dstBase;
    for (let d = 0; d < layout.shape.length; d++) {
      meta[8 + d] = layout.shape[d];
      meta[8 + MAX_RANK + d] = layout.strides[d] >>> 0;
      if (dstLayout !== undefined) {
        meta[8 + 2 * MAX_RANK + d] = dstLayout.strides[d] >>> 0;
      }
    }
    const kernel = _stridedKernel(
      size,
      bound.aliased,
      dstLayout !== undefined,
      this.workgroupSize,
      piece && dstLayout !== undefined && size < 4 &&
        _wordOwned(dstLayout, dstBase, size, ELEMENTS_PER_INVOCATION),
    );
    this.#dispatch(kernel, bound, invocations);
  }

  /**
   * Runs a transpose as whole 16-byte blocks when the view allows it (see
   * `_blockPlan`) and both bindings start on a 16-byte boundary.
   *
   * @returns `false`, having done nothing, when it does not apply.
   */
  #blockTranspose(
    bound: _Bound,
    layout: StridedLayout,
    srcBase: number,
    dstBase: number,
    size: number,
  ): boolean {
    for (const entry of bound.entries) {
      if ((entry.resource as GPUBufferBinding).offset! % 16 !== 0) {
        return false;
      }
    }
    // several blocks per invocation where the last dimension allows: one
    // index decomposition for all (about 1.3x faster on llvmpipe)
    let blocks = BLOCKS_PER_INVOCATION;
    let plan = _blockPlan(
      layout.shape,
      layout.strides,
      srcBase,
      dstBase,
      size,
      blocks,
    );
    if (plan === undefined) {
      blocks = 1;
      plan = _blockPlan(layout.shape, layout.strides, srcBase, dstBase, size);
    }
    if (plan === undefined) return false;
    const meta = this.#metaData;
    meta.fill(0);
    meta[0] = plan.invocations;
    meta[1] = plan.blockCols;
    meta[2] = plan.blockRows;
    meta[3] = plan.srcBase >>> 0;
    meta[4] = plan.dstBase;
    meta[5] = plan.otherShape.length;
    meta[6] = plan.srcColStride >>> 0;
    meta[7] = plan.dstRowStride;
    plan.otherShape.forEach((n, d) => {
      meta[8 + d] = n;
      meta[8 + MAX_RANK + d] = plan.otherSrc[d] >>> 0;
      meta[8 + 2 * MAX_RANK + d] = plan.otherDst[d];
    });
    const kernel = _blockTransposeKernel(
      size as 2 | 4 | 8,
      bound.aliased,
      this.workgroupSize,
      blocks,
    );
    this.#dispatch(kernel, bound, plan.invocations);
    return true;
  }

  /**
   * Copies `byteLength` bytes between two ranges at any byte offsets. When
   * the buffers differ and every offset and the length are multiples of 4,
   * this is one `copyBufferToBuffer` (which WebGPU refuses within one
   * buffer); otherwise a kernel moves the bytes and leaves the
   * other bytes of partly covered words as they were.
   *
   * @param src The source range.
   * @param dst The destination range.
   * @param options Byte offsets in each range and the length.
   * @throws {InvalidArgumentError} For ranges outside their bindings, or
   * overlapping ranges of one buffer.
   * @throws {UnsupportedOperationError} When a range wider than
   * `maxBindingByteLength` needs more than `MAX_PIECES` pieces, or one
   * element cannot bind (nothing is submitted).
   * @throws {DeviceLostError} When the device was lost.
   */
  copyBytes(
    src: GpuBinding,
    dst: GpuBinding,
    options?: CopyBytesOptions,
  ): void {
    const what = "copy bytes";
    options = _checkOptions(options, "options", [
      "srcByteOffset",
      "dstByteOffset",
      "byteLength",
    ], "GpuKernels.copyBytes()");
    _assertAlive(this.gpuDevice, what);
    this.#throwFailure();
    src = this.#checkBinding(src, what, 1);
    dst = this.#checkBinding(dst, what, 1);
    const srcByteOffset = validateInteger(
      optionOr(options.srcByteOffset, 0),
      0,
      src.size,
      "srcByteOffset",
    );
    const dstByteOffset = validateInteger(
      optionOr(options.dstByteOffset, 0),
      0,
      dst.size,
      "dstByteOffset",
    );
    const most = Math.min(src.size - srcByteOffset, dst.size - dstByteOffset);
    const byteLength = validateInteger(
      optionOr(options.byteLength, most),
      0,
      most,
      "byteLength",
    );
    if (byteLength === 0) return;
    const from = src.offset + srcByteOffset;
    const to = dst.offset + dstByteOffset;
    if (
      src.buffer === dst.buffer && from < to + byteLength &&
      to < from + byteLength
    ) {
      throw new InvalidArgumentError(
        `Cannot ${what}: source [${from}, ${
          from + byteLength
        }) and destination [${to}, ${to + byteLength}) overlap in one buffer`,
        { name: "dstByteOffset", value: dstByteOffset, limit: "no overlap" },
      );
    }
    if (
      src.buffer !== dst.buffer && from % 4 === 0 && to % 4 === 0 &&
      byteLength % 4 === 0
    ) {
      this.#require(src.buffer, _Usage.COPY_SRC, "COPY_SRC", what);
      this.#require(dst.buffer, _Usage.COPY_DST, "COPY_DST", what);
      this.#scoped("copyBufferToBuffer", `${this.#label}:copy_bytes`, (l) => {
        const encoder = this.gpuDevice.createCommandEncoder({ label: l });
        encoder.copyBufferToBuffer(
          src.buffer,
          from,
          dst.buffer,
          to,
          byteLength,
        );
        this.gpuDevice.queue.submit([encoder.finish()]);
      });
      return;
    }
    const ranges = (at: number, length: number): _Range[] => [
      { binding: src, start: from + at, end: from + at + length },
      { binding: dst, start: to + at, end: to + at + length },
    ];
    const runs = this.#fits(ranges(0, byteLength))
      ? [[0, byteLength]]
      : _splitRun(
        byteLength,
        1,
        (at, length) => this.#fits(ranges(at, length)),
        MAX_PIECES,
      );
    if (runs === undefined) this.#refuseRun(what, byteLength, 1);
    const pieces = () => {
      for (const [at, length] of runs) {
        this.#copyBytesPiece(
          what,
          ranges(at, length),
          srcByteOffset + at,
          dstByteOffset + at,
          length,
        );
      }
    };
    if (runs.length === 1) pieces();
    else this.#inPieces(pieces);
  }

  /** Refuses a byte range that no split into runs binds within the limit. */
  #refuseRun(what: string, byteLength: number, unit: number): never {
    const limit = this.maxBindingByteLength;
    throw new UnsupportedOperationError(
      `Cannot ${what}: ${byteLength} bytes do not split into at most ${MAX_PIECES} runs of ${unit}-byte units that each bind within ${limit} bytes (maxBindingByteLength; with both ranges in one buffer, the span between them counts)`,
    );
  }

  /** One dispatch of a byte copy whose bound ranges fit the limit. */
  #copyBytesPiece(
    what: string,
    ranges: _Range[],
    srcByteOffset: number,
    dstByteOffset: number,
    byteLength: number,
  ): void {
    const bound = this.#bind(what, ranges);
    const srcBase = bound.shifts[0] + srcByteOffset;
    const dstBase = bound.shifts[1] + dstByteOffset;
    const invocations = Math.ceil(
      (Math.floor((dstBase + byteLength - 1) / 4) - Math.floor(dstBase / 4) +
        1) / WORDS_PER_INVOCATION,
    );
    const meta = this.#metaData;
    meta.fill(0);
    meta[0] = invocations;
    meta[1] = byteLength;
    meta[2] = srcBase;
    meta[3] = dstBase;
    const kernel = _copyBytesKernel(bound.aliased, this.workgroupSize);
    this.#dispatch(kernel, bound, invocations);
  }

  /**
   * Sets `length` elements of `dst` from element `offset` to `value`. Zero
   * over a 4-byte-aligned range is one `clearBuffer`; anything else is a
   * kernel that keeps the other bytes of partly covered words.
   *
   * @param dst The range.
   * @param value The value, converted to `dtype` (`f16` rounds to nearest).
   * @param options Element type, first element and count.
   * @throws {InvalidArgumentError} For a range outside `dst` or a bad dtype.
   * @throws {UnsupportedOperationError} When a range wider than
   * `maxBindingByteLength` needs more than `MAX_PIECES` pieces, or one
   * element cannot bind (nothing is submitted).
   * @throws {DeviceLostError} When the device was lost.
   */
  fill(dst: GpuBinding, value: number, options: FillOptions): void {
    const what = "fill";
    _assertAlive(this.gpuDevice, what);
    this.#throwFailure();
    _checkOptions(options, "options", FILL_KEYS, "GpuKernels.fill()");
    validateObject(options, "options");
    const dtype = options.dtype;
    const size = dtypeByteSize(dtype);
    dst = this.#checkBinding(dst, what, size);
    const elements = Math.floor(dst.size / size);
    const offset = validateInteger(
      optionOr(options.offset, 0),
      0,
      elements,
      "offset",
    );
    const length = validateInteger(
      optionOr(options.length, elements - offset),
      0,
      elements - offset,
      "length",
    );
    const bytes = encodeElement(dtype, value);
    if (length === 0) return;
    const start = dst.offset + offset * size;
    const byteLength = length * size;
    if (
      bytes.every((b) => b === 0) && start % 4 === 0 && byteLength % 4 === 0
    ) {
      this.#require(dst.buffer, _Usage.COPY_DST, "COPY_DST", what);
      this.#scoped("clearBuffer", `${this.#label}:fill`, (l) => {
        const encoder = this.gpuDevice.createCommandEncoder({ label: l });
        encoder.clearBuffer(dst.buffer, start, byteLength);
        this.gpuDevice.queue.submit([encoder.finish()]);
      });
      return;
    }
    const range = (at: number, length: number): _Range[] => [{
      binding: dst,
      start: start + at,
      end: start + at + length,
    }];
    const runs = this.#fits(range(0, byteLength))
      ? [[0, byteLength]]
      : _splitRun(
        byteLength,
        size,
        (at, length) => this.#fits(range(at, length)),
        MAX_PIECES,
      );
    if (runs === undefined) this.#refuseRun(what, byteLength, size);
    const words = new Uint32Array(2);
    const wordBytes = new Uint8Array(words.buffer);
    for (let k = 0; k < 8; k++) wordBytes[k] = bytes[k % size];
    const pieces = () => {
      for (const [at, length] of runs) {
        this.#fillPiece(
          what,
          range(at, length),
          offset * size + at,
          length,
          words,
        );
      }
    };
    if (runs.length === 1) pieces();
    else this.#inPieces(pieces);
  }

  /** One dispatch of a fill whose bound range fits the limit. */
  #fillPiece(
    what: string,
    range: _Range[],
    byteOffset: number,
    byteLength: number,
    words: Uint32Array,
  ): void {
    const bound = this.#bind(what, range);
    const base = bound.shifts[0] + byteOffset;
    const invocations = Math.ceil(
      (Math.floor((base + byteLength - 1) / 4) - Math.floor(base / 4) + 1) /
        WORDS_PER_INVOCATION,
    );
    const meta = this.#metaData;
    meta.fill(0);
    meta[0] = invocations;
    meta[1] = byteLength;
    meta[2] = base;
    meta[3] = words[0];
    meta[4] = words[1];
    this.#dispatch(_fillKernel(this.workgroupSize), bound, invocations);
  }

  #checkBinding(
    given: GpuBinding,
    what: string,
    elementSize: number,
  ): GpuBinding {
    const binding = validateBinding(this.gpuDevice, given, {
      what,
      storage: false,
    });
    if (binding.offset % elementSize !== 0) {
      throw new InvalidArgumentError(
        `Cannot ${what}: binding offset must be a multiple of the element size ${elementSize}, received ${binding.offset}`,
        { name: "offset", value: binding.offset, limit: elementSize },
      );
    }
    return binding;
  }

  #require(buffer: GPUBuffer, flag: number, name: string, what: string): void {
    if ((buffer.usage & flag) === 0) {
      throw new InvalidArgumentError(
        `Cannot ${what}: buffer ${
          JSON.stringify(buffer.label)
        } lacks ${name} usage, has ${buffer.usage}`,
        { name: "usage", value: buffer.usage, limit: name },
      );
    }
  }

  /** Whether the touched ranges bind within the binding limit. */
  #fits(ranges: _Range[]): boolean {
    const align = this.gpuDevice.limits.minStorageBufferOffsetAlignment;
    const limit = this.maxBindingByteLength;
    return _boundGroups(ranges, align, limit).every((g) =>
      g.end - g.start <= limit
    );
  }

  /** Binds the touched ranges from their enclosing aligned boundaries. */
  #bind(what: string, ranges: _Range[]): _Bound {
    for (const range of ranges) {
      this.#require(
        range.binding.buffer,
        _Usage.STORAGE,
        "STORAGE",
        what,
      );
    }
    const align = this.gpuDevice.limits.minStorageBufferOffsetAlignment;
    const limit = this.maxBindingByteLength;
    const entries: GPUBindGroupEntry[] = [];
    const shifts: number[] = [];
    const groups = _boundGroups(ranges, align, limit);
    for (const { buffer, start, end, members } of groups) {
      if (end - start > limit) {
        throw new UnsupportedOperationError(
          `Cannot ${what}: the bound range of ${
            end - start
          } bytes exceeds maxBindingByteLength ${limit} (maxStorageBufferBindingSize ${this.gpuDevice.limits.maxStorageBufferBindingSize})`,
        );
      }
      entries.push({
        binding: entries.length,
        resource: { buffer, offset: start, size: end - start },
      });
      for (const r of members) shifts.push(r.binding.offset - start);
    }
    return {
      entries,
      shifts,
      aliased: groups.length < ranges.length,
      twice: ranges.length === 2 && groups.length === 2 &&
        ranges[0].binding.buffer === ranges[1].binding.buffer,
    };
  }

  /**
   * Runs `pieces` with every dispatch collected, then submits them in one
   * command buffer (a pass per {@linkcode PIECES_PER_SUBMIT}); a throw
   * before the end submits nothing.
   */
  #inPieces(pieces: () => void): void {
    const batch: _Queued[] = [];
    this.#batch = batch;
    try {
      pieces();
    } finally {
      this.#batch = undefined;
    }
    for (let at = 0; at < batch.length; at += PIECES_PER_SUBMIT) {
      this.#submitPieces(batch.slice(at, at + PIECES_PER_SUBMIT));
    }
  }

  #submitPieces(batch: _Queued[]): void {
    const device = this.gpuDevice;
    const stride = alignUp(
      META_WORDS * 4,
      device.limits.minStorageBufferOffsetAlignment,
    );
    const bytes = batch.length * stride;
    if (this.#pieceMeta === undefined || this.#pieceMeta.size < bytes) {
      // the old buffer may still be read by submitted work: dropped, not
      // destroyed
      this.#pieceMeta = device.createBuffer({
        label: `${this.#label}:kernel-piece-meta`,
        size: Math.max(bytes, (this.#pieceMeta?.size ?? 0) * 2),
        usage: _Usage.STORAGE | _Usage.COPY_DST,
      });
    }
    const meta = this.#pieceMeta;
    const words = new Uint32Array(bytes / 4);
    batch.forEach((q, k) => words.set(q.meta, (k * stride) / 4));
    device.queue.writeBuffer(meta, 0, words);
    const label = `${this.#label}:${batch[0].kernel.name}:pieces`;
    device.pushErrorScope("out-of-memory");
    device.pushErrorScope("validation");
    try {
      const encoder = device.createCommandEncoder({ label });
      const pass = encoder.beginComputePass({ label });
      batch.forEach((q, k) => {
        const group = device.createBindGroup({
          label,
          layout: q.pipeline.getBindGroupLayout(0),
          entries: [
            ...q.bound.entries,
            {
              binding: q.bound.entries.length,
              resource: {
                buffer: meta,
                offset: k * stride,
                size: META_WORDS * 4,
              },
            },
          ],
        });
        pass.setPipeline(q.pipeline);
        pass.setBindGroup(0, group);
        pass.dispatchWorkgroups(q.x, q.y);
      });
      pass.end();
      device.queue.submit([encoder.finish()]);
    } finally {
      this.#watch(
        batch[0].kernel.name,
        label,
        device.popErrorScope(),
        device.popErrorScope(),
      );
    }
    this.#dispatches += batch.length;
  }

  #dispatch(kernel: Kernel, bound: _Bound, invocations: number): void {
    const device = this.gpuDevice;
    if (bound.twice) kernel = _sourceWritable(kernel);
    if (this.#batch !== undefined) {
      const [x, y] = dispatchSize(
        invocations,
        kernel.workgroupSize,
        device.limits.maxComputeWorkgroupsPerDimension,
      );
      this.#batch.push({
        kernel,
        pipeline: kernelPipeline(device, kernel),
        bound,
        meta: this.#metaData.slice(),
        x,
        y,
      });
      return;
    }
    const [x, y] = dispatchSize(
      invocations,
      kernel.workgroupSize,
      device.limits.maxComputeWorkgroupsPerDimension,
    );
    const pipeline = kernelPipeline(device, kernel);
    const meta = this.#meta ??= device.createBuffer({
      label: `${this.#label}:kernel-meta`,
      size: META_WORDS * 4,
      usage: _Usage.STORAGE | _Usage.COPY_DST,
    });
    // The queue orders this write after every earlier submit, so one meta
    // buffer serves every dispatch as long as each is submitted at once.
    device.queue.writeBuffer(this.#meta, 0, this.#metaData);
    const label = `${this.#label}:${kernel.name}`;
    // Every dispatch runs inside error scopes, so a validation or
    // out-of-memory error becomes a GpuKernelError (thrown by the next
    // kernel call or by flush()) instead of an uncaptured device error.
    device.pushErrorScope("out-of-memory");
    device.pushErrorScope("validation");
    try {
      this.#encode(device, label, pipeline, bound, meta, x, y);
    } finally {
      this.#watch(
        kernel.name,
        label,
        device.popErrorScope(),
        device.popErrorScope(),
      );
    }
    this.#dispatches++;
  }

  /**
   * Runs `submit` (a copy or clear command, no dispatch) inside the same
   * error scopes as a dispatch: a destroyed buffer becomes a GpuKernelError
   * thrown by the next call or by flush(), not an uncaptured device error.
   */
  #scoped(
    kernel: string,
    label: string,
    submit: (label: string) => void,
  ): void {
    const device = this.gpuDevice;
    device.pushErrorScope("out-of-memory");
    device.pushErrorScope("validation");
    try {
      submit(label);
    } finally {
      this.#watch(
        kernel,
        label,
        device.popErrorScope(),
        device.popErrorScope(),
      );
    }
  }

  #encode(
    device: GPUDevice,
    label: string,
    pipeline: GPUComputePipeline,
    bound: _Bound,
    meta: GPUBuffer,
    x: number,
    y: number,
  ): void {
    const group = device.createBindGroup({
      label,
      layout: pipeline.getBindGroupLayout(0),
      entries: [
        ...bound.entries,
        { binding: bound.entries.length, resource: { buffer: meta } },
      ],
    });
    const encoder = device.createCommandEncoder({ label });
    const pass = encoder.beginComputePass({ label });
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(x, y);
    pass.end();
    device.queue.submit([encoder.finish()]);
  }

  #watch(
    kernel: string,
    label: string,
    validation: Promise<GPUError | null>,
    memory: Promise<GPUError | null>,
  ): void {
    const settled = Promise.all([validation, memory]).then(
      ([invalid, oom]) => {
        const error = invalid ?? oom;
        if (error && this.#failure === undefined) {
          this.#failure = new GpuKernelError(
            `Kernel ${kernel} (${label}) failed on the device: ${error.message}`,
            {
              kernel,
              label,
              kind: invalid ? "validation" : "out-of-memory",
            },
          );
        }
      },
      () => {/* the device was lost: DeviceLostError reports it */},
    ).finally(() => this.#pending.delete(settled));
    this.#pending.add(settled);
  }

  /** Throws (once) the error a previous dispatch raised on the device. */
  #throwFailure(): void {
    const failure = this.#failure;
    if (failure !== undefined) {
      this.#failure = undefined;
      throw failure;
    }
  }

  /**
   * Waits until the device has validated every dispatch submitted so far,
   * and throws the first error one of them raised.
   *
   * @returns Resolves when every dispatch so far passed.
   * @throws {GpuKernelError} When a dispatch failed validation or ran out of
   * memory on the device.
   */
  async flush(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending]);
    this.#throwFailure();
  }
}

/** Details of a {@linkcode GpuKernelError}. */
export interface GpuKernelErrorDetails {
  /** The kernel's name. */
  kernel: string;
  /** The label of its command encoder, pass and bind group. */
  label: string;
  /** Which error scope caught it. */
  kind: "validation" | "out-of-memory";
}

/**
 * A dispatch of allot's kernels failed on the device (caught by an error
 * scope): thrown by the next kernel call on the same {@linkcode GpuKernels},
 * or by {@linkcode GpuKernels.flush} (which `Buffer.read()` on WebGPU
 * awaits).
 *
 * @example
 * ```ts
 * import { GpuKernelError, GpuKernels } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
 *   const gone = device.createBuffer({ size: 16, usage });
 *   gone.destroy(); // the device refuses work on it
 *   const kernels = GpuKernels.of(device);
 *   kernels.fill({ buffer: gone, offset: 0, size: 16 }, 1, { dtype: "f32" });
 *   await assert.rejects(
 *     kernels.flush(),
 *     (e) => e instanceof GpuKernelError && e.kernel === "fill" && e.kind === "validation",
 *   );
 *   device.destroy();
 * }
 * ```
 */
export class GpuKernelError extends AllotError {
  /** The kernel's name. */
  readonly kernel: string;
  /** The label of its command encoder, pass and bind group. */
  readonly label: string;
  /** Which error scope caught it. */
  readonly kind: "validation" | "out-of-memory";

  /**
   * Creates the error.
   *
   * @param message What failed.
   * @param details Kernel, label and kind.
   */
  constructor(message: string, details: GpuKernelErrorDetails) {
    super(message);
    this.kernel = details.kernel;
    this.label = details.label;
    this.kind = details.kind;
  }
}

/**
 * Refuses a validated destination layout whose elements alias (`#strided`
 * refuses stride-0 dimensions first, with their own message).
 */
function _refuseAliasing(what: string, layout: StridedLayout): void {
  const alias = findStridedAlias(layout.shape, layout.strides);
  if (alias === undefined) return;
  throw new InvalidArgumentError(
    `Cannot ${what}: destination indices [${alias.first.join(", ")}] and [${
      alias.second.join(", ")
    }] both reach element ${layout.offset + alias.offset} (shape [${
      layout.shape.join(", ")
    }], strides [${layout.strides.join(", ")}])`,
    {
      name: "dstLayout.strides",
      value: [...layout.strides],
      limit: "elements that do not alias",
    },
  );
}

/**
 * The bound range of each buffer: the touched ranges from the enclosing
 * `align` boundary to the next 4-byte one (within the buffer). Two ranges
 * of one buffer bind once, as their union.
 */
function _boundGroups(
  ranges: _Range[],
  align: number,
  limit: number,
): { buffer: GPUBuffer; start: number; end: number; members: _Range[] }[] {
  const bound = (members: _Range[]) => {
    const buffer = members[0].binding.buffer;
    let start = Infinity;
    let end = 0;
    for (const r of members) {
      start = Math.min(start, r.start);
      end = Math.max(end, r.end);
    }
    start -= start % align;
    end = Math.min(alignUp(end, 4), buffer.size - (buffer.size % 4));
    return { buffer, start, end, members };
  };
  if (
    ranges.length !== 2 ||
    ranges[0].binding.buffer !== ranges[1].binding.buffer
  ) return ranges.map((r) => bound([r]));
  const union = bound(ranges);
  if (union.end - union.start <= limit) return [union];
  // too wide as one: bound twice, unless the two bound ranges overlap
  // (WebGPU refuses a writable binding that aliases another)
  const [a, b] = ranges.map((r) => bound([r]));
  return a.start < b.end && b.start < a.end ? [union] : [a, b];
}

/**
 * The byte ranges a copy reads and writes, `[srcStart, srcEnd, dstStart,
 * dstEnd]` (elements `source.lo..hi` of `src` and `target.lo..hi` of `dst`,
 * `size` bytes each); refuses ranges that overlap in one buffer.
 */
function _refuseOverlap(
  what: string,
  src: GpuBinding,
  dst: GpuBinding,
  size: number,
  source: { lo: number; hi: number },
  target: { lo: number; hi: number },
): [number, number, number, number] {
  const srcStart = src.offset + source.lo * size;
  const srcEnd = src.offset + (source.hi + 1) * size;
  const dstStart = dst.offset + target.lo * size;
  const dstEnd = dst.offset + (target.hi + 1) * size;
  if (src.buffer === dst.buffer && srcStart < dstEnd && dstStart < srcEnd) {
    throw new InvalidArgumentError(
      `Cannot ${what}: source bytes [${srcStart}, ${srcEnd}) and destination bytes [${dstStart}, ${dstEnd}) overlap in one buffer`,
      { name: "dst", value: [dstStart, dstEnd], limit: [srcStart, srcEnd] },
    );
  }
  return [srcStart, srcEnd, dstStart, dstEnd];
}

/** Row-major strides of a shape. */
function _rowMajorStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let step = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    strides[d] = step;
    step *= shape[d];
  }
  return strides;
}

/**
 * Drops dimensions of extent 1 and merges neighbours that are one run in
 * both stride lists (`a[d] = a[d+1]·shape[d+1]`, same for `b`), keeping the
 * row-major order of the elements.
 */
function _fold(
  shape: readonly number[],
  a: readonly number[],
  b: readonly number[],
): { shape: number[]; a: number[]; b: number[] } {
  const out = { shape: [] as number[], a: [] as number[], b: [] as number[] };
  for (let d = 0; d < shape.length; d++) {
    if (shape[d] === 1) continue;
    const k = out.shape.length - 1;
    if (
      k >= 0 && out.a[k] === a[d] * shape[d] && out.b[k] === b[d] * shape[d]
    ) {
      out.shape[k] *= shape[d];
      out.a[k] = a[d];
      out.b[k] = b[d];
    } else {
      out.shape.push(shape[d]);
      out.a.push(a[d]);
      out.b.push(b[d]);
    }
  }
  return out;
}

/** Whether a layout is row-major contiguous from its offset. */
function _isRowMajor(layout: StridedLayout): boolean {
  let expected = 1;
  for (let d = layout.shape.length - 1; d >= 0; d--) {
    if (layout.shape[d] !== 1 && layout.strides[d] !== expected) return false;
    expected *= layout.shape[d];
  }
  return true;
}

/** Validates a layout and returns its element count and reach. */
/**
 * A plain copy of `layout`, each field read once, so a layout whose getters
 * or array elements change cannot pass validation with one view and be
 * dispatched with another.
 */
function _layoutOf(
  what: string,
  layout: StridedLayout,
  role: string,
): StridedLayout {
  const isObject = typeof layout === "object" && layout !== null;
  const shape: unknown = isObject ? layout.shape : undefined;
  const strides: unknown = isObject ? layout.strides : undefined;
  if (!Array.isArray(shape) || !Array.isArray(strides)) {
    throw new InvalidArgumentError(
      `Cannot ${what}: the ${role}layout must be an object with shape and strides arrays, received ${
        describeValue(layout)
      }`,
      { name: `${role}layout`.trim(), value: layout, limit: "StridedLayout" },
    );
  }
  return {
    shape: Array.from(shape),
    strides: Array.from(strides),
    offset: layout.offset,
  };
}

function _reach(
  what: string,
  layout: StridedLayout,
  role: string,
  bindingElements: number,
  maxRank: number = MAX_RANK,
): { count: number; lo: number; hi: number } {
  const { shape, strides } = layout;
  const rank = shape?.length;
  if (!Array.isArray(shape) || !Array.isArray(strides)) {
    throw new InvalidArgumentError(
      `Cannot ${what}: the ${role}layout needs shape and strides arrays`,
      { name: "layout", value: layout },
    );
  }
  if (rank > maxRank) {
    throw new InvalidArgumentError(
      `Cannot ${what}: ${role}rank must be at most ${maxRank}, received ${rank}`,
      { name: "shape", value: rank, limit: maxRank },
    );
  }
  if (strides.length !== rank) {
    throw new InvalidArgumentError(
      `Cannot ${what}: ${role}strides must have one entry per dimension (${rank}), received ${strides.length}`,
      { name: "strides", value: strides.length, limit: rank },
    );
  }
  const offset = validateInteger(layout.offset, 0, 0xffffffff, "offset");
  let count = 1;
  let lo = offset;
  let hi = offset;
  for (let d = 0; d < rank; d++) {
    const n = validateInteger(shape[d], 0, I32_MAX, `shape[${d}]`);
    const s = validateInteger(strides[d], -I32_MAX, I32_MAX, `strides[${d}]`);
    count *= n;
    if (n > 0) {
      if (s < 0) lo += s * (n - 1);
      else hi += s * (n - 1);
    }
  }
  if (count > 0xffffffff) {
    throw new InvalidArgumentError(
      `Cannot ${what}: at most ${0xffffffff} elements, received ${count}`,
      { name: "shape", value: count, limit: 0xffffffff },
    );
  }
  const elements = Math.floor(bindingElements);
  if (count > 0 && (lo < 0 || hi >= elements)) {
    throw new InvalidArgumentError(
      `Cannot ${what}: the ${role}view reaches elements [${lo}, ${hi}], outside its binding of ${elements} elements`,
      { name: "layout", value: [lo, hi], limit: elements },
    );
  }
  return { count, lo, hi };
}
