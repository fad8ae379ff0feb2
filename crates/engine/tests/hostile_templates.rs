//! A chat template comes with a downloaded model, so it is outside input: one that loops for
//! ever, doubles a string until memory runs out, writes without end or recurses
//! without end must be stopped with a plain error naming the model, never hang or abort the
//! process (a list doubled more than 32 times is not stopped yet: see `template_limits`);
//! `check_chat_template` refuses such a model before it is installed, and loading it
//! fails the same way.

mod common;

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

const HOSTILE: [(&str, &str); 4] = [
    ("nested loops", NESTED_LOOPS),
    ("string doubling", STRING_DOUBLING),
    ("endless output", ENDLESS_OUTPUT),
    ("deep recursion", DEEP_RECURSION),
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
    for (what, source) in &HOSTILE[2..] {
        let err = render(source).expect_err(what);
        assert!(
            matches!(err, Error::ChatTemplateLimit { .. }),
            "{what} is stopped at a limit: {err}"
        );
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
