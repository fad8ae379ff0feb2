// Live NPU status and power for the status area: asks the backend for the doctor's findings once
// (and again on request) and for a power reading about once a second, keeping the last minute of
// watts and tokens per second for the chart. It talks to the backend only through `api`.
import { t } from './i18n/index.svelte';
import type { Api } from './api';
import { BackendError } from './api';
import { headlinePower, pushPoint, valueOf, type HistoryPoint, type NpuDiagnosis, type PowerSample } from './npu';

export type PowerApi = Pick<Api, 'npuStatus' | 'powerSample'>;

function message(error: unknown): string {
  if (error instanceof BackendError) return error.message;
  if (error instanceof Error) return error.message;
  return String(error);
}

export class PowerMonitor {
  diagnosis = $state<NpuDiagnosis | null>(null);
  diagnosisError = $state<string | null>(null);
  checking = $state(false);
  sample = $state<PowerSample | null>(null);
  sampleError = $state<string | null>(null);
  history = $state<HistoryPoint[]>([]);

  private timer: ReturnType<typeof setInterval> | undefined;

  /**
   * `tokensPerSecond` gives the current generation speed (0 when idle, null when unknown);
   * `now` is the clock for chart points (tests pass their own).
   */
  constructor(
    private readonly api: PowerApi,
    private readonly tokensPerSecond: () => number | null,
    private readonly now: () => number = () => Date.now(),
  ) {}

  /** Runs the NPU doctor (it may take a few seconds: it asks FastFlowLM for its version). */
  async checkNpu(): Promise<void> {
    this.checking = true;
    try {
      this.diagnosis = await this.api.npuStatus();
      this.diagnosisError = null;
    } catch (error) {
      this.diagnosisError = `The NPU check could not run: ${message(error)}`;
    } finally {
      this.checking = false;
    }
  }

  /** Takes one power reading and adds a chart point (watts missing when the reading failed). */
  async poll(): Promise<void> {
    let watts: number | null = null;
    try {
      const sample = await this.api.powerSample();
      this.sample = sample;
      this.sampleError = null;
      watts = valueOf(headlinePower(sample).metric);
    } catch (error) {
      this.sampleError = t('power.unavailable', { reason: message(error) });
    }
    this.history = pushPoint(this.history, { at: this.now(), watts, tokensPerSecond: this.tokensPerSecond() });
  }

  /** Starts polling every `intervalMs`; returns the function that stops it. */
  start(intervalMs = 1000): () => void {
    void this.checkNpu();
    void this.poll();
    this.timer = setInterval(() => void this.poll(), intervalMs);
    return () => this.stop();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
