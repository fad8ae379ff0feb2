import { describe, expect, it } from 'vitest';
import { BackendError } from './api';
import { PowerMonitor, type PowerApi } from './power.svelte';
import type { NpuDiagnosis, PowerSample } from './npu';

// Only the fields the monitor reads; the rest of the report is left out.
const ready = {
  ready: true,
  summary: 'NPU ready: NPU Strix (XDNA 2)',
  detection: { state: 'found' },
  checks: [{ id: 'device', status: 'ok', summary: 'NPU found', fix: null }],
} as unknown as NpuDiagnosis;
const reading: PowerSample = {
  t_secs: 0,
  npu_watts: { value: 1.6, source: 'npu' },
  npu_percent: { value: 40, source: 'npu' },
  package_watts: { value: 14.8, source: 'ppt' },
  battery_watts: { unavailable: 'no battery' },
  cpu_percent: { value: 12, source: '/proc/stat' },
  igpu_percent: { value: 3, source: 'gpu_metrics' },
};

describe('PowerMonitor', () => {
  it('keeps the diagnosis and adds a chart point per reading', async () => {
    const api: PowerApi = { npuStatus: async () => ready, powerSample: async () => reading };
    let clock = 1000;
    let speed: number | null = 0;
    const m = new PowerMonitor(api, () => speed, () => clock);
    await m.checkNpu();
    expect(m.diagnosis?.ready).toBe(true);
    await m.poll();
    clock = 2000;
    speed = 21.5;
    await m.poll();
    expect(m.history).toEqual([
      { at: 1000, watts: 14.8, tokensPerSecond: 0 },
      { at: 2000, watts: 14.8, tokensPerSecond: 21.5 },
    ]);
  });

  it('says what failed instead of showing zeros', async () => {
    const api: PowerApi = {
      npuStatus: async () => {
        throw new BackendError('internal', 'boom', 'npu_status');
      },
      powerSample: async () => {
        throw new BackendError('internal', 'no readings', 'power_sample');
      },
    };
    const m = new PowerMonitor(api, () => null, () => 5);
    await m.checkNpu();
    await m.poll();
    expect(m.diagnosisError).toBe('The NPU check could not run: boom');
    expect(m.sampleError).toBe('Power readings are unavailable: no readings');
    expect(m.history).toEqual([{ at: 5, watts: null, tokensPerSecond: null }]);
    expect(m.checking).toBe(false);
  });
});
