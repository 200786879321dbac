import {
  describeValue,
  Device,
  InvalidArgumentError,
  UnsupportedOperationError,
  validateFlag,
  validateObject,
} from "@allot/core";

/**
 * Checks that an options argument is an object (`null`, numbers and strings
 * are refused with a typed error rather than a `TypeError` on first read).
 *
 * @returns The options, unchanged.
 * @throws {InvalidArgumentError} When it is not an object.
 */
export function validateOptions<T>(options: T, name = "options"): T {
  validateObject(options, name);
  return options;
}

/**
 * Checks that the named options are `undefined` or a boolean (a `1` or a
 * `"false"` would otherwise be read as truthy by one option and as off by
 * another).
 *
 * @param options Options, already checked to be an object.
 * @param names The boolean options.
 * @throws {InvalidArgumentError} When one is neither.
 */
export function validateFlags<T extends object, K extends keyof T & string>(
  options: T,
  ...names: K[]
): Record<K, boolean> {
  // each option read once: a getter is not asked again after the check
  const flags = {} as Record<K, boolean>;
  for (const name of names) {
    flags[name] = validateFlag(options[name], name, false);
  }
  return flags;
}

/**
 * Checks an optional `device` option: `undefined` gives `Device.cpu()`.
 *
 * @returns The device.
 * @throws {InvalidArgumentError} When it is neither `undefined` nor a `Device`.
 */
export function validateDevice(value: unknown): Device {
  if (value === undefined) return Device.cpu();
  if (!Device.isDevice(value)) {
    throw new InvalidArgumentError(
      `Invalid device: must be a Device (such as Device.cpu()), received ${
        describeValue(value)
      }`,
      { name: "device", value },
    );
  }
  return value;
}

/**
 * Checks an optional collaborator option (a reporter): `undefined` or an
 * object, without reading any of its properties.
 *
 * @returns The value, unchanged.
 * @throws {InvalidArgumentError} When it is neither.
 */
export function validateOptionalObject<T>(value: T, name: string): T {
  if (value !== undefined) validateObject(value, name);
  return value;
}

/**
 * Refuses `shared: true` where the engine has no `SharedArrayBuffer` (a
 * browser page that is not cross-origin isolated): at construction, instead
 * of an out-of-memory on every later call.
 *
 * @throws {UnsupportedOperationError} When `shared` and there is none.
 */
export function requireSharedArrayBuffer(shared: boolean, what: string): void {
  if (shared && typeof SharedArrayBuffer === "undefined") {
    throw new UnsupportedOperationError(
      `Cannot make a shared ${what}: SharedArrayBuffer is not available here (a browser page must be cross-origin isolated)`,
    );
  }
}
