/**
 * Internal: one record per `GPUDevice` that knows whether the device was lost
 * and tells the objects built on it (segment sources, staging pools, kernels)
 * so they drop their pools once.
 *
 * @module
 */

import { DeviceLostError } from "./device_lost_error.ts";

/** What each allot object on a device knows about the device. */
export interface _DeviceState {
  /** Whether `device.lost` has resolved. */
  lost: boolean;
  /** The reason from `GPUDeviceLostInfo`, once lost. */
  reason: string;
  /** The message from `GPUDeviceLostInfo`, once lost. */
  message: string;
  /** Called once when the device is lost; errors in them are swallowed. */
  listeners: Set<() => void>;
}

const states = new WeakMap<GPUDevice, _DeviceState>();
// the last device asked for: allocation paths ask for the same one every
// call, and a comparison is cheaper than a WeakMap lookup
let lastDevice: GPUDevice | undefined;
let lastState: _DeviceState | undefined;

/**
 * Returns the state of `device`, watching `device.lost` on first use.
 *
 * @param device The device.
 * @returns Its shared state.
 */
export function _deviceState(device: GPUDevice): _DeviceState {
  // (Short, so that it inlines into every allocation; the rest is apart.)
  return device === lastDevice ? lastState! : stateOf(device);
}

/** _deviceState() of a device other than the last one asked for. */
function stateOf(device: GPUDevice): _DeviceState {
  let state = states.get(device);
  if (state !== undefined) {
    lastDevice = device;
    lastState = state;
    return state;
  }
  const created: _DeviceState = {
    lost: false,
    reason: "",
    message: "",
    listeners: new Set(),
  };
  state = created;
  states.set(device, created);
  lastDevice = device;
  lastState = created;
  const markLost = (reason: string, message: string): void => {
    if (created.lost) return;
    created.lost = true;
    created.reason = reason;
    created.message = message;
    const listeners = [...created.listeners];
    created.listeners.clear();
    for (const listener of listeners) {
      try {
        listener();
      } catch {
        // A listener that fails must not stop the others from dropping pools.
      }
    }
  };
  device.lost.then(
    (info) => markLost(info.reason ?? "unknown", info.message ?? ""),
    () => {},
  );
  // `device.lost` resolves in a later task: an allocation in the same task
  // as `destroy()` would succeed and fail only on use. Seeing the call
  // itself refuses it at once.
  const destroy = device.destroy;
  if (typeof destroy === "function") {
    try {
      Object.defineProperty(device, "destroy", {
        configurable: true,
        writable: true,
        value: function (this: GPUDevice): undefined {
          const result = destroy.call(this);
          markLost("destroyed", "destroy() was called");
          return result;
        },
      });
    } catch {
      // a frozen device: losses are seen when `device.lost` resolves
    }
  }
  return created;
}

// Removes the listener of an owner that was collected, so a device that
// outlives many allocators does not keep one closure per dropped owner.
const collected = new FinalizationRegistry<
  { listeners: Set<() => void>; listener: () => void }
>(({ listeners, listener }) => listeners.delete(listener));

/**
 * Calls `drop(owner)` once when `device` is lost, holding `owner` weakly: the
 * device outlives the sources, staging pools and kernels built on it, and
 * one nobody holds must not be kept alive (with its segments) by the device.
 * `drop` must not capture `owner` itself.
 *
 * @param device The device.
 * @param owner The object to tell.
 * @param drop Drops the owner's pools.
 */
export function _onDeviceLost<T extends object>(
  device: GPUDevice,
  owner: T,
  drop: (owner: T) => void,
): void {
  const state = _deviceState(device);
  if (state.lost) return;
  const ref = new WeakRef(owner);
  const listener = (): void => {
    const alive = ref.deref();
    if (alive !== undefined) drop(alive);
  };
  state.listeners.add(listener);
  collected.register(owner, { listeners: state.listeners, listener });
}

/**
 * Throws a {@linkcode DeviceLostError} when `device` was lost.
 *
 * @param device The device.
 * @param what The refused operation, such as `allocate 64 bytes`.
 * @throws {DeviceLostError} When the device was lost.
 */
export function _assertAlive(device: GPUDevice, what: string): void {
  const state = _deviceState(device);
  if (state.lost) throw _lostError(device, state, what);
}

/**
 * Makes the error for an operation refused on a lost device.
 *
 * @param device The device.
 * @param state Its state.
 * @param what The refused operation.
 * @returns The error.
 */
export function _lostError(
  device: GPUDevice,
  state: _DeviceState,
  what: string,
): DeviceLostError {
  const label = device.label ? `"${device.label}"` : "(unlabelled)";
  const detail = state.message ? `: ${state.message}` : "";
  return new DeviceLostError(
    `Cannot ${what}: device ${label} was lost (${state.reason})${detail}`,
    { reason: state.reason },
  );
}
