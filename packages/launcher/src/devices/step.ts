import type { StepRecord } from "@jobrt/core";
import { type DeviceConf, resolveDevices } from "./resolve.js";

/**
 * Fills a component's `container.deviceEdits` from its `--container-device` names and the site's
 * defaults, before any runtime is loaded: a bad name or spec fails the step with nothing started.
 * Whatever a caller put in `deviceEdits` is replaced: only the host resolves devices.
 */
export function resolveStepDevices(record: StepRecord, conf: DeviceConf): void {
  const container = record.container;
  if (!container) return;
  delete container.deviceEdits;
  const edits = resolveDevices(container.devices ?? [], record.env, conf);
  if (edits) container.deviceEdits = edits;
}
