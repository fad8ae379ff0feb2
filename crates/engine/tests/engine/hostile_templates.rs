//! A chat template comes with a downloaded model, so it is outside input: one that loops for
//! ever, doubles a string or a list until memory runs out, writes without end, recurses
//! without end, or builds values nested deep enough to overflow a stack when printed, compared
//! or dropped must be stopped with a plain error naming the model, never hang or abort the
//! process; `check_chat_template` refuses such a model before it is installed, and loading it
//! fails the same way. A template that misbehaves only on some input passes the check, so
//! every render is bounded the same way (the review's reproductions N1 and N4 are here).

use crate::common;

use std::collections::BTreeMap;

use common::copy_fixture;
use hearth_engine::{
    check_chat_template, ChatMessage, ChatTemplate, Error, LoadOptions, Model, Role,
};

/// Three nested loops of 100,000: about 10^15 iterations.
const NESTED_LOOPS: &str = "{% set ns = namespace(n=0) %}{% for a in range(100000) %}\
    {% for b in range(100000) %}{% for c in range(100000) %}{% set ns.n = ns.n + 1 %}\
    {% endfor %}{% endfor %}{% endfor %}{{ ns.n }}";

/// A string doubled 64 times: 2^68 bytes.
const STRING_DOUBLING: &str = "{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}\
    {% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}";

/// 10^10 lines of output.
const ENDLESS_OUTPUT: &str = "{% for i in range(100000) %}{% for j in range(100000) %}\
    a line of output that goes on and on and on\n{% endfor %}{% endfor %}";

/// A macro that calls itself without end.
const DEEP_RECURSION: &str = "{% macro down(n) %}{{ down(n + 1) }}{% endmacro %}{{ down(0) }}";

/// A list nested 100,000 deep, one level per loop turn (review N1), then printed.
const DEEP_LIST_PRINTED: &str = "{% set ns = namespace(x=[1]) %}{% for j in range(1000) %}\
    {% for i in range(100) %}{% set ns.x = [ns.x] %}{% endfor %}{% endfor %}{{ ns.x }}";

/// The same list compared with itself (minijinja compares by native recursion).
const DEEP_LIST_COMPARED: &str = "{% set ns = namespace(x=[1], y=[1]) %}\
    {% for i in range(100000) %}{% set ns.x = [ns.x] %}{% set ns.y = [ns.y] %}{% endfor %}\
    {{ ns.x == ns.y }}";

/// The same as a map, through Hearth's `tojson`.
const DEEP_MAP_TOJSON: &str = "{% set ns = namespace(x={}) %}{% for i in range(100000) %}\
    {% set ns.x = {'a': ns.x} %}{% endfor %}{{ ns.x | tojson }}";

/// Many levels per turn (a literal nested 100 deep), the cheapest depth fuel can buy, then
/// joined to a string (minijinja's own printing).
const DEEP_CHEAPLY_CONCATENATED: &str = "{% set ns = namespace(x=1) %}{% for i in range(30000) %}\
    {% set ns.x = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[ns.x]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]] %}\
    {% endfor %}{{ ns.x ~ '' }}";

/// Nesting through macro arguments instead of a namespace.
const DEEP_THROUGH_MACROS: &str = "{% macro down(n, x) %}{% if n > 0 %}\
    {{ down(n - 1, [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[x]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]) }}\
    {% else %}{{ x == x ~ x }}{% endif %}{% endmacro %}{{ down(60, 1) }}";

/// A namespace made to hold itself, then printed by minijinja's own `~`.
const NAMESPACE_HOLDING_ITSELF: &str =
    "{% set ns = namespace(x=1) %}{% set ns.x = [ns] %}{{ ns.x ~ '' }}";

/// `tojson` with an indent of 10^11 spaces (review N4: an allocation abort).
const TOJSON_HUGE_INDENT: &str = "{{ messages | tojson(100000000000) }}";

/// `tojson` of a structure shared 2^22 times (review N4: 5.5 GB).
const TOJSON_SHARED: &str = "{% set ns = namespace(l=[messages]) %}{% for i in range(22) %}\
    {% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l | tojson | length }}";

/// A `str.format` width of two billion (review N4: 3.9 GB).
const FORMAT_WIDTH: &str = "{{ \"{:>2000000000}\".format(\"x\") }}";

/// A list doubled 40 times: lazy in minijinja until 32 concatenations, then copied without
/// charging fuel (2^40 items).
const LIST_DOUBLING: &str = "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}\
    {% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l | length }}";

/// Namespaces made in a loop and linked one to the next, each link checked on its own.
const LINKED_NAMESPACES: &str = "{% set ns = namespace(all=[]) %}{% for i in range(100000) %}\
    {% set ns.all = ns.all + [namespace(next=none)] %}{% endfor %}\
    {% for i in range(99999) %}{% set a = ns.all[i] %}{% set a.next = [ns.all[i + 1]] %}{% endfor %}\
    {{ ns.all[0] ~ '' }}";

const HOSTILE: [(&str, &str); 15] = [
    ("nested loops", NESTED_LOOPS),
    ("string doubling", STRING_DOUBLING),
    ("endless output", ENDLESS_OUTPUT),
    ("deep recursion", DEEP_RECURSION),
    ("deep list printed", DEEP_LIST_PRINTED),
    ("deep list compared", DEEP_LIST_COMPARED),
    ("deep map through tojson", DEEP_MAP_TOJSON),
    (
        "deep list built cheaply and concatenated",
        DEEP_CHEAPLY_CONCATENATED,
    ),
    ("deep list through macro arguments", DEEP_THROUGH_MACROS),
    ("namespace holding itself", NAMESPACE_HOLDING_ITSELF),
    ("tojson with a huge indent", TOJSON_HUGE_INDENT),
    ("tojson of a shared structure", TOJSON_SHARED),
    ("str.format with a huge width", FORMAT_WIDTH),
    ("list doubling", LIST_DOUBLING),
    ("linked namespaces", LINKED_NAMESPACES),
];

fn render(source: &str) -> Result<String, Error> {
    let template = ChatTemplate::new(source, BTreeMap::new()).expect("the template compiles");
    template.render(&[ChatMessage::new(Role::User, "Hello")], true, None)
}

#[test]
fn nested_loops_are_stopped() {
    let err = render(NESTED_LOOPS).expect_err("a template that would run for ever is stopped");
    assert!(err.to_string().contains("was stopped"), "{err}");
}

#[test]
fn string_doubling_is_stopped() {
    let err = render(STRING_DOUBLING).expect_err("a template that doubles a string is stopped");
    assert!(err.to_string().contains("was stopped"), "{err}");
}

#[test]
fn endless_output_and_deep_recursion_are_stopped() {
    for (what, source) in &HOSTILE[2..4] {
        let err = render(source).expect_err(what);
        assert!(
            matches!(err, Error::ChatTemplateLimit { .. }),
            "{what} is stopped at a limit: {err}"
        );
    }
}

/// Renders `source` on a thread with a 2 MiB stack, as a server's worker thread has.
fn render_on_a_small_stack(source: &'static str, message: &'static str) -> Result<String, Error> {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let template = ChatTemplate::new(source, BTreeMap::new()).expect("it compiles");
            template.render(&[ChatMessage::new(Role::User, message)], true, None)
        })
        .unwrap()
        .join()
        .expect("the render returns, it does not crash the thread")
}

#[test]
fn deep_values_are_stopped_however_they_are_built_or_used() {
    for (what, source) in &HOSTILE[4..10] {
        let err = render_on_a_small_stack(source, "Hello").expect_err(what);
        assert!(
            matches!(err, Error::ChatTemplateLimit { .. }),
            "{what} is stopped at a limit: {err}"
        );
    }
}

#[test]
fn tojson_format_and_list_growth_are_stopped_before_they_allocate() {
    for (what, source) in &HOSTILE[10..] {
        let err = render_on_a_small_stack(source, "Hello").expect_err(what);
        assert!(
            matches!(err, Error::ChatTemplateLimit { .. }),
            "{what} is stopped at a limit: {err}"
        );
    }
}

/// Review N1: a template that nests only when a message holds a trigger word passes the
/// install check, so the render a request makes must stop it on its own.
const NESTS_ON_A_TRIGGER_WORD: &str = "{% if 'BOOM' in messages[-1]['content'] %}\
    {% set ns = namespace(x=[1]) %}{% for j in range(1000) %}{% for i in range(100) %}\
    {% set ns.x = [ns.x] %}{% endfor %}{% endfor %}{{ ns.x }}{% endif %}\
    {% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}\
    {% endfor %}<|im_start|>assistant\n";

#[test]
fn a_template_that_nests_on_a_trigger_word_is_stopped_when_the_word_comes() {
    let (_keep, dir) = model_with_template(NESTS_ON_A_TRIGGER_WORD, "trig");
    check_chat_template(&dir, "trig").expect("the samples do not hold the word");
    let text = render_on_a_small_stack(NESTS_ON_A_TRIGGER_WORD, "hi").expect("renders");
    assert!(text.ends_with("<|im_start|>assistant"), "{text}");
    let err = render_on_a_small_stack(NESTS_ON_A_TRIGGER_WORD, "BOOM").expect_err("stopped");
    assert!(
        err.to_string().contains("nested more than"),
        "the message says which limit: {err}"
    );
}

#[test]
fn every_limit_gives_the_same_error_at_the_check_and_at_a_render() {
    for (what, source) in &HOSTILE[4..] {
        let (_keep, dir) = model_with_template(source, "evil-folder");
        let checked = check_chat_template(&dir, "evil").expect_err(what);
        let template = ChatTemplate::new(source, BTreeMap::new()).expect("it compiles");
        let rendered = template
            .render(&[ChatMessage::new(Role::User, "Hello!")], true, None)
            .expect_err(what);
        let limit = |e: &Error| match e {
            Error::ChatTemplateLimit { limit, .. } => limit.clone(),
            other => panic!("{what}: not a limit error: {other}"),
        };
        assert_eq!(limit(&checked), limit(&rendered), "{what}");
    }
}

#[test]
fn a_template_longer_than_the_limit_is_refused_and_a_long_expression_is_not_a_crash() {
    let too_long = format!(
        "{{{{ '{}' }}}}",
        "x".repeat(hearth_engine::template_limits::SOURCE_BYTES)
    );
    let (_keep, dir) = model_with_template(&too_long, "long");
    let err = check_chat_template(&dir, "long").expect_err("refused");
    assert!(err.to_string().contains("bytes long"), "{err}");
    // 400 filters on each side nest a list 400 deep without a store; compiling, comparing
    // and dropping it recurse that deep, within the template thread's stack.
    let chain = format!("{{{{ ([1]{0}) == ([1]{0}) }}}}", "|batch(1)".repeat(400));
    let text = render_on_a_small_stack(Box::leak(chain.into_boxed_str()), "Hello");
    assert_eq!(text.expect("renders"), "True");
    // A tag of 12,000 filters (or a chain of 100,000 constants, which minijinja's constant
    // folding takes minutes to compile) is refused before it is compiled.
    for long in [
        format!("{{{{ ([1]{0}) == ([1]{0}) }}}}", "|batch(1)".repeat(12_000)),
        format!("{{{{ 1{} }}}}", "~1".repeat(100_000)),
    ] {
        let (_keep, dir) = model_with_template(&long, "chain");
        let err = check_chat_template(&dir, "chain").expect_err("refused");
        assert!(matches!(err, Error::ChatTemplateLimit { .. }), "{err}");
        assert!(err.to_string().contains("tokens"), "{err}");
    }
}

/// The tiny Llama fixture with `template` as its chat_template.jinja, in a folder called `name`.
fn model_with_template(template: &str, name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let fixture = copy_fixture("tiny-llama");
    let dir = fixture.path().join(name);
    std::fs::create_dir(&dir).unwrap();
    for entry in std::fs::read_dir(fixture.path()).unwrap().flatten() {
        if entry.path().is_file() {
            std::fs::rename(entry.path(), dir.join(entry.file_name())).unwrap();
        }
    }
    std::fs::write(dir.join("chat_template.jinja"), template).unwrap();
    (fixture, dir)
}

#[test]
fn check_refuses_every_hostile_template_naming_the_model() {
    for (what, source) in HOSTILE {
        let (_keep, dir) = model_with_template(source, "evil-folder");
        let err = check_chat_template(&dir, "evil-model").expect_err(what);
        let message = err.to_string();
        assert!(
            message.contains("evil-model") && message.contains("was stopped"),
            "{what}: the refusal names the model and says it was stopped: {message}"
        );
    }
}

#[test]
fn check_refuses_a_hostile_template_in_tokenizer_config_json() {
    let (_keep, dir) = model_with_template("", "m");
    std::fs::remove_file(dir.join("chat_template.jinja")).unwrap();
    let path = dir.join("tokenizer_config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["chat_template"] = STRING_DOUBLING.into();
    std::fs::write(&path, config.to_string()).unwrap();
    let err = check_chat_template(&dir, "m").expect_err("the template is refused");
    assert!(matches!(err, Error::ChatTemplateLimit { .. }), "{err}");
}

#[test]
fn check_accepts_real_templates_and_those_that_reject_a_sample() {
    for fixture in ["tiny-llama", "tiny-qwen3", "qwen3-tokenizer"] {
        let dir = common::fixture(fixture);
        check_chat_template(&dir, fixture).unwrap_or_else(|e| panic!("{fixture}: {e}"));
    }
    // Some templates refuse a system turn on purpose; that is no reason to refuse the model.
    let (_keep, dir) = model_with_template(
        "{% if messages[0].role == 'system' %}{{ raise_exception('no system turn') }}{% endif %}\
         {% for m in messages %}{{ m.content }}{% endfor %}",
        "picky",
    );
    check_chat_template(&dir, "picky").expect("a template that raises on purpose passes");
}

#[test]
fn loading_a_model_with_a_hostile_template_fails_naming_it() {
    let (_keep, dir) = model_with_template(NESTED_LOOPS, "looping-model");
    let err = Model::load(&dir, &LoadOptions::default()).expect_err("the model is refused");
    assert!(
        err.to_string().contains("looping-model"),
        "the error names the model folder: {err}"
    );
}
