//! Property tests (a fuzz target) for chat templates, which come with downloaded models:
//! templates assembled from Jinja pieces (loops, string building, output, macros, raises,
//! broken syntax) and random conversations must compile or fail with an error, and render or
//! fail with an error, always within the limits: never a panic, a hang or unbounded memory.
//! (A list doubled more than 32 times is left out: minijinja does not bound it yet.)
//!
//! CI runs a bounded number of cases; for a long run:
//! `PROPTEST_CASES=20000 cargo test -p hearth-engine --release --test fuzz_chat_template`.

use std::collections::BTreeMap;

use hearth_engine::{ChatMessage, ChatTemplate, Role};
use proptest::prelude::*;

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("{% for m in messages %}".to_owned()),
        Just("{% endfor %}".to_owned()),
        Just("{{ m.role }}: {{ m.content }}\n".to_owned()),
        Just("{% for i in range(100000) %}".to_owned()),
        Just("{% set ns = namespace(s='ab') %}".to_owned()),
        Just("{% set ns.s = ns.s ~ ns.s %}".to_owned()),
        Just("{{ ns.s }}".to_owned()),
        Just("{{ 'x' * 100000000000 }}".to_owned()),
        Just("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}".to_owned()),
        Just("{{ raise_exception('no') }}".to_owned()),
        Just("{% if add_generation_prompt %}<|assistant|>{% endif %}".to_owned()),
        Just("{{ messages | tojson }}".to_owned()),
        Just("{{ messages[0].content.split(' ')[-1].strip() }}".to_owned()),
        Just("{% if enable_thinking is defined %}{{ enable_thinking }}{% endif %}".to_owned()),
        Just("{{ bos_token }}".to_owned()),
        Just("{%".to_owned()),
        Just("}}".to_owned()),
        "[a-z<|>{}% ]{0,12}",
    ]
}

fn message() -> impl Strategy<Value = ChatMessage> {
    (
        prop::sample::select(vec![Role::System, Role::User, Role::Assistant]),
        "\\PC{0,40}",
    )
        .prop_map(|(role, content)| ChatMessage::new(role, content))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn any_template_compiles_or_fails_and_renders_within_the_limits(
        pieces in prop::collection::vec(piece(), 0..10),
        messages in prop::collection::vec(message(), 0..6),
        generation_prompt: bool,
        thinking: Option<bool>,
    ) {
        let source = pieces.concat();
        let mut special = BTreeMap::new();
        special.insert("bos_token".to_owned(), "<s>".to_owned());
        if let Ok(template) = ChatTemplate::new(&source, special) {
            let rendered = template.render(&messages, generation_prompt, thinking);
            if let Ok(text) = rendered {
                use hearth_engine::template_limits as limits;
                let text_bytes: usize = messages.iter().map(|m| m.content.len()).sum();
                prop_assert!(
                    text.len()
                        <= limits::BASE_OUTPUT_BYTES
                            + limits::OUTPUT_PER_TEXT_BYTE * text_bytes
                            + limits::OUTPUT_PER_MESSAGE * messages.len()
                );
            }
        }
    }
}
