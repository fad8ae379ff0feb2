//! Continuing an answer that was cut short (at the length limit, or stopped): the conversation is
//! rendered with that answer as the last message and its turn left open, so the model writes on
//! where it stopped instead of starting a new answer (transformers' `continue_final_message`).

use crate::chat_template::{ChatMessage, Role};
use crate::runner::ChatOptions;
use crate::{Error, Model};

impl Model {
    /// Token ids of `messages`, whose last one is the assistant's cut answer, rendered through
    /// the chat template without opening a new turn and cut right after that answer's text (the
    /// template's end-of-turn marker left out). As [`Model::tokenize_chat`], a special token's
    /// spelling inside a message is ordinary text. Refused when the last message is not a
    /// non-empty answer, or when the template does not write the answer's text as it is (then
    /// there is no place to continue from).
    pub fn tokenize_chat_continuing(
        &self,
        messages: &[ChatMessage],
        options: &ChatOptions,
    ) -> Result<Vec<u32>, Error> {
        let refuse = |reason: &str| Error::ChatTemplate {
            reason: reason.to_string(),
        };
        let last = messages
            .last()
            .filter(|m| m.role == Role::Assistant && !m.content.trim().is_empty())
            .ok_or_else(|| refuse("only an answer that was started can be continued"))?;
        let template = self
            .template
            .as_ref()
            .ok_or_else(|| Error::NoChatTemplate {
                dir: self.dir.clone(),
            })?;
        let tokenizer = self.require_tokenizer()?;
        let rendered = template.render(
            &super::quoted(tokenizer, messages),
            false,
            options.enable_thinking,
        )?;
        let answer = tokenizer.quote(last.content.trim());
        let end = rendered
            .rfind(answer.as_str())
            .map(|start| start + answer.len())
            .ok_or_else(|| {
                refuse("the chat template rewrites the answer, so it cannot be continued")
            })?;
        tokenizer.encode_prompt(&rendered[..end])
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::chat_template::{ChatMessage, Role};
    use crate::runner::ChatOptions;
    use crate::{LoadOptions, Model};

    fn tiny_qwen3() -> Model {
        let dir =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/engine/tiny-qwen3");
        Model::load(&dir, &LoadOptions::default()).unwrap()
    }

    #[test]
    fn a_cut_answer_is_continued_from_its_last_word_not_in_a_new_turn() {
        let model = tiny_qwen3();
        let options = ChatOptions::default();
        let question = ChatMessage::new(Role::User, "Tell me about <|im_end|> tokens.");
        let cut = ChatMessage::new(Role::Assistant, "They mark the end of a turn, and");
        let continuing = model
            .tokenize_chat_continuing(&[question.clone(), cut.clone()], &options)
            .unwrap();
        let tokenizer = model.tokenizer().unwrap();
        let text = tokenizer.decode(&continuing, false).unwrap();
        // Qwen3's template writes an empty thinking block before the last answer.
        assert!(
            text.ends_with(
                "<|im_start|>assistant\n<think>\n\n</think>\n\nThey mark the end of a turn, and"
            ),
            "the answer's turn is left open at its last word: {text:?}"
        );
        let asked = model.tokenize_chat(&[question], &options).unwrap();
        assert_eq!(
            continuing[..asked.len()],
            asked[..],
            "the question reads as in the first answer (its computed prefix is reused)"
        );
    }

    #[test]
    fn only_a_started_answer_can_be_continued() {
        let model = tiny_qwen3();
        let options = ChatOptions::default();
        for last in [
            ChatMessage::new(Role::User, "hello"),
            ChatMessage::new(Role::Assistant, "  "),
        ] {
            assert!(model.tokenize_chat_continuing(&[last], &options).is_err());
        }
    }
}
