/**
 * Internal: argument checks shared by `@allot/webgpu`'s public entry points
 * (a device, an options bag, a label, bytes to upload), so hostile values
 * are refused with a typed error before any state changes.
 *
 * @module
 */

import {
  describeValue,
  InvalidArgumentError,
  isPowerOfTwo,
  validateFlag,
  validateObject,
  validateOptionKeys,
  viewSpan,
} from "@allot/core";
import { _KNOWN_USAGE, _Usage } from "./_flags.ts";

/**
 * Checks that `device` looks like a `GPUDevice`: an object with `limits`,
 * `queue` and `createBuffer`.
 *
 * @param device The value passed as a device.
 * @param what The entry point, for the message.
 * @throws {InvalidArgumentError} When it is not.
 */
export function _checkDevice(device: unknown, what: string): void {
  const ok = typeof device === "object" && device !== null &&
    typeof (device as GPUDevice).limits === "object" &&
    (device as GPUDevice).limits !== null &&
    typeof (device as GPUDevice).queue === "object" &&
    (device as GPUDevice).queue !== null &&
    typeof (device as GPUDevice).createBuffer === "function";
  if (!ok) {
    throw new InvalidArgumentError(
      `${what}: device must be a GPUDevice, received ${describeValue(device)}`,
      { name: "device", value: device, limit: "GPUDevice" },
    );
  }
}

/**
 * Checks that the named limits of `device` are positive safe integers (and
 * the alignments powers of two): a device whose limits lie would otherwise
 * size buffers and ranges from `NaN` or fractions.
 *
 * @param device A checked device.
 * @param what The entry point, for the message.
 * @param names The limits this entry point reads.
 * @throws {InvalidArgumentError} For a limit that is not.
 */
export function _checkLimits(
  device: GPUDevice,
  what: string,
  names: readonly (keyof GPUSupportedLimits)[],
): void {
  const limits = device.limits;
  for (const name of names) {
    const value = limits[name] as unknown;
    const alignment = name.endsWith("Alignment");
    if (
      !Number.isSafeInteger(value) || (value as number) <= 0 ||
      (alignment && !isPowerOfTwo(value as number))
    ) {
      throw new InvalidArgumentError(
        `${what}: the device's limit ${name} must be a positive ${
          alignment ? "power of two" : "safe integer"
        }, received ${describeValue(value)}`,
        { name, value, limit: alignment ? "power of two" : "safe integer" },
      );
    }
  }
}

/**
 * Checks an options bag: `undefined` or an object (not `null`).
 *
 * @param options The options.
 * @param name Its name, for the message.
 * @param keys Given: the keys `where` reads; any other own key is refused
 * (a misspelt option would otherwise do nothing, silently).
 * @param where What reads them, for the message.
 * @returns The options, `{}` for `undefined`.
 * @throws {InvalidArgumentError} For anything else, or an unknown key.
 */
export function _checkOptions<T extends object>(
  options: T | undefined,
  name = "options",
  keys?: readonly string[],
  where: string = name,
): T {
  if (options === undefined) return {} as T;
  validateObject(options, name);
  if (keys !== undefined) validateOptionKeys(options, keys, where);
  return options;
}

/**
 * Checks a label: `undefined` (the default) or a string.
 *
 * @param label The label.
 * @param fallback The default.
 * @returns The label.
 * @throws {InvalidArgumentError} For anything but a string.
 */
export function _checkLabel(label: unknown, fallback: string): string {
  if (label === undefined) return fallback;
  if (typeof label !== "string") {
    throw new InvalidArgumentError(
      `Invalid label: must be a string, received ${describeValue(label)}`,
      { name: "label", value: label, limit: "string" },
    );
  }
  return label;
}

const _abLength = Object.getOwnPropertyDescriptor(
  ArrayBuffer.prototype,
  "byteLength",
)!.get!;

/**
 * The bytes of `data` (an `ArrayBuffer` or an `ArrayBufferView`) as a
 * `Uint8Array`, read through the built-in getters: a view that overrides
 * `buffer`, `byteOffset` or `byteLength`, or a proxy, cannot lie about them.
 *
 * @param data The bytes.
 * @param what The entry point, for the message.
 * @returns A view of the same bytes.
 * @throws {InvalidArgumentError} For anything else (a `SharedArrayBuffer`,
 * a proxy, a plain object).
 */
export function _bytesOf(data: unknown, what: string): Uint8Array {
  if (ArrayBuffer.isView(data)) {
    const span = viewSpan(data); // undefined: a view from another realm
    if (span) {
      return new Uint8Array(span.buffer, span.byteOffset, span.byteLength);
    }
  } else if (typeof data === "object" && data !== null) {
    try {
      _abLength.call(data);
      return new Uint8Array(data as ArrayBuffer);
    } catch {
      // not an ArrayBuffer
    }
  }
  throw new InvalidArgumentError(
    `${what}: data must be an ArrayBuffer or an ArrayBufferView, received ${
      describeValue(data)
    }`,
    { name: "data", value: data, limit: "ArrayBuffer | ArrayBufferView" },
  );
}

/**
 * Checks a GPU allocator's `reuse` option: `"after-fence"` or
 * `"queue-order"` (`undefined` or `null`: the default). A misspelt rule must
 * not silently select the other one.
 *
 * @param value The option.
 * @param fallback The allocator's default.
 * @returns The rule.
 * @throws {InvalidArgumentError} For anything else.
 */
export function _checkReuse(
  value: unknown,
  fallback: "after-fence" | "queue-order",
): "after-fence" | "queue-order" {
  if (value === undefined || value === null) return fallback;
  if (value !== "after-fence" && value !== "queue-order") {
    throw new InvalidArgumentError(
      `Invalid reuse: must be "after-fence" or "queue-order", received ${
        describeValue(value)
      }`,
      { name: "reuse", value, limit: ["after-fence", "queue-order"] },
    );
  }
  return value;
}

/**
 * Checks a `strict` option: `undefined` or a boolean. A truthy string or
 * number must not switch checking on (or a falsy one off) by accident.
 *
 * @param value The option.
 * @throws {InvalidArgumentError} For anything else.
 */
export function _checkStrict(value: unknown): void {
  validateFlag(value, "strict", false);
}

/**
 * Checks a segment source's `usage`: an integer of `GPUBufferUsage` bits the
 * specification defines, not 0, without `MAP_READ` or `MAP_WRITE` (a buffer
 * has one map state, and the queue cannot use it while any range is mapped:
 * the blocks of one segment could not be mapped independently; host access
 * goes through `GpuStaging`).
 *
 * @param value The option, read once by the caller.
 * @param fallback The default usage.
 * @returns The usage.
 * @throws {InvalidArgumentError} For anything else.
 */
export function _checkUsage(value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (
    typeof value !== "number" || !Number.isInteger(value) || value <= 0 ||
    value > _KNOWN_USAGE
  ) {
    throw new InvalidArgumentError(
      `Invalid usage: must be an integer of GPUBufferUsage bits in [1, 0x${
        _KNOWN_USAGE.toString(16)
      }], received ${describeValue(value)}`,
      { name: "usage", value, limit: _KNOWN_USAGE },
    );
  }
  const mapped = value & (_Usage.MAP_READ | _Usage.MAP_WRITE);
  if (mapped !== 0) {
    throw new InvalidArgumentError(
      `Invalid usage: MAP_READ and MAP_WRITE cannot be pooled (a buffer has one map state and the queue cannot use it while any range is mapped, so the blocks of one segment cannot be mapped independently; read and write blocks through GpuStaging), received 0x${
        value.toString(16)
      }`,
      {
        name: "usage",
        value,
        limit: _KNOWN_USAGE & ~(_Usage.MAP_READ | _Usage.MAP_WRITE),
      },
    );
  }
  return value;
}
