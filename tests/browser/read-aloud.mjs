// Browser tests of reading answers aloud (issue 52 item 3), registered by run.mjs: the speaker
// button under an answer reads it and becomes a stop button until the reading ends or is
// stopped; a missing espeak-ng is said beside the button in plain words; "Always read answers
// aloud" is a setting that stays.

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
}
