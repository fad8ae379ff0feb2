import { describe, expect, it } from 'vitest';
import { explain, formatJoules, formatWatts, headlinePower, polyline, pushPoint, valueOf, type PowerSample } from './npu';

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
    expect(headlinePower(sample()).label).toBe('Power');
    const noPackage = sample({ package_watts: na('no amdgpu hwmon'), battery_watts: { value: 18.4, source: 'BAT0' } });
    expect(headlinePower(noPackage)).toEqual({ label: 'Battery draw', metric: { value: 18.4, source: 'BAT0' } });
    const npuOnly = sample({ package_watts: na('x') });
    expect(headlinePower(npuOnly).label).toBe('NPU power');
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
