// Browser tests of reading answers aloud (issue 52 item 3), registered by run.mjs: the speaker
// button under an answer reads it and becomes a stop button until the reading ends or is
// stopped; a missing espeak-ng is said beside the button in plain words; "Always read answers
// aloud" is a setting that stays; Settings › Read aloud offers a Piper voice to download where
// `piper` is installed (progress, Cancel, plain errors) and says espeak-ng reads where it is not.

export function readAloudTests({ test, assert, sendAndWait, openView }) {
  test('read aloud: the speaker button reads the answer, turns into a stop button, and stops it', async ({ page }) => {
    await sendAndWait(page, 'Hello there');
    const answer = page.getByTestId('assistant-message').last();
    await answer.getByRole('button', { name: 'Read this answer aloud' }).click();
    const stop = answer.getByRole('button', { name: 'Stop reading this answer aloud' });
    await stop.waitFor();
    assert((await stop.getAttribute('aria-pressed')) === 'true', 'the stop button is pressed');
    const spoken = await page.evaluate(() => window.__mockReadAloud.spoken);
    assert(spoken.length === 1 && spoken[0].text.length > 0 && typeof spoken[0].messageId === 'number', JSON.stringify(spoken));
    assert(!spoken[0].text.includes('<think>'), 'the thinking is not read');
    await stop.click();
    await answer.getByRole('button', { name: 'Read this answer aloud' }).waitFor();
    // A reading that ends by itself gives the speaker button back too.
    await page.evaluate(() => (window.__mockReadAloud.lastsMs = 200));
    await answer.getByRole('button', { name: 'Read this answer aloud' }).click();
    await answer.getByRole('button', { name: 'Stop reading this answer aloud' }).waitFor();
    await answer.getByRole('button', { name: 'Read this answer aloud' }).waitFor();
  });

  test('read aloud: a missing espeak-ng is said beside the button in plain words', async ({ page }) => {
    await sendAndWait(page, 'Hello there');
    await page.evaluate(() => {
      window.__mockReadAloud.fail = {
        code: 'unsupported',
        message: 'Reading aloud needs espeak-ng, which is not installed. Install it (on Debian or Ubuntu: sudo apt install espeak-ng) and try again.',
        detail: 'espeakMissing',
        params: {},
      };
    });
    const answer = page.getByTestId('assistant-message').last();
    await answer.getByRole('button', { name: 'Read this answer aloud' }).click();
    const error = answer.getByTestId('speak-error');
    await error.waitFor();
    const text = await error.textContent();
    assert(text.includes('sudo apt install espeak-ng'), text);
    assert(await answer.getByRole('button', { name: 'Read this answer aloud' }).isVisible(), 'the button stays a speaker');
  });

  test('read aloud: "Always read answers aloud" is a setting that is kept', async ({ page }) => {
    await openView(page, 'settings');
    const box = page.getByTestId('read-answers');
    assert(!(await box.isChecked()), 'off by default');
    await box.check();
    await page.getByRole('button', { name: /^Close/ }).first().click();
    await openView(page, 'settings');
    assert(await page.getByTestId('read-answers').isChecked(), 'the setting is kept');
  });

  test('read aloud: without piper, Settings says espeak-ng reads and how to get Piper', async ({ page }) => {
    await openView(page, 'settings');
    const note = page.getByTestId('piper-missing');
    await note.waitFor();
    const text = await note.textContent();
    assert(text.includes('espeak-ng') && text.includes('install Piper'), text);
    assert((await page.getByTestId('piper-download').count()) === 0, 'no download is offered');
  });

  test('read aloud: with piper, the voice of the app language downloads with progress, cancels and installs', async ({ page }) => {
    await page.evaluate(() => {
      window.__mockReadAloud.piperInstalled = true;
      window.__mockReadAloud.voiceStepMs = 150;
    });
    await openView(page, 'settings');
    const row = page.getByTestId('piper-row');
    await row.waitFor();
    const label = await row.textContent();
    assert(label.includes('en_US-lessac-medium') && label.includes('63'), label);
    assert((await page.locator('#piper-language').inputValue()) === 'en', 'the app language comes first');

    // A failure is said in plain words, and the button comes back.
    await page.evaluate(() => {
      window.__mockReadAloud.voiceFail = { code: 'network', message: 'hub: could not reach https://hub.example/x: connection refused', detail: null, params: {} };
    });
    await page.getByTestId('piper-download').click();
    const error = page.getByTestId('piper-error');
    await error.waitFor();
    const said = await error.textContent();
    assert(said.includes('The voice could not be downloaded'), said);
    await page.getByTestId('piper-download').waitFor();

    // Started, then cancelled: the Download button comes back and nothing is installed.
    await page.getByTestId('piper-download').click();
    await page.getByTestId('piper-progress').waitFor();
    await page.getByTestId('piper-cancel').click();
    await page.getByTestId('piper-download').waitFor();
    assert((await page.getByTestId('piper-installed').count()) === 0, 'a cancelled voice is not installed');

    // Started again and left to finish: it says the voice is used.
    await page.evaluate(() => (window.__mockReadAloud.voiceStepMs = 20));
    await page.getByTestId('piper-download').click();
    const done = page.getByTestId('piper-installed');
    await done.waitFor();
    assert((await done.textContent()).includes('answers in this language are read with it'), await done.textContent());

    // Another language shows its own voice, not downloaded.
    await page.locator('#piper-language').selectOption('de');
    assert((await row.textContent()).includes('de_DE-thorsten-medium'), await row.textContent());
    await page.getByTestId('piper-download').waitFor();
  });
}
