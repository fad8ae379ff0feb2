//! The `cpu` backend: Hearth's own engine ([`hearth_engine::Model`]) on this computer's
//! processor. Always available for a model folder the engine can load; the reference every other
//! backend is checked against. It is where structured output is enforced: the engine samples
//! under `ChatOptions::format`, so a JSON answer that ends always parses and matches its schema.

use std::cell::RefCell;
use std::path::Path;

use hearth_engine::{ChatOptions, LoadOptions, Model};

use hearth_chat::backend::{
    Backend, BackendError, BackendEvent, BackendInfo, BackendKind, BackendTimings, EventSink,
    Generation, Input, Prompt, TokenCount,
};

/// The engine with one loaded model.
pub struct CpuBackend {
    model: Model,
    info: BackendInfo,
}

impl CpuBackend {
    /// Loads the model folder `dir`. `name` is how the user knows it (registry name);
    /// `sha256` is the weights' hash when the registry has it.
    pub fn open(
        dir: &Path,
        name: &str,
        options: &LoadOptions,
        sha256: Option<String>,
    ) -> Result<Self, BackendError> {
        let model = Model::load(dir, options)?;
        Ok(Self::from_model(model, name, sha256))
    }

    /// Wraps an already loaded model.
    pub fn from_model(model: Model, name: &str, sha256: Option<String>) -> Self {
        let engine = model.info();
        let label = if engine.kernel.is_empty() {
            BackendKind::Cpu.to_string()
        } else {
            format!("cpu ({})", engine.kernel)
        };
        let info = BackendInfo {
            kind: BackendKind::Cpu,
            label,
            device: cpu_name(),
            model: name.to_owned(),
            context_length: Some(engine.context_length),
            model_sha256: sha256,
            runtime_version: None,
        };
        CpuBackend { model, info }
    }

    /// The engine's model (its facts: family, parameters, kernel level).
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Refuses a model that cannot chat: one without a tokenizer or a chat template.
    pub fn require_chat(&self) -> Result<(), BackendError> {
        let engine = self.model.info();
        let missing = if !engine.has_tokenizer {
            "tokenizer.json"
        } else if !engine.has_chat_template {
            "chat template"
        } else {
            return Ok(());
        };
        Err(BackendError::Unsupported(format!(
            "the model {} has no {missing}, so it cannot answer chat messages; use a chat \
             model folder (with tokenizer.json and a chat template), or `hearth run --raw` to \
             continue plain text",
            self.info.model
        )))
    }
}

impl Backend for CpuBackend {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn prepare(&mut self, input: Input, options: &ChatOptions) -> Result<Prompt, BackendError> {
        // A schema Hearth cannot follow is refused before the answer starts.
        options.format.validate()?;
        let tokens = match &input {
            Input::Chat(messages) => self.model.tokenize_chat(messages, options)?,
            Input::Continue(messages) => self.model.tokenize_chat_continuing(messages, options)?,
            Input::Raw(text) => self.model.tokenize(text)?,
        };
        Ok(Prompt {
            input,
            count: TokenCount {
                tokens: tokens.len(),
                exact: true,
            },
            tokens: Some(tokens),
        })
    }

    fn count_text(&self, text: &str) -> TokenCount {
        hearth_chat::backend::count_tokens(self.model.tokenizer(), text)
    }

    fn set_kv_origin(&mut self, origin: hearth_chat::KvOrigin) {
        self.model.set_kv_origin(origin);
    }

    fn continues_answers(&self) -> bool {
        true
    }

    fn generate(
        &mut self,
        prompt: Prompt,
        options: &ChatOptions,
        on_event: EventSink<'_>,
    ) -> Result<Generation, BackendError> {
        let tokens = match prompt.tokens {
            Some(tokens) => tokens,
            None => self
                .prepare(prompt.input, options)?
                .tokens
                .unwrap_or_default(),
        };
        // The engine reports the prefill and the text through two callbacks, never at once.
        let on_event = RefCell::new(on_event);
        let stats = self.model.generate_text(
            &tokens,
            options,
            &mut |progress| (*on_event.borrow_mut())(BackendEvent::Reading(progress)),
            &mut |piece| (*on_event.borrow_mut())(BackendEvent::Text(piece)),
        )?;
        let prefill_rate =
            (stats.prefill_secs > 0.0).then(|| stats.prefilled_tokens as f64 / stats.prefill_secs);
        Ok(Generation {
            prompt_tokens: TokenCount {
                tokens: stats.prompt_tokens,
                exact: true,
            },
            generated_tokens: TokenCount {
                tokens: stats.generated_tokens,
                exact: true,
            },
            stop_reason: stats.stop_reason,
            timings: BackendTimings {
                load_secs: None,
                prefill_secs: Some(stats.prefill_secs),
                prefill_tokens: Some(stats.prefilled_tokens),
                prefill_tokens_per_s: prefill_rate,
                decode_secs: Some(stats.decode_secs),
                decode_tokens_per_s: stats.decode_tokens_per_sec(),
            },
        })
    }
}

/// The CPU's model name, for showing where a model runs.
pub fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("{} CPU", std::env::consts::ARCH))
}
