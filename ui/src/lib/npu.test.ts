import { describe, expect, it } from 'vitest';
import { explain, firstBlockingStep, fixPieces, formatJoules, formatWatts, headlinePower, npuModelReason, npuState, polyline, pushPoint, runningLabel, valueOf, type NpuDiagnosis, type PowerSample } from './npu';

const na = (why: string) => ({ unavailable: why });
const sample = (over: Partial<PowerSample> = {}): PowerSample => ({
  t_secs: 0,
  npu_watts: { value: 1.63, source: 'amdgpu gpu_metrics (card1) average_ipu_power' },
  npu_percent: { value: 45, source: 'amdgpu gpu_metrics (card1) average_ipu_activity' },
  package_watts: { value: 14.8, source: 'amdgpu hwmon4 power1_input (PPT)' },
  battery_watts: na('on mains power (BAT0 is charging)'),
  cpu_percent: na('no CPU time has passed since the previous reading'),
  igpu_percent: { value: 3, source: 'gpu_metrics' },
  ...over,
});

describe('npu helpers', () => {
  it('reads values and says where they came from or why not', () => {
    const s = sample();
    expect(valueOf(s.package_watts)).toBe(14.8);
    expect(valueOf(s.battery_watts)).toBeNull();
    expect(explain(s.package_watts)).toBe('from amdgpu hwmon4 power1_input (PPT)');
    expect(explain(s.battery_watts)).toBe('unavailable: on mains power (BAT0 is charging)');
    expect(explain(undefined)).toBe('not read yet');
  });

  it('formats watts and joules for people', () => {
    expect(formatWatts(14.83)).toBe('14.8 W');
    expect(formatWatts(null)).toBe('—');
    expect(formatJoules(0.42)).toBe('420 mJ');
    expect(formatJoules(12.44)).toBe('12.4 J');
    expect(formatJoules(2500)).toBe('2.5 kJ');
    expect(formatJoules(null)).toBe('—');
  });

  it('shows package power first, then the battery, then the NPU', () => {
    expect(headlinePower(sample()).label).toBe('power.label');
    const noPackage = sample({ package_watts: na('no amdgpu hwmon'), battery_watts: { value: 18.4, source: 'BAT0' } });
    expect(headlinePower(noPackage)).toEqual({ label: 'power.battery', metric: { value: 18.4, source: 'BAT0' } });
    const npuOnly = sample({ package_watts: na('x') });
    expect(headlinePower(npuOnly).label).toBe('power.npu');
    const none = sample({ package_watts: na('no amdgpu hwmon'), npu_watts: na('y') });
    expect(headlinePower(none).metric).toEqual(na('no amdgpu hwmon'));
  });

  it('keeps one minute of points', () => {
    let h = pushPoint([], { at: 0, watts: 10, tokensPerSecond: 0 });
    h = pushPoint(h, { at: 30_000, watts: 12, tokensPerSecond: 20 });
    h = pushPoint(h, { at: 70_000, watts: 11, tokensPerSecond: 0 });
    expect(h.map((p) => p.at)).toEqual([30_000, 70_000]);
  });

  it('draws series scaled to their maximum, skipping missing values', () => {
    const h = [
      { at: 0, watts: 10, tokensPerSecond: null },
      { at: 30_000, watts: null, tokensPerSecond: 5 },
      { at: 60_000, watts: 20, tokensPerSecond: 10 },
    ];
    const w = polyline(h, (p) => p.watts, 100, 50);
    expect(w.max).toBe(20);
    expect(w.points).toBe('0.0,25.0 100.0,0.0');
    expect(polyline([], (p) => p.watts, 100, 50)).toEqual({ points: '', max: 1 });
  });
});

/** A diagnosis with only the fields these helpers read (the rest of the report left out). */
function diagnosis(d: Pick<NpuDiagnosis, 'ready' | 'summary' | 'checks'> & { detection: { state: string } }): NpuDiagnosis {
  return d as unknown as NpuDiagnosis;
}

describe('the NPU in plain words', () => {
  const found = { state: 'found' as const };
  it('says no NPU neutrally, without a fix', () => {
    const d = diagnosis({ ready: false, summary: '', detection: { state: 'not_found' as const }, checks: [{ id: 'device', status: 'problem' as const, code: '', params: {}, fix_code: null, summary: 'No NPU was found', fix: 'Check the BIOS' }] });
    expect(npuState(d)).toEqual({ kind: 'none', sentence: 'This computer has no NPU; Hearth uses the processor.' });
  });

  it('shows only the first blocking step of an NPU that needs work', () => {
    const d = diagnosis({
      ready: false, summary: '', detection: found,
      checks: [
        { id: 'xrt', status: 'warning' as const, code: '', params: {}, fix_code: null, summary: 'XRT is old', fix: null },
        { id: 'access', status: 'problem' as const, code: '', params: {}, fix_code: null, summary: 'No permission', fix: 'Run `sudo usermod -aG render ana`, then log out.' },
        { id: 'memlock', status: 'problem' as const, code: '', params: {}, fix_code: null, summary: 'memlock', fix: 'x' },
      ],
    });
    expect(npuState(d).kind).toBe('needs-work');
    expect(firstBlockingStep(d)?.id).toBe('access');
    expect(fixPieces(d.checks[1].fix!)).toEqual([
      { text: 'Run ', command: false },
      { text: 'sudo usermod -aG render ana', command: true },
      { text: 'Then log out.', command: false },
    ]);
  });

  it('a command in brackets in mid-sentence stands on its own line, the words around it read on their own (review #27)', () => {
    const fix = 'Install the newest linux-firmware for your distribution (Ubuntu: `sudo apt install --only-upgrade linux-firmware`), then restart the computer.';
    expect(fixPieces(fix)).toEqual([
      { text: 'Install the newest linux-firmware for your distribution — Ubuntu: ', command: false },
      { text: 'sudo apt install --only-upgrade linux-firmware', command: true },
      { text: 'Then restart the computer.', command: false },
    ]);
    expect(fixPieces('Close it or wait (to stop it now: `kill 42`).').map((p) => p.text)).toEqual(['Close it or wait — to stop it now: ', 'kill 42']);
    expect(fixPieces('请更新（Ubuntu：`sudo apt upgrade`），然后重启。').map((p) => p.text)).toEqual(['请更新 — Ubuntu：', 'sudo apt upgrade', '然后重启。']);
  });

  it('an NPU that is ready without FastFlowLM is not called ready, and the picker reason says why', () => {
    const d = diagnosis({ ready: true, summary: '', detection: found, checks: [] });
    const missing = 'FastFlowLM is not installed (looked for flm and oflm on PATH, /opt/fastflowlm/bin/flm): install it';
    const models = [
      { builtin: 'starter', backends: [{ kind: 'cpu', usable: true, reason: null }] },
      { builtin: null, backends: [{ kind: 'npu', usable: false, reason: missing }, { kind: 'cpu', usable: true, reason: null }] },
    ];
    const reason = npuModelReason(models);
    expect(reason).toBe(missing);
    const state = npuState(d, null, reason);
    expect(state.kind).toBe('needs-work');
    expect(state.sentence).toContain('FastFlowLM');
    expect(state.sentence).not.toContain('/opt');
    expect(npuState(d, null, npuModelReason([models[0]]))).toEqual({ kind: 'ready', sentence: 'The NPU is ready.' });
    const usable = [{ backends: [{ kind: 'npu', usable: true, reason: null }] }, models[1]];
    expect(npuModelReason(usable)).toBeNull();
  });

  it('labels where answers are computed', () => {
    expect(runningLabel({ backend_kind: 'cpu', device: 'x' }, null, 3)).toBe('Running on the processor');
    expect(runningLabel({ backend_kind: 'npu', device: 'x' }, null, 3.1)).toBe('Running on the NPU · 3.1 W');
    expect(runningLabel({ backend_kind: 'cpu', device: 'x' }, { backend: 'npu' }, null)).toBe('Loading the model onto the NPU…');
    expect(runningLabel({ backend_kind: 'remote', device: 'gpu-box:8000' }, null, null)).toBe('Answers from gpu-box:8000');
  });
});
