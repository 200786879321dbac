/**
 * {@linkcode bindBuffers}: bind group entries for a dispatch over allot
 * buffers that WebGPU will accept, or a {@linkcode BindingAliasError} at
 * once.
 *
 * allot places many tensors in one `GPUBuffer`. WebGPU refuses a dispatch
 * in which one `GPUBuffer` is bound both writable (`var<storage,
 * read_write>`) and read-only (`var<storage, read>` or `var<uniform>`), and
 * one in which two writable bindings of a buffer overlap ("writable storage
 * buffer binding aliasing"). The error arrives later, as an uncaptured
 * device error, and the kernel silently computes nothing. `bindBuffers`
 * knows which inputs share a `GPUBuffer` and checks both rules before
 * anything is encoded.
 *
 * @module
 */

import { _bufferDevice } from "./_buffer_devices.ts";
import { _checkOptions } from "./_validate_gpu.ts";
import {
  AllotError,
  describeValue,
  InvalidArgumentError,
  optionOr,
  validateObject,
} from "@allot/core";
import type { Buffer } from "@allot/storage";
import { dtypeInfo } from "@allot/storage";
import { type GpuBinding, validateBinding } from "./gpu_binding.ts";

/** How a kernel accesses a binding, as WGSL declares it. */
export type BindingAccess = "read" | "read_write" | "uniform";

/** One buffer a kernel binds. */
export interface KernelBindingInput {
  /** The name used in errors and WGSL declarations (an identifier). */
  readonly name: string;
  /**
   * An allot `Buffer` whose storage lives in a `GPUBuffer`, or a raw range.
   */
  readonly buffer: Buffer | GpuBinding;
  /** How the kernel accesses it. */
  readonly access: BindingAccess;
}

/** Options of {@linkcode bindBuffers}. */
export interface BindBuffersOptions {
  /**
   * What to do when a read-only input shares a `GPUBuffer` with a writable
   * one: `"refuse"` throws a {@linkcode BindingAliasError}; `"promote"`
   * binds the read-only input as `read_write` too (WebGPU accepts several
   * writable bindings of one buffer whose ranges do not overlap), and
   * reports it in {@linkcode BoundBuffers.access} so the shader declares it
   * so ({@linkcode BoundBuffers.declarations} does).
   *
   * @default {"promote"}
   */
  aliasing?: "promote" | "refuse";
  /**
   * Binding number of the first input; the others follow in order.
   *
   * @default {0}
   */
  firstBinding?: number;
}

/** One bound input. */
export interface BoundBuffer {
  /** The input's name. */
  readonly name: string;
  /** The access the shader must declare (may be promoted). */
  readonly access: BindingAccess;
  /** The bound range (offset aligned for the device). */
  readonly binding: GpuBinding;
  /**
   * Bytes from the bound range's start to the input's first byte (the
   * bound range starts on a `minStorageBufferOffsetAlignment` boundary).
   */
  readonly byteShift: number;
  /**
   * For a `Buffer`: the index of its first element (view offset included)
   * in the bound range, counted in its dtype. For a raw range: `byteShift`
   * divided by 4.
   */
  readonly elementOffset: number;
}

/** What {@linkcode bindBuffers} returns. */
export interface BoundBuffers {
  /** The bind group entries, in input order. */
  readonly entries: GPUBindGroupEntry[];
  /** Each input, in order. */
  readonly inputs: readonly BoundBuffer[];
  /** The access of each input by name (promoted ones read `read_write`). */
  readonly access: Readonly<Record<string, BindingAccess>>;
  /** Names of inputs promoted from `read` to `read_write`. */
  readonly promoted: readonly string[];
  /**
   * WGSL declarations of the bindings, with the right access, such as
   * `@group(0) @binding(0) var<storage, read_write> a: array<f32>;`.
   *
   * @param types The WGSL element type of each input by name, or one for
   *   all (`uniform` inputs use the type as is, not an array).
   * @param group The bind group number.
   * @returns The declarations, one a line.
   */
  declarations(types: string | Record<string, string>, group?: number): string;
}

/** Details of a {@linkcode BindingAliasError}. */
export interface BindingAliasDetails {
  /** The first input's name. */
  first: string;
  /** The second input's name. */
  second: string;
  /** The WebGPU rule the pair breaks. */
  rule: string;
}

/**
 * Thrown by {@linkcode bindBuffers} when two inputs of one dispatch share a
 * `GPUBuffer` in a way WebGPU refuses. Names both inputs and the rule.
 *
 * @example
 * ```ts
 * import { bindBuffers, BindingAliasError } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const shared = device.createBuffer({ size: 1024, usage: GPUBufferUsage.STORAGE });
 *   const inputs = [
 *     { name: "x", buffer: { buffer: shared, offset: 0, size: 256 }, access: "read" as const },
 *     { name: "y", buffer: { buffer: shared, offset: 512, size: 256 }, access: "read_write" as const },
 *   ];
 *   assert.throws(
 *     () => bindBuffers(device, inputs, { aliasing: "refuse" }),
 *     (e) => e instanceof BindingAliasError && e.first === "x" && e.second === "y",
 *   );
 *   device.destroy();
 * }
 * ```
 */
export class BindingAliasError extends AllotError {
  /** The first input's name. */
  readonly first: string;
  /** The second input's name. */
  readonly second: string;
  /** The WebGPU rule the pair breaks. */
  readonly rule: string;

  /**
   * Creates the error.
   *
   * @param message What happened and what to do.
   * @param details Both names and the rule.
   */
  constructor(message: string, details: BindingAliasDetails) {
    super(message);
    this.first = details.first;
    this.second = details.second;
    this.rule = details.rule;
  }
}

/** The rule for a buffer bound writable and read-only in one dispatch. */
export const WRITABLE_AND_READONLY_RULE =
  "a GPUBuffer may not be bound both writable (storage, read_write) and read-only (storage read or uniform) in one dispatch";
/** The rule for overlapping writable bindings. */
export const WRITABLE_ALIASING_RULE =
  "writable storage buffer binding aliasing: two bindings of one GPUBuffer whose ranges overlap may not be writable";

interface Resolved {
  input: KernelBindingInput;
  buffer: GPUBuffer;
  start: number;
  end: number;
  bytesPerElement: number;
  firstElement: number;
}

function isGpuBuffer(value: unknown): value is GPUBuffer {
  return value !== null && typeof value === "object" &&
    typeof (value as GPUBuffer).mapAsync === "function";
}

function resolve(
  device: GPUDevice,
  input: KernelBindingInput,
  index: number,
): Resolved {
  const source = input.buffer as Partial<Buffer> & Partial<GpuBinding>;
  if (source === null || typeof source !== "object") {
    throw new InvalidArgumentError(
      `Cannot bind input ${index} (${input.name}): expected a Buffer or a GpuBinding, received ${
        describeValue(source)
      }`,
      { name: `inputs[${index}].buffer`, value: source, limit: "Buffer" },
    );
  }
  if ("storage" in source && source.storage !== undefined) {
    const buffer = input.buffer as Buffer;
    const data = buffer.storage.data;
    if (!isGpuBuffer(data.memory)) {
      throw new InvalidArgumentError(
        `Cannot bind ${input.name}: its storage ${buffer.storageId} is not in a GPUBuffer (allocate it with a WebGPU allocator)`,
        {
          name: `inputs[${index}].buffer`,
          value: buffer.storageId,
          limit: "GPUBuffer",
        },
      );
    }
    const owner = _bufferDevice(data.memory);
    if (owner !== undefined && owner !== device) {
      throw new InvalidArgumentError(
        `Cannot bind ${input.name}: its storage ${buffer.storageId} is on another device (${
          JSON.stringify(owner.label)
        }, not ${JSON.stringify(device.label)})`,
        {
          name: `inputs[${index}].buffer`,
          value: buffer.storageId,
          limit: device.label,
        },
      );
    }
    const bytesPerElement = dtypeInfo(buffer.dtype).bytesPerElement;
    return {
      input,
      buffer: data.memory,
      start: data.byteOffset,
      end: data.byteOffset + data.byteLength,
      bytesPerElement,
      firstElement: buffer.offset,
    };
  }
  if (!isGpuBuffer(source.buffer)) {
    throw new InvalidArgumentError(
      `Cannot bind ${input.name}: expected a Buffer or a GpuBinding with a GPUBuffer`,
      { name: `inputs[${index}].buffer`, value: source, limit: "GPUBuffer" },
    );
  }
  // offset and size checked (and read once), the device's too
  const range = validateBinding(device, input.buffer as GpuBinding, {
    what: `bind ${input.name}`,
    storage: false,
  });
  return {
    input,
    buffer: range.buffer,
    start: range.offset,
    end: range.offset + range.size,
    bytesPerElement: 4,
    firstElement: 0,
  };
}

function writable(access: BindingAccess): boolean {
  return access === "read_write";
}

/**
 * Builds the bind group entries of a dispatch over allot buffers, checking
 * WebGPU's aliasing rules first. Each input gets its own binding, whose
 * range starts at the enclosing `minStorageBufferOffsetAlignment` (uniform:
 * `minUniformBufferOffsetAlignment`) boundary; the shader adds
 * {@linkcode BoundBuffer.elementOffset} to its indices (pass it in a
 * uniform).
 *
 * @param device The device the dispatch runs on (for its limits).
 * @param inputs The buffers, in binding order.
 * @param options Aliasing policy and first binding number.
 * @returns The entries, the effective access of each input, and WGSL
 *   declarations that match.
 * @throws {BindingAliasError} When a read-only input shares a `GPUBuffer`
 *   with a writable one (with `aliasing: "refuse"`, or when it is a uniform,
 *   which cannot be promoted), or when two writable bound ranges of one
 *   `GPUBuffer` overlap. Names both inputs and the rule; nothing is bound.
 * @throws {InvalidArgumentError} For an input that is not in a `GPUBuffer`
 *   or a repeated or invalid name.
 *
 * @example Refuse a read-only input that shares the output's GPUBuffer
 * ```ts
 * import { bindBuffers, BindingAliasError } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const usage = GPUBufferUsage.STORAGE;
 *   const shared = device.createBuffer({ size: 1024, usage });
 *   const inputs = [
 *     { name: "x", buffer: { buffer: shared, offset: 0, size: 256 }, access: "read" as const },
 *     { name: "y", buffer: { buffer: shared, offset: 512, size: 256 }, access: "read_write" as const },
 *   ];
 *   assert.throws(() => bindBuffers(device, inputs, { aliasing: "refuse" }), BindingAliasError);
 *   const bound = bindBuffers(device, inputs); // promotes x to read_write
 *   assert.deepEqual(bound.promoted, ["x"]);
 *   device.destroy();
 * }
 * ```
 */
export function bindBuffers(
  device: GPUDevice,
  inputs: readonly KernelBindingInput[],
  options?: BindBuffersOptions,
): BoundBuffers {
  options = _checkOptions(
    options,
    "options",
    ["aliasing", "firstBinding"],
    "bindBuffers()",
  );
  const policy = options.aliasing ?? "promote";
  if (policy !== "promote" && policy !== "refuse") {
    throw new InvalidArgumentError(
      `Cannot bind: aliasing must be "promote" or "refuse", received ${
        describeValue(policy)
      }`,
      { name: "aliasing", value: policy, limit: "promote | refuse" },
    );
  }
  const first = optionOr(options.firstBinding, 0);
  if (!Number.isSafeInteger(first) || first < 0) {
    throw new InvalidArgumentError(
      `Cannot bind: firstBinding must be a non-negative integer, received ${
        describeValue(first)
      }`,
      { name: "firstBinding", value: first, limit: 0 },
    );
  }
  if (!Array.isArray(inputs)) {
    throw new InvalidArgumentError(
      `Cannot bind: inputs must be an array, received ${describeValue(inputs)}`,
      { name: "inputs", value: inputs, limit: "array" },
    );
  }
  const names = new Set<string>();
  const resolved = inputs.map((input, i) => {
    validateObject(input, `inputs[${i}]`);
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(String(input.name))) {
      throw new InvalidArgumentError(
        `Cannot bind input ${i}: name must be a WGSL identifier, received ${
          describeValue(input?.name)
        }`,
        { name: `inputs[${i}].name`, value: input?.name, limit: "identifier" },
      );
    }
    if (names.has(input.name)) {
      throw new InvalidArgumentError(
        `Cannot bind input ${i}: the name ${input.name} is used twice`,
        { name: `inputs[${i}].name`, value: input.name, limit: "unique" },
      );
    }
    names.add(input.name);
    if (!["read", "read_write", "uniform"].includes(input.access)) {
      throw new InvalidArgumentError(
        `Cannot bind ${input.name}: access must be read, read_write or uniform, received ${
          describeValue(input.access)
        }`,
        {
          name: `inputs[${i}].access`,
          value: input.access,
          limit: "read | read_write | uniform",
        },
      );
    }
    return resolve(device, input, i);
  });
  const limits = device.limits;
  const bounds = resolved.map((r) => {
    const align = r.input.access === "uniform"
      ? limits.minUniformBufferOffsetAlignment
      : limits.minStorageBufferOffsetAlignment;
    const start = r.start - (r.start % align);
    const end = Math.min(
      Math.ceil(r.end / 4) * 4,
      r.buffer.size - (r.buffer.size % 4),
    );
    return { start, end: Math.max(end, start) };
  });
  const access = resolved.map((r) => r.input.access);
  const promoted: string[] = [];
  // Read-only inputs sharing a GPUBuffer with a writable one.
  for (let i = 0; i < resolved.length; i++) {
    if (writable(access[i])) continue;
    const partner = resolved.findIndex((r, j) =>
      j !== i && r.buffer === resolved[i].buffer &&
      writable(resolved[j].input.access)
    );
    if (partner < 0) continue;
    const [a, b] = [resolved[i].input.name, resolved[partner].input.name];
    if (policy === "refuse" || access[i] === "uniform") {
      throw new BindingAliasError(
        `Cannot bind ${a} (${
          access[i]
        }) and ${b} (read_write): they share one GPUBuffer, and ${WRITABLE_AND_READONLY_RULE}. Declare ${a} read_write (aliasing: "promote"), or copy it into its own GPUBuffer`,
        { first: a, second: b, rule: WRITABLE_AND_READONLY_RULE },
      );
    }
    access[i] = "read_write";
    promoted.push(a);
  }
  // Writable bound ranges of one GPUBuffer must not overlap.
  for (let i = 0; i < resolved.length; i++) {
    for (let j = i + 1; j < resolved.length; j++) {
      if (resolved[i].buffer !== resolved[j].buffer) continue;
      if (!writable(access[i]) && !writable(access[j])) continue;
      if (bounds[i].start < bounds[j].end && bounds[j].start < bounds[i].end) {
        const [a, b] = [resolved[i].input.name, resolved[j].input.name];
        throw new BindingAliasError(
          `Cannot bind ${a} and ${b}: their bound ranges [${bounds[i].start}, ${
            bounds[i].end
          }) and [${bounds[j].start}, ${
            bounds[j].end
          }) of one GPUBuffer overlap (ranges start on ${limits.minStorageBufferOffsetAlignment}-byte boundaries) and one is writable: ${WRITABLE_ALIASING_RULE}. Copy one of them into its own GPUBuffer, or compute in place through one binding`,
          { first: a, second: b, rule: WRITABLE_ALIASING_RULE },
        );
      }
    }
  }
  const bound: BoundBuffer[] = resolved.map((r, i) => {
    const byteShift = r.start - bounds[i].start;
    return {
      name: r.input.name,
      access: access[i],
      binding: {
        buffer: r.buffer,
        offset: bounds[i].start,
        size: bounds[i].end - bounds[i].start,
      },
      byteShift,
      elementOffset: byteShift / r.bytesPerElement + r.firstElement,
    };
  });
  const entries: GPUBindGroupEntry[] = bound.map((b, i) => ({
    binding: first + i,
    resource: { ...b.binding },
  }));
  const accessByName: Record<string, BindingAccess> = {};
  for (const b of bound) accessByName[b.name] = b.access;
  return {
    entries,
    inputs: bound,
    access: accessByName,
    promoted,
    declarations(types, group = 0) {
      return bound.map((b, i) => {
        const type = typeof types === "string" ? types : types[b.name];
        if (typeof type !== "string") {
          throw new InvalidArgumentError(
            `Cannot declare ${b.name}: no WGSL type given for it`,
            { name: "types", value: types, limit: b.name },
          );
        }
        const head = `@group(${group}) @binding(${first + i})`;
        return b.access === "uniform"
          ? `${head} var<uniform> ${b.name}: ${type};`
          : `${head} var<storage, ${b.access}> ${b.name}: array<${type}>;`;
      }).join("\n");
    },
  };
}
