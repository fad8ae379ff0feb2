// Browser tests: the built UI (ui/dist) in headless Chromium against the mocked IPC backend in
// mock-backend.ts, served over loopback HTTP with the app's content security policy.
// Usage: node tests/browser/run.mjs   (build the UI first: npm run build:ui)
import { createServer } from 'node:http';
import { readFile, readFile as rf } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join, extname, normalize, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const dist = join(root, 'ui', 'dist');
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';

if (!existsSync(join(dist, 'assets'))) {
  console.error('browser tests: ui/dist is not built; run `npm run build:ui` first');
  process.exit(2);
}

// The same policy Tauri puts on the app (src-tauri/tauri.conf.json), in header form.
const conf = JSON.parse(await rf(join(root, 'src-tauri', 'tauri.conf.json'), 'utf8'));
const csp = Object.entries(conf.app.security.csp)
  .map(([k, v]) => `${k} ${v}`)
  .join('; ');

// Bundle the mock backend (with @tauri-apps/api/mocks) into one script for addInitScript.
const bundled = await build({
  configFile: false,
  logLevel: 'warn',
  build: {
    write: false,
    lib: { entry: join(here, 'mock-backend.ts'), formats: ['iife'], name: 'hearthMock' },
    minify: false,
  },
});
const mockScript = (Array.isArray(bundled) ? bundled[0] : bundled).output[0].code;

const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.png': 'image/png', '.svg': 'image/svg+xml' };
const server = createServer(async (req, res) => {
  const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^(\.\.[/\\])+/, '');
  const file = join(dist, path === '/' ? 'index.html' : path);
  try {
    const body = await readFile(file);
    res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream', 'content-security-policy': csp });
    res.end(body);
  } catch {
    res.writeHead(404).end('not found');
  }
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${server.address().port}/`;

// Playwright gives each launch a fresh, temporary profile (its own --user-data-dir).
const browser = await chromium.launch({
  executablePath: chromiumPath,
  headless: true,
  args: [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-quic',
  ],
});

/** A fresh page with the mock backend; collects errors, CSP violations and outside requests. */
async function openApp() {
  const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().startsWith('ipc->')) problems.push(`console error: ${m.text()}`);
  });
  page.on('request', (r) => {
    if (!r.url().startsWith(url)) problems.push(`request outside the app: ${r.url()}`);
  });
  await page.addInitScript(mockScript);
  // The app runs with Tauri's freezePrototype: do the same here so the UI is tested that way.
  if (conf.app.security.freezePrototype) await page.addInitScript(() => Object.freeze(Object.prototype));
  await page.addInitScript(() => {
    window.__violations = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  await page.goto(url);
  await page.getByTestId('chat-input').waitFor();
  return { page, context, problems };
}

async function send(page, text) {
  await page.getByTestId('chat-input').fill(text);
  await page.getByTestId('send-button').click();
}

function assert(condition, message) {
  if (!condition) throw new Error(message);
}

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

test('first start opens on the demo model and says so', async ({ page }) => {
  await page.getByText('tiny demo model', { exact: false }).first().waitFor();
  assert(await page.getByText('Get a real model').isVisible(), 'points to the model manager');
  const runsOn = await page.getByTestId('stats-backend').textContent();
  assert(runsOn.includes('cpu') && runsOn.includes('Mock CPU'), `backend and device shown, got ${runsOn}`);
  assert((await page.getByTestId('model-picker').inputValue()) === 'cpu:demo', 'model picker shows the demo');
  const option = await page.getByTestId('model-picker').locator('option[value="cpu:demo"]').textContent();
  assert(option.includes('On this computer'), `says where it runs: ${option}`);
});

test('a message streams an answer with live tokens/s and a receipt', async ({ page }) => {
  await send(page, 'Hello there');
  const answer = page.getByTestId('assistant-message').last();
  await answer.getByText('mock', { exact: true }).waitFor();
  await page.getByTestId('send-button').waitFor();
  const text = await answer.textContent();
  assert(text.includes('Hello! I am a mock answer.'), `answer text: ${text}`);
  assert((await answer.locator('strong').textContent()) === 'mock', 'markdown rendered');
  const rate = await page.getByTestId('stats-tokens-per-second').textContent();
  assert(/^\d+(\.\d)? tok\/s$/.test(rate), `tokens/s figure: ${rate}`);
  assert(/ms|s$/.test(await page.getByTestId('stats-ttft').textContent()), 'time to first token shown');
  assert((await answer.locator('.receipt summary').textContent()).includes('tokens'), 'receipt attached');
  const list = page.getByTestId('conversation-list');
  assert((await list.textContent()).includes('Hello there'), 'conversation listed under its first message');
  assert((await page.locator('[aria-live="polite"]').count()) === 0, 'live region only while streaming');
});

test('stop ends a slow answer and keeps what was written', async ({ page }) => {
  await page.evaluate(() => { window.__mock.tokenDelayMs = 200; window.__mock.answer = 'one two three four five six seven eight nine ten'; });
  await send(page, 'Count slowly');
  await page.getByTestId('stop-button').waitFor();
  assert((await page.locator('[aria-live="polite"]').count()) === 1, 'the streaming answer is an ARIA live region');
  await page.getByTestId('assistant-message').last().getByText('two').waitFor();
  await page.getByTestId('stop-button').click();
  await page.getByTestId('send-button').waitFor();
  const answer = page.getByTestId('assistant-message').last();
  assert((await answer.textContent()).includes('Stopped'), 'answer marked as stopped');
  assert(!(await answer.textContent()).includes('ten'), 'generation did stop');
});

test('Enter sends, Escape stops, all from the keyboard', async ({ page }) => {
  await page.evaluate(() => { window.__mock.tokenDelayMs = 200; window.__mock.answer = 'a b c d e f g h i j k l'; });
  await page.getByTestId('chat-input').focus();
  await page.keyboard.type('Keyboard only');
  await page.keyboard.press('Enter');
  await page.getByTestId('stop-button').waitFor();
  await page.keyboard.press('Escape');
  await page.getByTestId('send-button').waitFor();
  assert((await page.getByTestId('assistant-message').last().textContent()).includes('Stopped'), 'Escape stopped it');
  await page.keyboard.press('Control+n');
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="assistant-message"]').length === 0);
});

test('model output cannot run script or load remote content', async ({ page, problems }) => {
  await page.evaluate(() => {
    window.__mock.answer = 'Look <img src="http://192.0.2.1/x.png" onerror="window.__pwned=1"> ![cat](http://192.0.2.1/cat.png) <script>window.__pwned=2</script> <iframe src="http://192.0.2.1/"></iframe> [link](javascript:window.__pwned=3) [site](http://192.0.2.1/)\n\n```js\nconsole.log(1)\n```\n';
    window.__mock.tokenDelayMs = 1;
  });
  await send(page, 'Be evil');
  await page.getByTestId('send-button').waitFor();
  const answer = page.getByTestId('assistant-message').last();
  assert((await answer.locator('img, script, iframe, [href]').count()) === 0, 'no img/script/iframe/href in the answer');
  assert((await page.evaluate(() => window.__pwned)) === undefined, 'no injected code ran');
  await answer.locator('a[title="http://192.0.2.1/"]').first().click();
  assert(page.url() === url, 'clicking a link does not navigate the app');
  assert((await answer.locator('button.copy-code').count()) === 1, 'code block has a copy button');
  assert(!problems.some((p) => p.includes('192.0.2.1')), `no remote request: ${problems.join('; ')}`);
});

test('empty and 1 MB messages are refused with a clear reason', async ({ page }) => {
  assert(await page.getByTestId('send-button').isDisabled(), 'send disabled on empty input');
  await page.getByTestId('chat-input').fill('   ');
  assert(await page.getByTestId('send-button').isDisabled(), 'send disabled on blank input');
  const huge = 'x'.repeat(1024 * 1024);
  await page.getByTestId('chat-input').fill(huge);
  assert(await page.getByTestId('send-button').isDisabled(), 'send disabled on a 1 MB paste');
  const hint = await page.locator('#composer-hint').textContent();
  assert(hint.includes('1,048,576 characters'), `hint says how long: ${hint}`);
  await page.getByTestId('chat-input').press('Enter');
  assert((await page.getByTestId('chat-input').inputValue()).length === huge.length, 'the pasted text is not lost');
  const calls = await page.evaluate(() => window.__mock.calls.filter((c) => c.cmd === 'start_answer').length);
  assert(calls === 0, 'nothing was sent to the backend');
});

test('a backend error is shown in plain words and the message is kept', async ({ page }) => {
  await page.evaluate(() => { window.__mock.failStart = { code: 'context', message: 'your message is too long for this model' }; });
  await send(page, 'This will fail');
  await page.getByTestId('error-message').waitFor();
  assert((await page.getByTestId('error-message').textContent()).includes('too long for this model'), 'error text shown');
  assert((await page.getByTestId('chat-input').inputValue()) === 'This will fail', 'the message is back in the box');
});

test('regenerate and edit-and-resend replace the answer', async ({ page }) => {
  await page.evaluate(() => { window.__mock.tokenDelayMs = 1; window.__mock.answer = 'First answer'; });
  await send(page, 'Question one');
  await page.getByTestId('assistant-message').getByText('First answer').waitFor();
  await page.evaluate(() => { window.__mock.answer = 'Second answer'; });
  await page.getByRole('button', { name: 'Write this answer again' }).click();
  await page.getByTestId('assistant-message').getByText('Second answer').waitFor();
  assert((await page.getByTestId('assistant-message').count()) === 1, 'regenerate replaces, not adds');
  await page.evaluate(() => { window.__mock.answer = 'Edited answer'; });
  await page.getByRole('button', { name: 'Edit and resend this message' }).click();
  await page.getByLabel('Edit your message').fill('Question one, edited');
  await page.getByRole('button', { name: 'Send the edited message' }).click();
  await page.getByTestId('assistant-message').getByText('Edited answer').waitFor();
  assert((await page.getByTestId('user-message').textContent()).includes('Question one, edited'), 'edited text shown');
  assert((await page.getByTestId('assistant-message').count()) === 1, 'one answer after edit');
});

test('thinking is folded away', async ({ page }) => {
  await page.evaluate(() => { window.__mock.tokenDelayMs = 1; window.__mock.answer = '<think>secret plan here</think>The visible answer'; });
  await send(page, 'Think first');
  await page.getByTestId('assistant-message').getByText('The visible answer').waitFor();
  const details = page.getByTestId('assistant-message').locator('details.thinking');
  assert((await details.count()) === 1, 'thinking section present');
  assert(!(await details.evaluate((d) => d.open)), 'folded when done');
  assert(!(await page.getByText('secret plan here').isVisible()), 'not visible until unfolded');
});

test('conversations are searched, renamed and deleted', async ({ page }) => {
  await page.evaluate(() => { window.__mock.tokenDelayMs = 1; });
  await send(page, 'About apples');
  await page.getByTestId('send-button').waitFor();
  await page.getByRole('button', { name: 'New conversation (Ctrl+N)' }).click();
  await send(page, 'About pears');
  await page.getByTestId('send-button').waitFor();
  const list = page.getByTestId('conversation-list');
  await page.getByLabel('Search conversations').fill('apple');
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="conversation-list"] li').length === 1);
  assert((await list.textContent()).includes('About apples'), 'search finds it');
  await page.getByLabel('Search conversations').fill('');
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="conversation-list"] li').length === 2);
  await page.getByLabel('More actions for About pears').click();
  await page.getByRole('button', { name: 'Rename About pears' }).click();
  await page.getByLabel('New name for the conversation').fill('Pear notes');
  await page.keyboard.press('Enter');
  await list.getByText('Pear notes').waitFor();
  await page.getByLabel('More actions for Pear notes').click();
  await page.getByRole('button', { name: 'Delete Pear notes' }).click();
  await page.getByRole('button', { name: 'Confirm deleting Pear notes' }).click();
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="conversation-list"] li').length === 1);
});

test('context warning appears before the context fills', async ({ page }) => {
  await page.evaluate(() => { window.__mock.tokenDelayMs = 1; window.__mock.promptTokens = 420; window.__mock.contextLimit = 512; });
  await send(page, 'Long chat');
  await page.getByTestId('send-button').waitFor();
  const warning = await page.locator('.context-warning').textContent();
  assert(warning.includes('oldest messages will be left out'), `warning: ${warning}`);
});

test('settings change the theme and are kept', async ({ page }) => {
  await page.getByRole('button', { name: 'Settings (Ctrl+,)' }).click();
  await page.getByLabel('Theme').selectOption('dark');
  await page.waitForFunction(() => document.documentElement.dataset.theme === 'dark');
  const saved = await page.evaluate(() => window.__mock.calls.filter((c) => c.cmd === 'save_settings').at(-1).args.settings.theme);
  assert(saved === 'dark', 'saved through the backend');
});

test('a remote server is tested, saved and chosen, and the app says messages leave this computer', async ({ page }) => {
  await page.getByRole('button', { name: 'Settings (Ctrl+,)' }).click();
  const section = page.getByTestId('remote-settings');
  assert((await section.textContent()).includes('your messages leave this computer'), 'the section says plainly where answers are computed');
  await page.getByLabel('Address').fill('http://nowhere:1');
  await section.getByRole('button', { name: 'Test connection' }).click();
  const result = page.getByTestId('remote-test-result');
  await result.waitFor();
  assert((await result.textContent()).includes('Nothing answers at http://nowhere:1'), `a plain error next to the button: ${await result.textContent()}`);
  await page.getByLabel('Address').fill('http://gpu-box:8000/v1');
  await page.getByLabel('API key (if the server needs one)').fill('sk-test');
  await section.getByRole('button', { name: 'Test connection' }).click();
  await page.waitForFunction(() => document.querySelector('[data-testid="remote-test-result"]')?.textContent.includes('qwen-remote'));
  await page.locator('#remote-model').selectOption('llama-remote');
  await section.getByRole('button', { name: 'Save' }).click();
  await page.getByTestId('remote-save-result').waitFor();
  const saved = await page.evaluate(() => window.__mock.calls.filter((c) => c.cmd === 'save_remote_server').at(-1).args);
  assert(saved.url === 'http://gpu-box:8000/v1' && saved.apiKey === 'sk-test' && saved.model === 'llama-remote', `saved: ${JSON.stringify(saved)}`);
  assert((await section.textContent()).includes('A key is saved'), 'the key is not shown back, only that one is saved');
  // The picker lists the server's models in their own group, with the plain fact.
  const group = page.getByTestId('model-picker').locator('optgroup[data-testid="remote-group"]');
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="remote-group"] option').length === 2);
  assert((await group.getAttribute('label')).includes('leave this computer'), 'the remote group says messages leave this computer');
  await page.getByTestId('model-picker').selectOption('remote:qwen-remote');
  const note = page.getByTestId('remote-note');
  await note.waitFor();
  assert((await note.textContent()).includes('Answers come from gpu-box:8000; your messages leave this computer.'), `note: ${await note.textContent()}`);
  assert((await page.getByTestId('model-picker').inputValue()) === 'remote:qwen-remote', 'the chosen remote model is marked');
  await page.getByRole('button', { name: 'Close settings' }).click();
  await page.evaluate(() => { window.__mock.tokenDelayMs = 1; });
  await send(page, 'Where do you run?');
  await page.getByTestId('send-button').waitFor();
  const answer = page.getByTestId('assistant-message').last();
  await answer.locator('.receipt summary').click();
  assert((await answer.locator('.receipt .place').textContent()).includes('a remote server (gpu-box:8000)'), 'the receipt says where it ran');
});

test('every control has an accessible name', async ({ page }) => {
  await page.getByRole('button', { name: 'Settings (Ctrl+,)' }).click();
  const unnamed = await page.evaluate(() => {
    const bad = [];
    for (const el of document.querySelectorAll('button, input, select, textarea, summary')) {
      const labelled = el.getAttribute('aria-label') || el.getAttribute('aria-labelledby') || (el.id && document.querySelector(`label[for="${el.id}"]`)) || el.closest('label') || el.textContent.trim();
      if (!labelled) bad.push(el.outerHTML.slice(0, 80));
    }
    return bad;
  });
  assert(unnamed.length === 0, `controls without a name: ${unnamed.join(', ')}`);
});

test('the NPU status, live watts with their source, and joules on the receipt', async ({ page }) => {
  assert((await page.getByTestId('npu-ready').textContent()).includes('NPU ready: NPU Strix (XDNA 2)'), 'NPU ready shown');
  await page.waitForFunction(() => /^\d+(\.\d)? W$/.test(document.querySelector('[data-testid="stats-power"]')?.textContent ?? ''));
  const title = await page.getByTestId('stats-power').getAttribute('title');
  assert(title === 'from amdgpu hwmon4 power1_input (PPT)', `power figure names its source, got ${title}`);
  await page.waitForFunction(() => document.querySelector('[data-testid="power-chart"] polyline') !== null);
  await send(page, 'How much energy?');
  await page.getByTestId('send-button').waitFor();
  const answer = page.getByTestId('assistant-message').last();
  await answer.locator('.receipt summary').click();
  const joules = await answer.getByTestId('receipt-joules').textContent();
  assert(joules.includes('16.5 J') && joules.includes('2.5 J') && joules.includes('14.0 J'), `joules on the receipt: ${joules}`);
});

test('a not-ready NPU lists each problem with its fix', async ({ page }) => {
  await page.evaluate(() => {
    window.__mockNpu = {
      ready: false, summary: 'NPU not ready (2 problems): No permission to open /dev/accel/accel0', detection: { state: 'found' },
      checks: [
        { id: 'access', status: 'problem', summary: 'No permission to open /dev/accel/accel0: it belongs to the render group', fix: 'Add yourself to the group: `sudo usermod -aG render ana`. Then log out and log back in.' },
        { id: 'memlock', status: 'problem', summary: 'Locked-memory limit is 8 MiB; the NPU runtime needs unlimited', fix: 'Allow unlimited locked memory.' },
        { id: 'xrt', status: 'ok', summary: 'XRT 2.20.0 with the NPU plugin', fix: null },
      ],
    };
  });
  await page.getByRole('button', { name: 'Check the NPU again' }).click();
  const line = page.getByTestId('npu-not-ready');
  await line.waitFor();
  assert((await line.textContent()).includes('2 things to fix'), 'counts the problems');
  await line.click();
  const text = await page.getByTestId('npu-status').textContent();
  assert(text.includes('sudo usermod -aG render ana') && text.includes('log out'), `fix shown: ${text}`);
  assert(!text.includes('XRT 2.20.0'), 'checks that passed are not listed as things to fix');
});

// Models view (mock backend: tests/browser/mock-models.ts).
async function openModels(page) {
  await page.getByRole('navigation', { name: 'Views' }).getByRole('button', { name: 'Models' }).click();
  await page.getByTestId('models-view').waitFor();
  await page.getByTestId('catalog-item-llama-3.2-1b-npu2').waitFor();
}

test('the Models view shows the catalog with fit hints and the built-in model', async ({ page }) => {
  await openModels(page);
  assert((await page.getByTestId('models-machine').textContent()).includes('32.0 GB of memory'), 'machine memory shown');
  assert((await page.getByTestId('fit-llama-3.2-1b-npu2').textContent()).startsWith('Fits'), 'fit hint shown');
  const installed = await page.getByTestId('installed-demo').textContent();
  assert(installed.includes('Built in'), `demo listed as built in: ${installed}`);
  assert((await page.getByTestId('delete-demo').count()) === 0, 'the built-in model cannot be deleted');
});

test('a download shows progress, pauses, resumes and installs', async ({ page }) => {
  await page.evaluate(() => { window.__mockModels.stepMs = 60; });
  await openModels(page);
  await page.getByTestId('download-llama-3.2-1b-npu2').click();
  await page.getByTestId('pause-llama-3.2-1b-npu2').waitFor();
  await page.waitForFunction(() => Number(document.querySelector('[data-testid="progress-llama-3.2-1b-npu2"]')?.getAttribute('value') ?? 0) > 0);
  const status = await page.getByTestId('catalog-item-llama-3.2-1b-npu2').getByRole('status').textContent();
  assert(/of 1\.30 GB · 25\.0 MB\/s · .* left/.test(status), `bytes, speed and time left: ${status}`);
  await page.getByTestId('pause-llama-3.2-1b-npu2').click();
  await page.getByTestId('resume-llama-3.2-1b-npu2').waitFor();
  const paused = Number(await page.getByTestId('progress-llama-3.2-1b-npu2').getAttribute('value'));
  assert(paused > 0 && paused < 100, `paused part-way: ${paused}%`);
  await page.evaluate(() => { window.__mockModels.stepMs = 5; });
  await page.getByTestId('resume-llama-3.2-1b-npu2').click();
  await page.getByTestId('installed-badge-llama-3.2-1b-npu2').waitFor();
  await page.getByTestId('installed-Llama-3.2-1B-NPU2').waitFor();
  assert((await page.getByTestId('models-notice').textContent()).includes('is installed'), 'says it is installed');
});

test('cancel stops a download; delete asks first and says what it freed; set as default', async ({ page }) => {
  await page.evaluate(() => { window.__mockModels.stepMs = 60; });
  await openModels(page);
  await page.getByTestId('download-minicpm5-2b-npu2').click();
  await page.getByTestId('cancel-minicpm5-2b-npu2').click();
  await page.getByTestId('download-minicpm5-2b-npu2').waitFor();
  await page.evaluate(() => { window.__mockModels.stepMs = 1; });
  await page.getByTestId('download-llama-3.2-1b-npu2').click();
  await page.getByTestId('installed-Llama-3.2-1B-NPU2').waitFor();
  await page.getByTestId('default-Llama-3.2-1B-NPU2').click();
  await page.getByTestId('default-badge-Llama-3.2-1B-NPU2').waitFor();
  await page.getByTestId('delete-Llama-3.2-1B-NPU2').click();
  await page.getByTestId('confirm-delete-Llama-3.2-1B-NPU2').click();
  await page.getByTestId('download-llama-3.2-1b-npu2').waitFor();
  assert((await page.getByTestId('models-notice').textContent()).includes('1.30 GB freed'), 'says how much was freed');
});

test('a failed import is explained in plain words', async ({ page }) => {
  await openModels(page);
  await page.getByTestId('import-dir-input').fill('/home/ana/not-a-model');
  await page.getByTestId('import-button').click();
  await page.getByTestId('models-error').waitFor();
  assert((await page.getByTestId('models-error').textContent()).includes('missing config.json'), 'error shown');
});

let passed = 0;
let failed = 0;
for (const t of tests) {
  const app = await openApp();
  try {
    await app.page.setDefaultTimeout(8000);
    await t.fn(app);
    const violations = await app.page.evaluate(() => window.__violations);
    const problems = [...app.problems, ...violations.map((v) => `CSP violation: ${v}`)];
    if (problems.length) throw new Error(problems.join('\n'));
    passed++;
    console.log(`  ok    ${t.name}`);
  } catch (error) {
    failed++;
    console.log(`  FAIL  ${t.name}\n        ${String(error.message ?? error).split('\n').join('\n        ')}`);
  } finally {
    await app.context.close();
  }
}
await browser.close();
server.close();
console.log(`browser tests: ${passed} passed, ${failed} failed (${tests.length} total)`);
process.exit(failed ? 1 : 0);
