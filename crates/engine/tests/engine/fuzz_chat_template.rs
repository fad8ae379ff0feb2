//! Property tests (a fuzz target) for chat templates, which come with downloaded models:
//! templates assembled from Jinja pieces (loops, string and list building, values nested
//! through namespaces, output, macros, raises, `tojson` and `str.format` with hostile
//! arguments, broken syntax) and random conversations must compile or fail with an error, and
//! render or fail with an error, always within the limits: never a panic, a stack overflow, a
//! hang or unbounded memory. Renders run on a 2 MiB stack, as a server's worker thread has.
//!
//! The cases are the same on every run (a fixed seed and count); for a long run with another
//! seed: `PROPTEST_CASES=20000 PROPTEST_RNG_SEED=7 cargo test -p hearth-engine --release
//! --test engine fuzz_chat_template::`.

use crate::common;

use std::collections::BTreeMap;

use hearth_engine::{ChatMessage, ChatTemplate, Error, Role};
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
        Just("{{ messages | tojson(4) }}".to_owned()),
        Just("{{ messages | tojson(100000000000) }}".to_owned()),
        Just("{{ '{:>2000000000}'.format('x') }}".to_owned()),
        Just("{% set ns = namespace(x=[1], l=[1]) %}".to_owned()),
        Just("{% set ns.x = [[[[[[[[ns.x]]]]]]]] %}".to_owned()),
        Just("{% set ns.x = {'a': ns.x} %}".to_owned()),
        Just("{% set ns.x = [ns] %}".to_owned()),
        Just("{% set ns.l = ns.l + ns.l %}".to_owned()),
        Just("{% set ns.l = [ns.l, ns.l] %}".to_owned()),
        Just("{{ ns.x }}{{ ns.x == ns.l }}{{ ns.x ~ '' }}".to_owned()),
        Just("{{ ns.l | tojson | length }}{{ ns.x | tojson }}".to_owned()),
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

/// Renders on a thread with a 2 MiB stack; a stack overflow would abort the test binary.
fn render_on_a_small_stack(
    template: ChatTemplate,
    messages: Vec<ChatMessage>,
    generation_prompt: bool,
    thinking: Option<bool>,
) -> Result<String, Error> {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || template.render(&messages, generation_prompt, thinking))
        .unwrap()
        .join()
        .expect("a render returns an error, it never panics")
}

proptest! {
    #![proptest_config(common::fixed_proptest_config(96))]

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
            let text_bytes: usize = messages.iter().map(|m| m.content.len()).sum();
            let count = messages.len();
            let rendered = render_on_a_small_stack(template, messages, generation_prompt, thinking);
            prop_assert!(
                !matches!(rendered, Err(ref e) if !matches!(
                    e,
                    Error::ChatTemplate { .. } | Error::ChatTemplateLimit { .. }
                )),
                "a render fails only with a template error: {rendered:?}"
            );
            if let Ok(text) = rendered {
                use hearth_engine::template_limits as limits;
                prop_assert!(
                    text.len()
                        <= limits::BASE_OUTPUT_BYTES
                            + limits::OUTPUT_PER_TEXT_BYTE * text_bytes
                            + limits::OUTPUT_PER_MESSAGE * count
                );
            }
        }
    }
}
