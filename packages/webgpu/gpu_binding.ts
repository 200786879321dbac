/**
 * {@linkcode GpuBinding}: a range of a `GPUBuffer` ready to put in a bind
 * group, and {@linkcode validateBinding}, which checks one against a device's
 * limits before anything is submitted.
 *
 * @module
 */

import { _bufferDevice } from "./_buffer_devices.ts";
import { describeValue, InvalidArgumentError } from "@allot/core";

/**
 * A range of a `GPUBuffer`, shaped like WebGPU's `GPUBufferBinding` so it can
 * be passed as a bind group entry's `resource` as it is. As in WebGPU,
 * `offset` and `size` are in bytes.
 */
export interface GpuBinding {
  /** The buffer. */
  readonly buffer: GPUBuffer;
  /** Byte offset of the range in the buffer. */
  readonly offset: number;
  /** Byte length of the range. */
  readonly size: number;
}

/** Options of {@linkcode validateBinding}. */
export interface ValidateBindingOptions {
  /**
   * What the binding is for, used in error messages.
   *
   * @default {"bind"}
   */
  what?: string;
  /**
   * Also require the range to fit one storage binding
   * (`maxStorageBufferBindingSize`, offset a multiple of
   * `minStorageBufferOffsetAlignment`). Sizes need not be multiples of 4:
   * WebGPU needs that of a bound range, and allot's kernels round the bound
   * range up inside the buffer, whose size always is one.
   *
   * @default {true}
   */
  storage?: boolean;
}

/**
 * Checks that `binding` lies inside its buffer and, for a storage binding,
 * that it respects the device's offset alignment and binding size limits.
 *
 * @param device The device whose limits apply.
 * @param binding The range to check.
 * @param options What the binding is for, and whether it is a storage binding.
 * @returns A plain copy of the binding's `buffer`, `offset` and `size`, each
 * read once: use it, not the argument, so a binding whose getters change
 * their answers cannot pass the check with one range and be used with
 * another.
 * @throws {InvalidArgumentError} For options that are not an object, or when
 * the range leaves its buffer or breaks a limit; the error names the value
 * and the limit.
 *
 * @example Check a range before binding it
 * ```ts
 * import { validateBinding } from "@allot/webgpu";
 * import { InvalidArgumentError } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const buffer = device.createBuffer({ size: 1024, usage: GPUBufferUsage.STORAGE });
 *   validateBinding(device, { buffer, offset: 256, size: 512 });
 *   assert.throws(() => validateBinding(device, { buffer, offset: 512, size: 1024 }), InvalidArgumentError);
 *   buffer.destroy();
 *   device.destroy();
 * }
 * ```
 */
export function validateBinding(
  device: GPUDevice,
  binding: GpuBinding,
  options: ValidateBindingOptions = {},
): GpuBinding {
  if (typeof options !== "object" || options === null) {
    throw new InvalidArgumentError(
      `Cannot check a binding: options must be an object, received ${
        describeValue(options)
      }`,
      { name: "options", value: options, limit: "ValidateBindingOptions" },
    );
  }
  const what = options.what ?? "bind";
  if (typeof binding !== "object" || binding === null) {
    throw new InvalidArgumentError(
      `Cannot ${what}: the binding must be an object { buffer, offset, size }, received ${
        describeValue(binding)
      }`,
      { name: "binding", value: binding, limit: "GpuBinding" },
    );
  }
  const { buffer, offset, size } = binding;
  // a GPUBuffer as the rest of the package knows one (mapAsync, a size)
  const bufferSize = typeof buffer === "object" && buffer !== null &&
      typeof buffer.mapAsync === "function"
    ? buffer.size
    : undefined;
  if (!Number.isSafeInteger(bufferSize) || (bufferSize as number) < 0) {
    throw new InvalidArgumentError(
      `Cannot ${what}: the binding's buffer must be a GPUBuffer, received ${
        describeValue(buffer)
      } of size ${describeValue(bufferSize)}`,
      { name: "buffer", value: buffer, limit: "GPUBuffer" },
    );
  }
  const owner = _bufferDevice(buffer);
  if (owner !== undefined && owner !== device) {
    throw new InvalidArgumentError(
      `Cannot ${what}: buffer ${
        JSON.stringify(buffer.label)
      } belongs to another device (${JSON.stringify(owner.label)}, not ${
        JSON.stringify(device.label)
      })`,
      { name: "buffer", value: buffer.label, limit: device.label },
    );
  }
  if (!Number.isSafeInteger(offset) || offset < 0) {
    throw new InvalidArgumentError(
      `Cannot ${what}: offset must be a non-negative integer, received ${
        describeValue(offset)
      }`,
      { name: "offset", value: offset, limit: 0 },
    );
  }
  if (!Number.isSafeInteger(size) || size < 0) {
    throw new InvalidArgumentError(
      `Cannot ${what}: size must be a non-negative integer, received ${
        describeValue(size)
      }`,
      { name: "size", value: size, limit: 0 },
    );
  }
  const total = bufferSize as number;
  if (offset + size > total) {
    throw new InvalidArgumentError(
      `Cannot ${what}: range [${offset}, ${
        offset + size
      }) reaches outside its buffer of ${total} bytes`,
      { name: "size", value: size, limit: total - offset },
    );
  }
  if (options.storage ?? true) {
    const alignment = device.limits.minStorageBufferOffsetAlignment;
    if (offset % alignment !== 0) {
      throw new InvalidArgumentError(
        `Cannot ${what}: offset must be a multiple of minStorageBufferOffsetAlignment ${alignment}, received ${offset}`,
        { name: "offset", value: offset, limit: alignment },
      );
    }
    const max = device.limits.maxStorageBufferBindingSize;
    if (size > max) {
      throw new InvalidArgumentError(
        `Cannot ${what}: size must be at most maxStorageBufferBindingSize ${max}, received ${size}`,
        { name: "size", value: size, limit: max },
      );
    }
  }
  return { buffer, offset, size };
}
