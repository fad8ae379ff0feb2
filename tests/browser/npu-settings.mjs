// Browser tests of Settings › NPU (issue 56 item 2), registered by run.mjs: the FastFlow SDK's
// Python environment is chosen by typing or with the folder dialog; a folder without bin/flm is
// refused under the field in plain words and not saved; a saved one can be cleared.

export function npuSettingsTests({ test, assert, openView }) {
  test('Settings › NPU: a folder without FastFlowLM is refused under the field; a chosen environment is saved and cleared', async ({ page }) => {
    await openView(page, 'settings');
    const section = page.getByTestId('npu-settings');
    const field = section.getByTestId('flm-env');
    await field.fill('/home/ana/empty');
    await section.getByTestId('flm-env-save').click();
    const error = section.getByTestId('flm-env-error');
    await error.waitFor();
    const said = await error.textContent();
    assert(said.includes('/home/ana/empty holds no FastFlowLM') && said.includes('pip install fastflow-sdk'), said);
    assert((await field.inputValue()) === '/home/ana/empty', 'the refused folder stays in the field to correct');
    assert((await section.getByTestId('flm-env-clear').count()) === 0, 'nothing was saved');

    await page.evaluate(() => { window.__mock.pickedFolder = '/home/ana/fastflow-venv'; });
    await section.getByTestId('flm-env-choose').click();
    await section.getByTestId('flm-env-clear').waitFor();
    assert((await error.count()) === 0, 'the error is gone once a good folder is saved');
    assert((await field.inputValue()) === '/home/ana/fastflow-venv', await field.inputValue());

    await section.getByTestId('flm-env-clear').click();
    await section.getByTestId('flm-env-clear').waitFor({ state: 'detached' });
    assert((await field.inputValue()) === '', 'cleared');
  });
}
