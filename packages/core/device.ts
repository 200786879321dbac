/**
 * {@linkcode Device}: which memory a pointer lives in, as a type and an index.
 *
 * @module
 */

import { InvalidArgumentError } from "./errors.ts";
import { describeValue } from "./validate.ts";

/**
 * Kind of device. The built-in kinds are `cpu`, `webgpu` and `wasm`; any other
 * lower-case identifier is accepted so runtimes can name their own.
 */
export type DeviceType =
  | "cpu"
  | "webgpu"
  | "wasm"
  | (string & Record<never, never>);

const TYPE_PATTERN = /^[a-z][a-z0-9_]*$/;
const MAX_INDEX = 0xffff;

/**
 * A device: a type and an index, immutable. `webgpu:1` is the second WebGPU
 * device. Devices compare by value with {@linkcode Device.equals}.
 *
 * @example Parse, print and compare
 * ```ts
 * import { Device } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const gpu = Device.parse("webgpu:1");
 * assert.equal(gpu.type, "webgpu");
 * assert.equal(gpu.index, 1);
 * assert.equal(String(gpu), "webgpu:1");
 * assert.ok(gpu.equals(new Device("webgpu", 1)));
 * assert.ok(Device.parse("cpu").equals(Device.cpu()));
 * ```
 */
export class Device {
  /** The device type, such as `cpu` or `webgpu`. */
  readonly type: DeviceType;
  /** The device index, an integer in `[0, 65535]`. */
  readonly index: number;
  #made = true;

  /**
   * Creates a device.
   *
   * @param type A lower-case identifier such as `cpu`, `webgpu` or `wasm`.
   * @param index The device index; 0 when omitted.
   * @throws {InvalidArgumentError} When the type is not an identifier or the
   * index is not an integer in `[0, 65535]`.
   */
  constructor(type: DeviceType, index = 0) {
    if (typeof type !== "string" || !TYPE_PATTERN.test(type)) {
      throw new InvalidArgumentError(
        `Invalid device type: must match ${TYPE_PATTERN}, received ${
          describeValue(type)
        }`,
        { name: "type", value: type, limit: String(TYPE_PATTERN) },
      );
    }
    if (!Number.isInteger(index) || index < 0 || index > MAX_INDEX) {
      throw new InvalidArgumentError(
        `Invalid device index: must be an integer in [0, ${MAX_INDEX}], received ${
          describeValue(index)
        }`,
        { name: "index", value: index, limit: [0, MAX_INDEX] },
      );
    }
    this.type = type;
    this.index = index + 0; // -0 is index 0
    Object.freeze(this);
  }

  /**
   * Parses the string form `type` or `type:index`.
   *
   * @param text Text such as `cpu`, `cpu:0` or `webgpu:1`.
   * @returns The device.
   * @throws {InvalidArgumentError} When the text is not a device string.
   *
   * @example
   * ```ts
   * import { Device } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * assert.equal(Device.parse("wasm:2").index, 2);
   * assert.throws(() => Device.parse("gpu:-1"), /Invalid device string/);
   * ```
   */
  static parse(text: string): Device {
    const match = typeof text === "string"
      ? /^([a-z][a-z0-9_]*)(?::(0|[1-9][0-9]{0,4}))?$/.exec(text)
      : null;
    if (match === null || (match[2] !== undefined && +match[2] > MAX_INDEX)) {
      throw new InvalidArgumentError(
        `Invalid device string: expected "type" or "type:index" with index in [0, ${MAX_INDEX}], received ${
          describeValue(text)
        }`,
        { name: "text", value: text, limit: "type[:index]" },
      );
    }
    return new Device(match[1], match[2] === undefined ? 0 : +match[2]);
  }

  /**
   * Whether `value` was made by the `Device` constructor: a brand check on
   * private state, so a look-alike such as `Object.create(Device.prototype)`,
   * which `instanceof` accepts but which has no type or index, is not one.
   *
   * @param value Any value.
   * @returns `true` for a real `Device`.
   *
   * @example
   * ```ts
   * import { Device } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * assert.ok(Device.isDevice(Device.cpu()));
   * assert.ok(!Device.isDevice(Object.create(Device.prototype)));
   * ```
   */
  static isDevice(value: unknown): value is Device {
    return typeof value === "object" && value !== null && #made in value;
  }

  /**
   * The CPU device with the given index.
   *
   * @param index Device index, 0 by default.
   * @returns `cpu:index`.
   */
  static cpu(index = 0): Device {
    return index === 0 ? CPU : new Device("cpu", index);
  }

  /**
   * Returns whether `other` has the same type and index.
   *
   * @param other Device to compare with.
   * @returns `true` when both are the same device.
   */
  equals(other: Device): boolean {
    return Device.isDevice(other) && other.type === this.type &&
      other.index === this.index;
  }

  /**
   * The string form `type:index`, the inverse of {@linkcode Device.parse}.
   *
   * @returns Text such as `webgpu:0`.
   */
  toString(): string {
    return `${this.type}:${this.index}`;
  }

  /**
   * JSON form: the string form.
   *
   * @returns Text such as `webgpu:0`.
   */
  toJSON(): string {
    return this.toString();
  }
}

const CPU = new Device("cpu", 0);
