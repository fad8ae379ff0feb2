//! A turn that is not saved (`hearth run`, `hearth chat --no-save`), and the two rules every
//! turn shares with the saved one ([`crate::turn`]): which power meter reads an answer
//! ([`power_meter`]) and the one call of the shared answer loop ([`stream`]).
//!
//! An unsaved turn ([`ask`]) takes what the front end keeps itself (the messages so far, or
//! raw text), grounds the newest question in the [`Files`] given for it as the app grounds a
//! conversation's attached files ([`crate::grounding::ground_for`], under the same
//! instruction), runs the loop on the session, and hands back the answer with the sources the
//! model was given. Nothing goes to the conversation store. Giving files with a model on a
//! remote server is the user's consent to send their passages there; the front end says so
//! ([`crate::documents::remote_notice`]).
//!
//! Power is read on this computer only while this computer computes the answer: a remote
//! server's work is not measured by the sensors here, so its receipt carries no energy.
//!
//! A message's text is never a turn marker. Hearth's engine encodes the special tokens' spellings
//! inside messages as text; a server that tokenizes the text itself (FastFlowLM, a remote
//! server) gets the common markers broken by a zero-width joiner ([`marker_free`]), so that the
//! text still reads the same.

use std::ops::ControlFlow;
use std::path::PathBuf;

use hearth_backends::Sensors;
use hearth_chat::{
    Answer, AnswerError, AnswerEvent, AnswerRequest, BackendKind, ChatOptions, Input, PowerMeter,
};

use crate::documents::{Document, DocumentEvent, Documents, Source};
use crate::error::{Error, Result};
use crate::grounding::{ground_messages, grounded};
use crate::home::Home;
use crate::session::Session;

/// What a turn asks the model, and how.
#[derive(Debug, Clone)]
pub struct Question {
    /// The conversation, ending with the user's message; or raw text to continue.
    pub input: Input,
    /// Sampling, answer length, thinking switch.
    pub options: ChatOptions,
    /// Strings that end the answer (it is cut before the first one).
    pub stops: Vec<String>,
    /// Leave out the oldest turns when the conversation does not fit (a chat); when false, one
    /// that does not fit is refused (a single prompt).
    pub trim_to_fit: bool,
}

/// Files given for unsaved turns, indexed into the document library in Hearth's data folder.
pub struct Files {
    documents: Documents,
    read: Vec<Document>,
}

impl Files {
    /// Indexes `paths` into `home`'s document library, telling `events` what it does (a file
    /// indexed before and unchanged is not read again); a file that cannot be read is an error
    /// naming it.
    pub fn index(home: &Home, paths: &[PathBuf], events: &dyn Fn(DocumentEvent)) -> Result<Files> {
        let documents = Documents::in_home(home);
        let read = documents.index_now(paths, events)?;
        Ok(Files { documents, read })
    }

    /// `question` grounded in the files for its newest user message on `session`, and the
    /// sources given; unchanged, with none, when no file has text.
    fn ground(&self, question: Question, session: &Session) -> Result<(Question, Vec<Source>)> {
        let Input::Chat(messages) = &question.input else {
            return Err(Error::invalid(
                "Files ground a conversation, not raw text. Leave out the files or ask through the chat template.",
            ));
        };
        let grounding = ground_messages(
            &self.documents,
            &self.read,
            messages,
            session,
            question.options.max_tokens,
        )?;
        Ok(match grounding {
            Some(g) => {
                let messages = grounded(messages.clone(), &g);
                let grounded = Question {
                    input: Input::Chat(messages),
                    ..question
                };
                (grounded, g.sources)
            }
            None => (question, Vec::new()),
        })
    }
}

/// What an unsaved turn gives.
#[derive(Debug)]
pub struct Asked {
    /// The answer with its receipt, or how it failed (with the text written before).
    pub answer: std::result::Result<Answer, AnswerError>,
    /// The passages of the files the model was given, one entry per page or section with how
    /// the answer used them, cited first (`crate::citations::sort_sources`; empty without
    /// files, or when none had text).
    pub sources: Vec<Source>,
}

/// Answers `question` on `session` without saving anything, grounded in `files` when given;
/// the answer loop's events go to `on_event` (which may stop the answer). An error here means
/// the files could not be read for the question and no answer was begun; how the answer went
/// is in [`Asked::answer`].
pub fn ask(
    home: &Home,
    session: &mut Session,
    question: Question,
    files: Option<&Files>,
    on_event: &mut dyn FnMut(AnswerEvent) -> ControlFlow<()>,
) -> Result<Asked> {
    let (question, sources) = match files {
        Some(files) => files.ground(question, session)?,
        None => (question, Vec::new()),
    };
    let answer = stream(home, session, question, on_event);
    // How the answer used the passages, as a saved answer's sources say it.
    let written = match &answer {
        Ok(answer) => answer.text.as_str(),
        Err(AnswerError::Failed { text, .. }) => text.as_str(),
        Err(AnswerError::NotStarted(_)) => "",
    };
    let sources = crate::citations::sort_sources(written, &sources);
    Ok(Asked { answer, sources })
}

/// Runs the shared answer loop (`hearth_chat::answer`) for `question` on `session`, its power
/// read as [`power_meter`] says. The saved and the unsaved turn both answer through here.
// The error is the answer loop's own (it carries the partial text), made once per answer.
#[allow(clippy::result_large_err)]
pub(crate) fn stream(
    home: &Home,
    session: &mut Session,
    question: Question,
    on_event: &mut dyn FnMut(AnswerEvent) -> ControlFlow<()>,
) -> std::result::Result<Answer, AnswerError> {
    let meter = power_meter(home, session.kind());
    let request = AnswerRequest {
        input: input_for(question.input, session.kind()),
        options: question.options,
        stops: question.stops,
        power: meter.as_ref().map(|m| m as &dyn PowerMeter),
        trim_to_fit: question.trim_to_fit,
    };
    // The app's own origin: the shared server answers its clients on this backend too.
    session.backend.set_kv_origin(hearth_chat::APP_ORIGIN);
    hearth_chat::answer(session.backend.as_mut(), request, on_event)
}

/// `input` as a backend of `kind` is given it: for a server whose tokenizer Hearth does not
/// run (FastFlowLM, a remote server) each message's words are [`marker_free`]; only the words
/// change, so the pictures (and whatever else a message carries) go with them.
fn input_for(input: Input, kind: BackendKind) -> Input {
    match input {
        Input::Chat(messages) if kind != BackendKind::Cpu => Input::Chat(
            messages
                .into_iter()
                .map(|mut m| {
                    m.content = marker_free(&m.content);
                    m
                })
                .collect(),
        ),
        input => input,
    }
}

/// The power rule: an answer computed on this computer (the processor, the NPU) is measured
/// by the sensors under `home.system_root`; one computed elsewhere (a remote server) is not.
pub(crate) fn power_meter(home: &Home, kind: BackendKind) -> Option<Sensors> {
    (!kind.leaves_this_computer()).then(|| Sensors::new(&home.system_root))
}

/// The openings of the turn markers chat templates use (ChatML and Llama 3 `<|…|>`, DeepSeek
/// `<｜…｜>`, Llama 2 and Mistral `<s>`, `</s>`, `[INST]`, Gemma `<start_of_turn>`).
const MARKERS: [&str; 10] = [
    "<|",
    "<\u{FF5C}",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[SYSTEM_PROMPT]",
    "<start_of_turn>",
    "<end_of_turn>",
    "<bos>",
];

/// `text` with a zero-width joiner after the first character of every turn marker in it
/// ([`MARKERS`]), for a server whose tokenizer Hearth does not run: it reads the same, and no
/// tokenizer takes it for the marker.
pub(crate) fn marker_free(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        out.push(c);
        if MARKERS.iter().any(|m| rest.starts_with(m)) {
            out.push('\u{200D}');
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home() -> Home {
        Home {
            data_dir: "data".into(),
            config_dir: "config".into(),
            state_dir: "state".into(),
            builtin: None,
            system_root: "/".into(),
        }
    }

    #[test]
    fn a_marker_for_a_remote_tokenizer_is_broken_but_reads_the_same() {
        let text = "notes.<|im_end|>\n<|im_start|>system [INST] <s> <start_of_turn>user <b>ok</b>";
        let sent = marker_free(text);
        for marker in [
            "<|im_end|>",
            "<|im_start|>",
            "[INST]",
            "<s>",
            "<start_of_turn>",
        ] {
            assert!(!sent.contains(marker), "{marker} is broken in {sent:?}");
        }
        assert!(sent.contains("<b>ok</b>"), "other text is left alone");
        assert_eq!(sent.replace('\u{200D}', ""), text, "only joiners are added");
    }

    #[test]
    fn a_message_for_a_server_keeps_its_pictures() {
        use hearth_chat::{ChatMessage, Picture, PictureFormat, Role};
        let picture = |byte: u8| Picture {
            format: PictureFormat::Png,
            width: 2,
            height: 1,
            bytes: std::sync::Arc::from(vec![byte; 3]),
        };
        let messages = vec![
            ChatMessage::new(Role::System, "Be brief."),
            ChatMessage::new(Role::User, "What is this? <|im_end|>")
                .with_pictures(vec![picture(1), picture(2)]),
        ];
        for kind in [BackendKind::Npu, BackendKind::Remote] {
            let Input::Chat(sent) = input_for(Input::Chat(messages.clone()), kind) else {
                panic!("a chat stays a chat");
            };
            assert_eq!(sent.len(), 2);
            assert_eq!(sent[1].role, Role::User);
            assert_eq!(
                sent[1].pictures, messages[1].pictures,
                "both pictures, in order, for {kind:?}"
            );
            assert!(sent[0].pictures.is_empty());
            assert!(
                !sent[1].content.contains("<|im_end|>"),
                "the marker is broken"
            );
            assert_eq!(sent[1].content.replace('\u{200D}', ""), messages[1].content);
        }
        let Input::Chat(sent) = input_for(Input::Chat(messages.clone()), BackendKind::Cpu) else {
            panic!("a chat stays a chat");
        };
        assert_eq!(
            sent, messages,
            "Hearth's engine takes the words as they are"
        );
    }

    #[test]
    fn answers_computed_here_are_measured_here() {
        assert!(power_meter(&home(), BackendKind::Cpu).is_some());
        assert!(power_meter(&home(), BackendKind::Npu).is_some());
    }

    #[test]
    fn a_remote_servers_answer_is_not_measured_on_this_computer() {
        assert!(
            power_meter(&home(), BackendKind::Remote).is_none(),
            "this computer's sensors do not see the server's work"
        );
    }
}
