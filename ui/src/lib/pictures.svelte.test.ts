import { describe, expect, it } from 'vitest';
import { PicturesStore, base64Of, isPictureName, pictureSrc, picturesTokens, type PicturesApi } from './pictures.svelte';
import type { ConversationList } from './conversations.svelte';
import type { DraftPicture, PictureLimits, PictureUpload } from './types';
import { BackendError } from './api';
import { Drops, type DropsApi } from './drops.svelte';
import type { DocumentsStore } from './documents.svelte';
import type { ModelsStore } from './models.svelte';
import { Notifications } from './notifications.svelte';
import { Shell } from './shell.svelte';

/** The app's bounds, as its status gives them. */
const LIMITS: PictureLimits = { max_pictures: 4, max_picture_bytes: 20 * 1024 * 1024 };
const MAX_PICTURES = LIMITS.max_pictures;
const MAX_PICTURE_BYTES = LIMITS.max_picture_bytes;

/** A checked picture as the app returns it. */
function picture(name: string, tokens = 256): DraftPicture {
  return { name, media_type: 'image/png', width: 2, height: 1, size: 70, data: 'iVBO', tokens };
}

/** The store over an api that records what it is asked, for a conversation list whose open
 *  conversation a test changes. */
function setup(sees = true, limits: PictureLimits | null = LIMITS) {
  const asked: string[] = [];
  const list = { draftKey: 'new' };
  const api: PicturesApi = {
    checkPicture: async (name: string, data: string) => {
      asked.push(`check ${name} ${data}`);
      if (name.endsWith('.txt')) throw new BackendError('invalid_input', `${name}: this is not a PNG, JPEG or WebP picture.`, 'check_picture');
      return picture(name);
    },
    pickPictures: async () => (asked.push('pick'), [picture('chart.png')]),
    takeDroppedPictures: async (token: string) => (asked.push(`take ${token}`), [picture('photo.jpg')]),
    picturesAsDocuments: async (pictures: PictureUpload[]) => (asked.push(`as documents ${pictures.map((p) => p.name).join(',')}`), 'drop-7'),
    messagePicture: async (id: number, index: number) => (asked.push(`show ${id}/${index}`), 'data:image/png;base64,AA=='),
  };
  const store = new PicturesStore(api, list as unknown as ConversationList, () => sees, async (token) => void asked.push(`attach ${token}`), () => limits);
  return { asked, list, store };
}

/** A file the page holds (a paste, a drop on the composer). */
function file(name: string, type: string, bytes: number[] = [0x89, 0x50, 0x4e, 0x47]): File {
  return new File([new Uint8Array(bytes)], name, { type });
}

describe('pictures', () => {
  it('bytes become base64 in pieces, and a picture its data URL', () => {
    expect(base64Of(new Uint8Array([0x89, 0x50, 0x4e, 0x47]))).toBe('iVBORw==');
    const big = new Uint8Array(100_000).fill(65);
    expect(atob(base64Of(big)).length).toBe(100_000);
    expect(pictureSrc(picture('a.png'))).toBe('data:image/png;base64,iVBO');
    expect(picturesTokens([picture('a.png', 256), picture('b.png', 1000)])).toBe(1256);
    expect(['a.PNG', 'b.jpeg', 'c.webp', 'd.gif', 'e.pdf'].map(isPictureName)).toEqual([true, true, true, false, false]);
  });

  it('a pasted picture is checked by the app and waits with its conversation', async () => {
    const { asked, list, store } = setup();
    expect(await store.addFiles([file('', 'image/png')])).toBe(true);
    expect(asked).toEqual(['check pasted picture iVBORw==']);
    expect(store.attached.map((p) => p.name)).toEqual(['pasted picture']);
    expect(store.tokens).toBe(256);
    list.draftKey = 'c2';
    expect(store.attached).toEqual([]);
    list.draftKey = 'new';
    expect(store.attached).toHaveLength(1);
  });

  it('files that are not pictures are left to others; a picture the app refuses says why', async () => {
    const { asked, store } = setup();
    expect(await store.addFiles([file('notes.md', 'text/markdown')])).toBe(false);
    expect(asked).toEqual([]);
    await store.addFiles([file('fake.txt', 'image/png')]);
    expect(store.attached).toEqual([]);
    expect(store.error).toBe('fake.txt: this is not a PNG, JPEG or WebP picture.');
  });

  it('a picture over the bound is refused before it is read', async () => {
    const { asked, store } = setup();
    const huge = file('huge.png', 'image/png');
    Object.defineProperty(huge, 'size', { value: MAX_PICTURE_BYTES + 2 * 1024 * 1024 });
    await store.addFiles([huge]);
    expect(asked).toEqual([]);
    expect(store.error).toMatch(/^huge\.png is 22\.0 MB; Hearth takes pictures up to 20 MB/);
  });

  it('before the app has given its bounds, the app alone checks them', async () => {
    const { asked, store } = setup(true, null);
    const huge = file('huge.png', 'image/png');
    Object.defineProperty(huge, 'size', { value: MAX_PICTURE_BYTES + 1 });
    await store.addFiles([huge]);
    expect(asked).toEqual(['check huge.png iVBORw==']);
  });

  it('at most MAX_PICTURES wait; the rest are said', async () => {
    const { store } = setup();
    await store.addFiles(Array.from({ length: MAX_PICTURES + 2 }, (_, i) => file(`p${i}.png`, 'image/png')));
    expect(store.attached).toHaveLength(MAX_PICTURES);
    expect(store.error).toContain(`at most ${MAX_PICTURES} pictures`);
  });

  it('the picker and a removal', async () => {
    const { asked, store } = setup();
    await store.pick();
    await store.pick();
    expect(asked).toEqual(['pick', 'pick']);
    store.remove(0);
    expect(store.attached.map((p) => p.name)).toEqual(['chart.png']);
  });

  it('a drop of pictures goes to a model that sees; otherwise it is left to the documents', async () => {
    const seeing = setup(true);
    expect(await seeing.store.takeDropped('drop-1', ['photo.jpg'])).toBe(true);
    expect(seeing.asked).toEqual(['take drop-1']);
    expect(await seeing.store.takeDropped('drop-2', ['photo.jpg', 'notes.pdf'])).toBe(false);
    const blind = setup(false);
    expect(await blind.store.takeDropped('drop-1', ['photo.jpg'])).toBe(false);
    expect(blind.asked).toEqual([]);
  });

  it('sending takes the pictures with the words; a failed send puts them back', async () => {
    const { store } = setup();
    await store.pick();
    const sent: PictureUpload[][] = [];
    expect(await store.send('what is this?', async (_text, pictures) => (sent.push(pictures), false))).toBe(false);
    expect(sent).toEqual([[{ name: 'chart.png', data: 'iVBO' }]]);
    expect(store.attached.map((p) => p.name)).toEqual(['chart.png']);
    expect(await store.send('what is this?', async () => true)).toBe(true);
    expect(store.attached).toEqual([]);
  });

  it('"Read the text in it" hands the pictures to the documents as a drop', async () => {
    const { asked, store } = setup(false);
    await store.pick();
    expect(store.sees).toBe(false);
    await store.readText();
    expect(asked).toEqual(['pick', 'as documents chart.png', 'attach drop-7']);
    expect(store.attached).toEqual([]);
  });

  it("a saved message's picture is read once", async () => {
    const { asked, store } = setup();
    expect(await store.messagePicture(3, 0)).toBe('data:image/png;base64,AA==');
    await store.messagePicture(3, 0);
    expect(asked).toEqual(['show 3/0']);
  });

  it('a drop on the window of pictures goes to the pictures when the model sees, else to the documents', async () => {
    for (const sees of [true, false]) {
      const { asked, store } = setup(sees);
      const documents = { attachDropped: async (token: string) => void asked.push(`documents ${token}`) } as unknown as DocumentsStore;
      const api = { onFileDrag: async () => () => {}, onDropped: async () => () => {} } as unknown as DropsApi;
      const drops = new Drops(api, documents, {} as ModelsStore, new Shell(), new Notifications(), store);
      await drops.take({ kind: 'documents', names: ['photo.jpg'], left: [], folders: [], reason: '', token: 'drop-3' });
      expect(asked).toEqual([sees ? 'take drop-3' : 'documents drop-3']);
    }
  });
});
