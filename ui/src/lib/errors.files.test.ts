// Why a file could not be read, said by its code (issue 53 #4): every code has a sentence in
// each of the five languages, the sentence names no path, and the path and the parser's words
// go under Details.
import { afterEach, describe, expect, it } from 'vitest';
import { CATALOGS, LANGUAGE_CODES, setLanguage, translate } from './i18n/index.svelte';
import { FILE_ERROR_CODES, fileErrorDetails, fileErrorText, type FileError } from './errors';

const damaged: FileError = {
  code: 'damaged',
  params: { file: 'broken-report.pdf', format: 'pdf' },
  detail: '/home/ana/Tax papers/broken-report.pdf: failed parsing cross reference table',
  message: '/home/ana/Tax papers/broken-report.pdf is not a readable PDF: failed parsing cross reference table. It may be damaged…',
};

afterEach(() => setLanguage('en'));

describe('file errors', () => {
  it('every code has a sentence in every language', () => {
    const missing = LANGUAGE_CODES.flatMap((code) => FILE_ERROR_CODES.filter((c) => !(`fileError.${c}` in CATALOGS[code])).map((c) => `${code}: ${c}`));
    expect(missing).toEqual([]);
  });

  it('says a damaged PDF plainly, with the path and the parser words under Details only', () => {
    expect(fileErrorText(damaged)).toBe('This file is damaged or is not really a PDF. Open it in the program that made it and save it again.');
    expect(fileErrorText(damaged)).not.toMatch(/home|cross reference/);
    expect(fileErrorDetails(damaged)).toBe(damaged.detail);
  });

  it('says it in the language in use', () => {
    setLanguage('de');
    expect(fileErrorText(damaged)).toMatch(/^Diese Datei ist beschädigt oder gar kein PDF\./);
    setLanguage('zh');
    expect(fileErrorText({ ...damaged, code: 'password' })).toBe(CATALOGS.zh['fileError.password']);
  });

  it('a scan without an OCR language says so, for a PDF and for a picture', () => {
    const scan = { code: 'scanned-no-ocr-language', params: { file: 'letter.pdf', format: 'pdf', languages: 'deu+eng', installed: '' }, detail: null, message: '' };
    expect(fileErrorText(scan)).toMatch(/^This PDF is a scanned image, and no OCR language is installed for it\./);
    expect(fileErrorText({ ...scan, params: { ...scan.params, format: 'png' } })).toMatch(/^This is a picture, and no OCR language/);
    expect(translate('fr', 'fileError.too-large', { size_mib: 300, limit_mib: 256 })).toContain('300');
  });

  it('a code this UI does not know says the file could not be read, its English words under Details', () => {
    const unknown = { code: 'something-new', params: { file: 'x.pdf' }, detail: '/tmp/x.pdf', message: 'x.pdf is odd' };
    expect(fileErrorText(unknown)).toBe('Hearth could not read this file.');
    expect(fileErrorDetails(unknown)).toBe('/tmp/x.pdf\nx.pdf is odd');
  });
});
