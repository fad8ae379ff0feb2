// Pictures in the mocked backend, as crates/app's pictures.rs handles them: a pasted or dropped
// picture checked by its first bytes (PNG, JPEG, WebP) and its size (20 MB), its width and height
// read from a PNG's header; the picture dialog's choice (window.__mockPictures.picked: names of
// made-up pictures; [] = cancelled); a drop of pictures by its token; saved messages' pictures
// read back; pictures written out as documents for a model that does not see. Whether the model
// in use sees pictures is window.__mockPictures.sees (read by mock-backend's status).
import { keepDocuments, takeDrop } from './mock-drops';

type Json = Record<string, any>;

export const picturesControl = {
  /** Whether the model in use sees pictures (the demo does not; a test turns it on). */
  sees: false,
  /** What the picture dialog returns (names; [] = cancelled). */
  picked: ['chart.png'] as string[],
};
(window as any).__mockPictures = picturesControl;

const MAX_BYTES = 20 * 1024 * 1024;
/** A 1 x 1 PNG, the picture a chosen or dropped file stands for. */
const DOT = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP438AAAAQBAYDFKhhdAAAAAElFTkSuQmCC';
/** Saved messages' pictures: "message/index" -> data: URL. */
const saved = new Map<string, string>();

function fail(code: string, message: string): never {
  throw { code, message };
}

function bytesOf(data: string): Uint8Array {
  try {
    return Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  } catch {
    fail('invalid_input', 'the picture did not arrive whole (its data is not base64). Add it again.');
  }
}

/** A checked picture as the app returns it, or the app's refusal in its words. */
function check(name: string, data: string): Json {
  const bytes = bytesOf(data);
  if (bytes.length > MAX_BYTES) fail('invalid_input', `${name}: the picture is ${(bytes.length / 1048576).toFixed(1)} MB; Hearth takes pictures up to 20 MB: make it smaller or crop it to the part that matters.`);
  const png = bytes[0] === 0x89 && bytes[1] === 0x50 && bytes[2] === 0x4e && bytes[3] === 0x47;
  const jpeg = bytes[0] === 0xff && bytes[1] === 0xd8;
  const webp = String.fromCharCode(...bytes.subarray(0, 4)) === 'RIFF' && String.fromCharCode(...bytes.subarray(8, 12)) === 'WEBP';
  if (!png && !jpeg && !webp) fail('invalid_input', `${name}: this is not a PNG, JPEG or WebP picture (its first bytes are not one of those): save it as one of them and try again.`);
  const view = new DataView(bytes.buffer);
  const [width, height] = png && bytes.length >= 24 ? [view.getUint32(16), view.getUint32(20)] : [640, 480];
  return { name, media_type: jpeg ? 'image/jpeg' : 'image/png', width, height, size: bytes.length, data, tokens: Math.max(256, Math.ceil(width / 28) * Math.ceil(height / 28)) };
}

/** The pictures of a message being saved: what it says of them, and their bytes kept to show. */
export function savePictures(messageId: number, pictures: unknown): Json[] {
  const list = Array.isArray(pictures) ? (pictures as Json[]) : [];
  if (list.length > 4) fail('invalid_input', `A message can carry at most 4 pictures; this one has ${list.length}. Send the others in another message.`);
  const checked = list.map((p) => check(String(p.name), String(p.data)));
  checked.forEach((p, index) => saved.set(`${messageId}/${index}`, `data:${p.media_type};base64,${p.data}`));
  return checked.map((p, index) => ({ index, media_type: p.media_type, width: p.width, height: p.height, size: p.size }));
}

export function picturesCommand(cmd: string, args: Json): unknown {
  switch (cmd) {
    case 'check_picture':
      return check(String(args.name), String(args.data));
    case 'pick_pictures':
      return picturesControl.picked.map((name) => check(name, DOT));
    case 'take_dropped_pictures':
      return takeDrop(args.token, 'documents').map((name) => check(name, DOT));
    case 'message_picture': {
      const src = saved.get(`${args.messageId}/${args.index}`);
      if (!src) fail('not_found', `conversations: there is no picture ${args.index} of message ${args.messageId}`);
      return src;
    }
    case 'pictures_as_documents':
      return keepDocuments((args.pictures as Json[]).map((p) => `${String(p.name).replace(/\.[^.]*$/, '')}.png`));
  }
  return undefined;
}
