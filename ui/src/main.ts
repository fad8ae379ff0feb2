// The composition root: the backend's api and the stores, each built once and handed to the
// components by App. Components never import `api` (lib/layering.test.ts holds this).
import { mount } from 'svelte';
import App from './App.svelte';
import { api } from './lib/api';
import { Notifications } from './lib/notifications.svelte';
import { Shell } from './lib/shell.svelte';
import { ModelSession } from './lib/session.svelte';
import { SettingsStore } from './lib/settings.svelte';
import { ConversationList } from './lib/conversations.svelte';
import { AnswerStream } from './lib/answer.svelte';
import { ModelsStore } from './lib/models.svelte';
import { PowerMonitor } from './lib/power.svelte';
import { DocumentsStore } from './lib/documents.svelte';
import { Drops } from './lib/drops.svelte';
import { PicturesStore } from './lib/pictures.svelte';
import './app.css';

const notifications = new Notifications(localStorage);
const shell = new Shell();
const session = new ModelSession(api, notifications, localStorage);
const settings = new SettingsStore(api, notifications);
// Conversations stay while an answer is written (`answer` exists by the time it is asked).
// Exports are offered in the user's Documents folder (known once the status has arrived).
const conversations = new ConversationList(api, notifications, (): boolean => answer.streaming, () => session.status?.documents_dir ?? null);
const answer = new AnswerStream(api, conversations, session, notifications);
// The user's files: attached to the open conversation, the library, the sources of answers.
const documents = new DocumentsStore(api, conversations, notifications);
answer.onSources((messageId, sources) => documents.setSources(messageId, sources));
conversations.onShow(() => shell.showChat());
// Choosing a model on a remote server asks again before passages of attached files go there.
session.onModelChosen(() => void documents.modelChosen());
// After a model is installed, deleted or made the default, the picker and Settings list again.
const models = new ModelsStore(api, () => void session.refreshModels());
// The chart's speed line: the live rate while an answer is written, 0 between answers.
const monitor = new PowerMonitor(api, () => (answer.streaming ? (answer.live?.tokens_per_second ?? null) : 0));
// Files dropped on the window, as the backend classified them: attached, imported, or said why not.
// Pictures on the next message; a model that does not see gets them read as documents (OCR).
const pictures = new PicturesStore(
  api,
  conversations,
  () => session.model?.sees_pictures ?? false,
  (token) => documents.attachDropped(token),
  () => session.status?.picture_limits ?? null,
);
const drops = new Drops(api, documents, models, shell, notifications, pictures);

const target = document.getElementById('app');
if (!target) throw new Error('index.html has no #app element');
export default mount(App, {
  target,
  props: { notifications, shell, session, settings, conversations, answer, models, monitor, documents, drops, pictures },
});
