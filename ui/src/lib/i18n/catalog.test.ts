// The catalog's rules (issue 38): no component shows a word outside the catalog, every language
// has every key of English and no other, each message parses and names the same parameters as
// English, and a translation differs from English unless it is on the allow-list.
import { describe, expect, it } from 'vitest';
import { parse, TYPE, type MessageFormatElement } from '@formatjs/icu-messageformat-parser';
import { en } from './en';
import { CATALOGS, LANGUAGE_CODES, setLanguage, t, translate } from './index.svelte';
import { untranslated } from './scan';
import { errorText } from '../errors';
import { checkFix, checkSummary, type NpuCheck } from '../npu';
import { Notifications, memoryInMap } from '../notifications.svelte';
import type { Notice } from '../types';

const components = import.meta.glob<string>(['../../**/*.svelte'], { query: '?raw', import: 'default', eager: true });

/** Keys whose value may equal English: names, units and words the languages share. */
const SAME_AS_ENGLISH: Record<string, string[]> = {
  zh: ['meter.npu', 'voice.whisperBase'],
  es: ['catalog.tokens', 'meter.npu', 'summary.join', 'sources.fileAt', 'voice.whisperBase'],
  de: ['settings.threads', 'models.nameOptional', 'meter.npu', 'summary.join', 'sources.fileAt', 'voice.whisperBase'],
  fr: ['sidebar.label', 'chat.label', 'settings.threads', 'sources.title', 'receipt.version', 'meter.npu', 'summary.join', 'attach.dialogFilter', 'sources.page', 'sources.fileAt', 'voice.whisperBase'],
};

/** The parameters a message names, each with how it is used (argument, plural, number…). */
function parameters(text: string): string[] {
  const found = new Set<string>();
  const walk = (elements: MessageFormatElement[]) => {
    for (const el of elements) {
      if (el.type === TYPE.literal || el.type === TYPE.pound) continue;
      found.add(`${el.value}:${TYPE[el.type] === 'argument' ? 'argument' : TYPE[el.type]}`);
      if (el.type === TYPE.plural || el.type === TYPE.select) for (const o of Object.values(el.options)) walk(o.value);
      if (el.type === TYPE.tag) walk(el.children);
    }
  };
  walk(parse(text, { ignoreTag: true }));
  return [...found].sort();
}

describe('catalog', () => {
  it('finds every component', () => {
    expect(Object.keys(components).length).toBeGreaterThan(20);
  });

  it('no component shows a literal outside the catalog', () => {
    const found = Object.entries(components).flatMap(([file, source]) => untranslated(source).map((s) => `${file}: ${s}`));
    expect(found).toEqual([]);
  });

  it('the scan sees text, titles and labels, and not expressions', () => {
    const source = `<script>const a = 'x'; const b = 'Said in script'; // 'A comment'\n</script><p title="Hello there" class={ok ? 'ok' : 'bad-one'}>Some words {t('k')}</p><b>{busy ? 'Saving…' : 'Save'}</b><span>%</span>`;
    expect(untranslated(source)).toEqual(['Hello there', 'Some words', 'Saving…', 'Save', 'Said in script']);
  });

  for (const code of LANGUAGE_CODES) {
    it(`${code} has every key of English and no other`, () => {
      const keys = Object.keys(CATALOGS[code]);
      expect(Object.keys(en).filter((k) => !keys.includes(k))).toEqual([]);
      expect(keys.filter((k) => !(k in en))).toEqual([]);
    });

    it(`${code}'s messages parse and name the parameters English names`, () => {
      const wrong = Object.entries(CATALOGS[code]).filter(
        ([key, text]) => parameters(text).join() !== parameters(en[key as keyof typeof en]).join(),
      );
      expect(wrong.map(([key]) => key)).toEqual([]);
    });

    if (code === 'en') continue;
    it(`${code} translates every message (apart from its allow-list)`, () => {
      const same = Object.entries(CATALOGS[code])
        .filter(([key, text]) => text === en[key as keyof typeof en] && !SAME_AS_ENGLISH[code].includes(key))
        .map(([key]) => key);
      expect(same).toEqual([]);
    });
  }

  it('formats plurals and numbers for the language', () => {
    expect(translate('en', 'format.daysAgo', { count: 1 })).toBe('1 day ago');
    expect(translate('en', 'format.daysAgo', { count: 3 })).toBe('3 days ago');
    expect(translate('de', 'format.daysAgo', { count: 3 })).toBe('vor 3 Tagen');
    expect(translate('en', 'composer.tooLong', { count: 12345, max: 10000 })).toContain('12,345');
    expect(translate('de', 'composer.tooLong', { count: 12345, max: 10000 })).toContain('12.345');
    expect(translate('en', 'app.statusOpens', { status: "It's {odd}" })).toBe("It's {odd}. Open the Performance page");
  });

  it('t follows the language in use; an unknown one is English', () => {
    setLanguage('fr');
    expect(t('common.settings')).toBe(CATALOGS.fr['common.settings']);
    setLanguage('ja');
    expect(t('common.settings')).toBe('Settings');
  });

  it('translates a backend error by code, detail and params, and keeps the English text for what it lacks', () => {
    const named = { code: 'not_found', message: 'hub: no installed model is called qwen3-4b.', detail: 'model', params: { name: 'qwen3-4b' } };
    const plain = { code: 'busy', message: 'An answer is already being written.', detail: null, params: {} };
    const unknown = { code: 'something_new', message: 'A new failure.', detail: null, params: {} };
    setLanguage('en');
    expect(errorText(named)).toBe('No installed model is called qwen3-4b.');
    expect(errorText(plain)).toBe('An answer is already being written.');
    setLanguage('zh');
    expect(errorText(named)).toBe('没有名为 qwen3-4b 的已安装模型。');
    expect(errorText(plain)).toBe(CATALOGS.zh['error.busy']);
    expect(errorText(unknown)).toBe('A new failure.');
    setLanguage('en');
  });

  it('shows an NPU finding and its fix by code and params, the commands kept, and the English text for a code it lacks', () => {
    const memlock: NpuCheck = {
      id: 'memlock', status: 'problem', code: 'memlock_low', fix_code: 'memlock_write',
      params: { limit: '8 MiB', content: '* soft memlock unlimited\\n', path: '/etc/security/limits.d/99-hearth-memlock.conf' },
      summary: 'Locked-memory limit is 8 MiB; the NPU runtime needs unlimited', fix: 'Allow unlimited locked memory: …',
    };
    setLanguage('en');
    expect(checkSummary(memlock)).toBe(memlock.summary);
    expect(checkFix(memlock)).toBe("Allow unlimited locked memory:\n  printf '* soft memlock unlimited\\n' | sudo tee /etc/security/limits.d/99-hearth-memlock.conf\nThen log out and log back in.");
    setLanguage('fr');
    expect(checkSummary(memlock)).toBe('La limite de mémoire verrouillée est 8 MiB ; l’environnement d’exécution du NPU demande illimité');
    const group = { ...memlock, id: 'access', code: 'access_denied', fix_code: 'join_group', params: { node: '/dev/accel/accel0', group: 'render', user: 'ana' } } as NpuCheck;
    expect(checkFix(group)).toContain('`sudo usermod -aG render ana`');
    const unknown = { ...memlock, code: 'something_new', fix_code: null, fix: null } as NpuCheck;
    expect(checkSummary(unknown)).toBe(memlock.summary);
    expect(checkFix(unknown)).toBeNull();
    setLanguage('en');
  });

  it('review #14 (S3): Chinese counts characters, not English words; German says Leistungsaufnahme for power, Leistung only for the page', () => {
    expect(CATALOGS.zh['receipt.wordsPerSecond']).toContain('个字');
    expect(CATALOGS.zh['receipt.wordsPerSecond']).not.toContain('个词');
    const power = ['perf.powerLive', 'power.wattsKey', 'power.chartLabel', 'receipt.meterPower', 'power.whyText'] as const;
    for (const key of power) expect(CATALOGS.de[key], key).toMatch(/Leistungsaufnahme/);
    expect(CATALOGS.de['common.performance']).toBe('Leistung');
  });

  it('shows a backend notice by its code in the language in use, and remembers it closed in any language', () => {
    const memory = memoryInMap();
    const notice = { level: 'info', code: 'demo_opened', params: {}, message: 'No model is downloaded yet, so Hearth opened its tiny demo model.' } as Notice;
    setLanguage('es');
    const first = new Notifications(memory, () => {});
    first.showNotices([notice]);
    expect(first.toasts[0].message).toBe(CATALOGS.es['notice.demo_opened']);
    first.forgetNotice(first.toasts[0]);
    setLanguage('en');
    const later = new Notifications(memory, () => {});
    later.showNotices([notice, { ...notice, code: 'something_new', message: 'A new one.' }]);
    expect(later.toasts.map((toast) => toast.message)).toEqual(['A new one.']);
  });
});
