// Browser tests of pictures on a message (issue 55), registered by run.mjs: attached by paste, by a
// drop on the composer, on the window and through the picker; shown before sending and in the sent
// message; a file that is not a picture and one over 20 MB refused in plain words next to the
// composer; and, for a model that does not see, the note and "Read the text in it".

/** A 2 x 1 PNG (made with Python's zlib), base64. */
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAADUlEQVR4nGP4zwAE/wEHAAH/4iOeWQAAAABJRU5ErkJggg==';

/** Hands `files` ({name, type, base64 | text | size}) to the composer as a paste or a drop. */
async function give(page, how, files) {
  await page.evaluate(({ how, files }) => {
    const data = new DataTransfer();
    for (const f of files) {
      const bytes = f.base64 ? Uint8Array.from(atob(f.base64), (c) => c.charCodeAt(0)) : f.size ? new Uint8Array(f.size) : new TextEncoder().encode(f.text ?? '');
      data.items.add(new File([bytes], f.name, { type: f.type }));
    }
    if (how === 'paste') {
      document.querySelector('[data-testid="chat-input"]').dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }));
    } else {
      document.querySelector('form.composer').dispatchEvent(new DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true }));
    }
  }, { how, files });
}

export function pictureTests({ test, assert, send }) {
  test('pictures: pasted and dropped on the composer they show as thumbnails with their cost, go with the message and show in it', async ({ page }) => {
    await give(page, 'paste', [{ name: '', type: 'image/png', base64: PNG }]);
    const thumbs = page.getByTestId('draft-picture');
    await thumbs.first().waitFor();
    assert((await thumbs.first().textContent()).includes('2×1 · about 256 tokens'), await thumbs.first().textContent());
    await give(page, 'drop', [{ name: 'dot.png', type: 'image/png', base64: PNG }]);
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="draft-picture"]').length === 2);
    const budget = await page.getByTestId('pictures-budget').textContent();
    assert(budget.includes('2 pictures: about 512 tokens'), budget);
    await page.getByRole('button', { name: 'Remove the picture dot.png' }).click();
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="draft-picture"]').length === 1);
    await send(page, 'What is in this picture?');
    const shown = page.getByTestId('user-message').getByTestId('message-picture');
    await shown.waitFor();
    assert((await shown.getAttribute('src')).startsWith('data:image/png;base64,iVBOR'), 'the sent picture is shown in the message');
    assert((await shown.getAttribute('alt')) === 'Picture 1 you sent', await shown.getAttribute('alt'));
    await page.getByTestId('answer-line').last().waitFor();
    assert((await page.getByTestId('draft-picture').count()) === 0, 'the draft is empty after sending');
    const sent = await page.evaluate(() => window.__mock.calls.filter((c) => c.cmd === 'start_answer').map((c) => c.args.action));
    assert(sent.length === 1 && sent[0].pictures.length === 1 && sent[0].pictures[0].name === 'pasted picture', JSON.stringify(sent));
  }, () => { window.__mockPictures.sees = true; });

  test('pictures: a file that is not a picture and one over 20 MB are refused in plain words next to the composer', async ({ page }) => {
    await give(page, 'paste', [{ name: 'notes.png', type: 'image/png', text: 'just words, not a picture' }]);
    const error = page.getByTestId('picture-error');
    await error.waitFor();
    const words = await error.textContent();
    assert(words.includes('notes.png: this is not a PNG, JPEG or WebP picture'), words);
    await page.getByRole('button', { name: 'Dismiss this message' }).click();
    await error.waitFor({ state: 'detached' });
    await give(page, 'drop', [{ name: 'huge.jpg', type: 'image/jpeg', size: 21 * 1024 * 1024 }]);
    await error.waitFor();
    const big = await error.textContent();
    assert(big.includes('huge.jpg is 21.0 MB; Hearth takes pictures up to 20 MB'), big);
    const checked = await page.evaluate(() => window.__mock.calls.filter((c) => c.cmd === 'check_picture').map((c) => c.args.name));
    assert(JSON.stringify(checked) === '["notes.png"]', `the huge one is refused before it is read: ${checked}`);
    assert((await page.getByTestId('draft-picture').count()) === 0, 'nothing was added');
  }, () => { window.__mockPictures.sees = true; });

  test('pictures: the picture button and a drop on the window add pictures for a model that sees', async ({ page }) => {
    await page.getByTestId('pick-picture').click();
    await page.getByTestId('draft-picture').first().waitFor();
    assert((await page.getByTestId('draft-picture').first().textContent()).includes('chart.png'), 'the chosen picture');
    const dialog = await page.evaluate(() => window.__mock.calls.find((c) => c.cmd === 'pick_pictures').args);
    assert(dialog.title === 'Choose pictures to send' && dialog.filter === 'Pictures', JSON.stringify(dialog));
    await page.evaluate(() => window.__mockDrop(['photo.jpg']));
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="draft-picture"]').length === 2);
    assert((await page.getByTestId('attached-file').count()) === 0, 'a dropped picture is not read as a document when the model sees');
    assert((await page.getByTestId('pictures-not-seen').count()) === 0, 'no note for a model that sees');
    const chosen = await page.evaluate(() => { const s = document.querySelector('[data-testid="model-picker"]'); return s.options[s.selectedIndex].textContent; });
    assert(chosen.includes('sees pictures'), `the picker says the model in use sees: ${chosen}`);
  }, () => { window.__mockPictures.sees = true; });

  test('pictures: a model that does not see says so before sending and offers to read the text in it', async ({ page }) => {
    await page.getByTestId('pick-picture').click();
    const note = page.getByTestId('pictures-not-seen');
    await note.waitFor();
    const words = await note.textContent();
    assert(words.includes('demo does not see pictures'), words);
    const chosen = await page.evaluate(() => { const s = document.querySelector('[data-testid="model-picker"]'); return s.options[s.selectedIndex].textContent; });
    assert(!chosen.includes('sees pictures'), chosen);
    await page.getByTestId('read-picture-text').click();
    await page.getByTestId('attached-file').first().waitFor();
    assert((await page.getByTestId('attached-file').first().textContent()).includes('chart.png'), 'read as a document');
    assert((await page.getByTestId('draft-picture').count()) === 0, 'the picture left the draft');
    // Dropped on the window, a picture is read as a document too, as before.
    await page.evaluate(() => window.__mockDrop(['scan.jpg']));
    await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="attached-file"]')].some((e) => e.textContent.includes('scan.jpg')));
  }, () => { window.__mockPictures.sees = false; });

  test('pictures: a model that sees says so in the picker and on its cards before it is used, on the NPU only; one FastFlowLM cannot run yet too', async ({ page }) => {
    await page.waitForFunction(() => document.querySelector('[data-testid="model-picker"] option[value="npu:Gemma3-4B-NPU2"]'));
    const option = (value) => page.locator(`[data-testid="model-picker"] option[value="${value}"]`).textContent();
    assert((await option('npu:Gemma3-4B-NPU2')).endsWith('on the NPU · sees pictures'), await option('npu:Gemma3-4B-NPU2'));
    assert(!(await option('cpu:Gemma3-4B-NPU2')).includes('sees pictures'), 'on the processor it reads text only');
    assert(!(await option('npu:Llama-3.2-1B-NPU2')).includes('sees pictures'), 'a model without the vlm mark');
    const waiting = await option('npu:Medgemma-4B-NPU2');
    assert(waiting.includes('needs FastFlowLM') && waiting.endsWith(' · sees pictures'), `FastFlowLM not installed, still said: ${waiting}`);
    const chosen = await page.evaluate(() => { const s = document.querySelector('[data-testid="model-picker"]'); return s.options[s.selectedIndex].textContent; });
    assert(!chosen.includes('sees pictures'), `the demo in use does not see: ${chosen}`);

    await page.getByTestId('model-picker').selectOption('manage');
    await page.getByTestId('models-view').waitFor();
    const installed = page.getByTestId('sees-pictures-Gemma3-4B-NPU2');
    await installed.waitFor();
    assert((await installed.textContent()) === 'sees pictures', await installed.textContent());
    assert((await installed.getAttribute('title')).includes('on the NPU, through FastFlowLM'), await installed.getAttribute('title'));
    await page.getByTestId('sees-pictures-Medgemma-4B-NPU2').waitFor();
    assert((await page.getByTestId('sees-pictures-Llama-3.2-1B-NPU2').count()) === 0, 'no tag on a text model');
    const card = page.getByTestId('catalog-item-gemma3-4b-npu2').getByTestId('sees-pictures-gemma3-4b-npu2');
    await card.waitFor();
    assert((await card.textContent()) === 'sees pictures', await card.textContent());
    assert((await page.getByTestId('catalog-item-llama-3.2-1b-npu2').getByText('sees pictures').count()) === 0, 'no tag on a text model in the catalog');
    // Styled as the card's other small tags.
    const [tag, npuTag] = await page.evaluate(() => {
      const header = document.querySelector('[data-testid="catalog-item-gemma3-4b-npu2"] header');
      const style = (el) => { const c = getComputedStyle(el); return [c.fontSize, c.borderRadius, c.backgroundColor].join(' '); };
      return [style(header.querySelector('[data-testid="sees-pictures-gemma3-4b-npu2"]')), style(header.querySelector('.badge.quiet:not([data-testid])'))];
    });
    assert(tag === npuTag, `${tag} vs ${npuTag}`);
  }, () => {
    window.__mock.npuModels = { 'Gemma3-4B-NPU2': true, 'Llama-3.2-1B-NPU2': true, 'Medgemma-4B-NPU2': false };
    window.__mock.seeingModels = ['Gemma3-4B-NPU2', 'Medgemma-4B-NPU2'];
    window.__mockModels.moreCatalog = [
      { id: 'gemma3-4b-npu2', name: 'Gemma3-4B-NPU2', tag: 'gemma3:4b', repo: 'FastFlowLM/Gemma3-4B-NPU2', revision: 'main', format: 'q4nx', kind: 'chat',
        download_bytes: 4e9, memory_bytes: 4.5e9, parameters: '4.3B', license: 'Gemma Terms of Use', backends: ['npu'], context_length: 65536, think: false, vlm: true,
        flm_family: 'gemma3', quantization: 'Q4_1', description: 'Gemma 3 4B on the NPU.', note: '' },
    ];
  });
}
