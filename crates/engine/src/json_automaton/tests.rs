use super::*;
use proptest::prelude::*;
use serde_json::{json, Value};

fn grammar(schema: Value) -> Grammar {
    Grammar::from_schema(&schema).expect("schema compiles")
}

/// The state after byte `b`, with no bound on the work (for tests not about the bounds).
fn next(state: &JsonState, grammar: &Grammar, b: u8) -> JsonState {
    let mut work = u64::MAX;
    state
        .step(grammar, b, &mut work)
        .expect("within the bounds")
}

/// The state after `bytes` from the start, with no bound on the work.
fn after(grammar: &Grammar, bytes: &[u8]) -> JsonState {
    let mut work = u64::MAX;
    JsonState::new()
        .advanced(grammar, bytes, &mut work)
        .expect("within the bounds")
}

/// Whether `text` is a whole answer of `grammar`.
fn accepts(grammar: &Grammar, text: &str) -> bool {
    after(grammar, text.as_bytes()).is_complete(grammar)
}

/// Whether `text` can begin an answer of `grammar`.
fn begins(grammar: &Grammar, text: &str) -> bool {
    !after(grammar, text.as_bytes()).is_dead()
}

#[test]
fn any_object_takes_objects_only() {
    let g = Grammar::any_object().unwrap();
    for ok in [
        "{}",
        r#"{"a":1}"#,
        "{\n  \"a\" : [1, 2.5e3, -0, 0.1E+2, true, null, \"x\\n\\u00e9é🙂\"],\"\":{}\n}",
        r#"{"a":{"b":{"c":[[],[{}]]}}}"#,
    ] {
        assert!(accepts(&g, ok), "{ok}");
    }
    for bad in [
        "[1]",
        "1",
        r#""a""#,
        r#"{"a":}"#,
        "{,}",
        r#"{"a":1,}"#,
        r#"{"a":1}x"#,
        r#"{"a":1} "#,
        r#"{"a":01}"#,
        r#"{"a":1.}"#,
        r#"{"a":.5}"#,
        r#"{"a":-}"#,
        r#"{"a":1e}"#,
        r#"{"a":"\ud800"}"#,
        r#"{"a":"\x"}"#,
        "{\"a\":\"\t\"}",
        r#"{"a":tru}"#,
        r#"{a:1}"#,
        r#"{"a" 1}"#,
    ] {
        assert!(!accepts(&g, bad), "{bad}");
    }
    assert!(begins(&g, r#"{"a":[1,"#), "a prefix");
    assert!(!accepts(&g, r#"{"a":[1,"#), "a prefix is not whole");
}

#[test]
fn invalid_utf8_is_refused_and_split_characters_are_fine() {
    let g = grammar(json!({"type": "string"}));
    let emoji = "🙂".as_bytes();
    let mut state = next(&JsonState::new(), &g, b'"');
    for &b in emoji {
        state = next(&state, &g, b);
        assert!(!state.is_dead(), "each byte of a character continues it");
        assert!(!state.is_complete(&g));
    }
    assert!(next(&state, &g, b'"').is_complete(&g));
    for bad in [
        &[b'"', 0xC0, 0x80][..],       // overlong
        &[b'"', 0xED, 0xA0, 0x80][..], // a surrogate
        &[b'"', 0xF5][..],             // past U+10FFFF
        &[b'"', 0x80][..],             // a continuation without a start
        &[b'"', 0xE2, b'x'][..],       // a start without its continuation
    ] {
        assert!(after(&g, bad).is_dead(), "{bad:x?}");
    }
    assert!(!begins(&g, "\u{7f}") && begins(&g, "\"\u{7f}"));
}

#[test]
fn whitespace_is_a_space_or_a_newline_and_indentation() {
    let g = Grammar::any_object().unwrap();
    let indented = |n: usize| format!("{{\n{}}}", " ".repeat(n));
    assert!(accepts(&g, &indented(MAX_INDENT as usize)));
    assert!(accepts(&g, "\n{ \"a\" : 1,\n\t\t\"b\":\n [ 2 ]\n}"));
    assert!(!begins(&g, &indented(MAX_INDENT as usize + 1)));
    for bad in ["{  }", "{\n\n}", "\n\n{}", "{ \n}", "{\r\n}", "{\t}"] {
        assert!(!begins(&g, bad), "{bad:?}");
    }
    // Spaces inside a string are text, not whitespace between tokens.
    assert!(accepts(&g, &format!("{{\"a\":\"{}\"}}", " ".repeat(100))));
}

#[test]
fn numbers_end_where_the_next_token_starts() {
    let g = grammar(json!({"type": "number"}));
    for ok in ["0", "-0", "12", "1.5", "1e9", "-2.5E-3", "1E+2"] {
        assert!(accepts(&g, ok), "{ok}");
    }
    for bad in ["00", "+1", "1.", "-", ".1", "1e", "1e+", "0x1", "1 "] {
        assert!(!accepts(&g, bad), "{bad}");
    }
    let g = grammar(json!({"type": "integer"}));
    assert!(accepts(&g, "-42") && !begins(&g, "4.2") && !begins(&g, "4e2"));
    let digits = "9".repeat(21);
    assert!(!begins(&g, &digits), "a number's digits are bounded");
    let g = grammar(json!({"type": "number"}));
    assert!(accepts(&g, "1e99") && !begins(&g, "1e100"), "exponents too");
}

#[test]
fn properties_follow_the_schema_in_any_order() {
    let g = grammar(json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 3},
            "age": {"type": "integer"},
            "tags": {"type": "array", "items": {"enum": ["a", "bc"]}, "minItems": 1, "maxItems": 2}
        },
        "required": ["name", "age"],
        "additionalProperties": false
    }));
    for ok in [
        r#"{"name":"Ann","age":3}"#,
        r#"{"age":3,"name":"é"}"#,
        r#"{"tags":["bc"],"name":"x","age":-1}"#,
        r#"{"name":"x","age":0,"tags":["a","a"]}"#,
    ] {
        assert!(accepts(&g, ok), "{ok}");
    }
    for bad in [
        r#"{"name":"Ann"}"#,                            // age missing
        r#"{"name":"","age":1}"#,                       // too short
        r#"{"name":"Anna","age":1}"#,                   // too long
        r#"{"name":"x","age":1,"name":"y"}"#,           // twice
        r#"{"name":"x","age":1,"x":1}"#,                // not listed
        r#"{"name":"x","age":1.5}"#,                    // not an integer
        r#"{"name":"x","age":1,"tags":[]}"#,            // too few
        r#"{"name":"x","age":1,"tags":["a","a","a"]}"#, // too many
        r#"{"name":"x","age":1,"tags":["b"]}"#,         // not in the enum
    ] {
        assert!(!accepts(&g, bad), "{bad}");
    }
    // Refused as early as it shows: no key starts with "x", no third tag fits.
    assert!(!begins(&g, r#"{"x"#));
    assert!(!begins(&g, r#"{"name":"x","age":1,"tags":["a","a","#));
    assert!(!begins(&g, r#"{"name":"x","name"#));
    assert!(!begins(&g, r#"{"name":"abcd"#));
}

#[test]
fn other_keys_take_the_additional_schema() {
    let g = grammar(json!({
        "properties": {"a": {"type": "boolean"}},
        "additionalProperties": {"type": "integer"}
    }));
    assert!(accepts(&g, r#"{"a":true,"ab":1,"b":2}"#));
    assert!(!accepts(&g, r#"{"a":1}"#));
    assert!(!accepts(&g, r#"{"b":true}"#));
    assert!(!accepts(&g, r#"{"a":true,"a":false}"#));
}

#[test]
fn literals_any_of_and_type_lists() {
    let g = grammar(json!({"enum": [1, 12, "x", null, {"k": [true]}]}));
    for ok in ["1", "12", r#""x""#, "null", r#"{"k":[true]}"#] {
        assert!(accepts(&g, ok), "{ok}");
    }
    for bad in ["2", "123", r#""y""#, r#"{"k": [true]}"#] {
        assert!(!accepts(&g, bad), "{bad}");
    }
    let g = grammar(json!({"const": "only"}));
    assert!(accepts(&g, r#""only""#) && !accepts(&g, r#""onl""#));
    let g = grammar(json!({"anyOf": [
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false},
        {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "null"}}, "required": ["b"], "additionalProperties": false}
    ]}));
    assert!(accepts(&g, r#"{"a":1}"#));
    assert!(accepts(&g, r#"{"a":"s","b":null}"#));
    assert!(!accepts(&g, r#"{"a":1,"b":null}"#));
    assert!(!accepts(&g, r#"{"a":"s"}"#));
    let g = grammar(json!({"type": ["string", "null"]}));
    assert!(accepts(&g, "null") && accepts(&g, r#""""#) && !accepts(&g, "1"));
}

#[test]
fn references_follow_defs_and_may_recurse() {
    // As Pydantic writes nested models, plus a tree that refers to itself.
    let g = grammar(json!({
        "$defs": {
            "Pet": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false, "title": "Pet"},
            "Tree": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}, "additionalProperties": false}
        },
        "type": "object",
        "properties": {
            "pet": {"$ref": "#/$defs/Pet"},
            "other": {"anyOf": [{"$ref": "#/$defs/Pet"}, {"type": "null"}], "default": null},
            "tree": {"$ref": "#/$defs/Tree"}
        },
        "required": ["pet"],
        "additionalProperties": false
    }));
    assert!(accepts(&g, r#"{"pet":{"name":"Rex"},"other":null}"#));
    assert!(accepts(
        &g,
        r#"{"pet":{"name":"a"},"tree":{"kids":[{"kids":[{}]},{}]}}"#
    ));
    assert!(!accepts(&g, r#"{"pet":{}}"#));
    assert!(!accepts(&g, r#"{"pet":{"name":"a"},"tree":{"kids":[1]}}"#));
}

#[test]
fn a_complete_value_allows_nothing_more() {
    let g = Grammar::any_object().unwrap();
    let state = after(&g, b"{}");
    assert!(state.is_complete(&g));
    for b in 0..=255u8 {
        assert!(next(&state, &g, b).is_dead(), "byte {b} after the value");
    }
}

/// The review's P13 schema: `anyOf` of `alternatives`, each an array of the same `anyOf`
/// (all copies of one array, or each with its own `maxItems`).
fn arrays_of_arrays(alternatives: usize, distinct: bool) -> Grammar {
    let array = |i: usize| match distinct {
        true => json!({"type": "array", "items": {"$ref": "#/$defs/s"}, "maxItems": i + 1}),
        false => json!({"type": "array", "items": {"$ref": "#/$defs/s"}}),
    };
    let alternatives: Vec<Value> = (0..alternatives).map(array).collect();
    grammar(json!({"$defs": {"s": {"anyOf": alternatives}}, "$ref": "#/$defs/s"}))
}

#[test]
fn p13_any_of_of_arrays_is_bounded() {
    // 1,000 copies of one alternative are one: "[[[…" keeps a single reading.
    let g = arrays_of_arrays(1_000, false);
    let state = after(&g, "[".repeat(1_000).as_bytes());
    assert_eq!(state.threads.len(), 1);
    assert!(accepts(&g, "[[],[[]]]"));
    // 64 different ones multiply by 64 at each "[": the second is refused at once.
    let g = arrays_of_arrays(64, true);
    let one = after(&g, b"[");
    assert_eq!(one.threads.len(), 64);
    let started = std::time::Instant::now();
    let mut work = u64::MAX;
    assert_eq!(one.step(&g, b'[', &mut work), Err(Overrun::Threads));
    assert!(
        started.elapsed().as_millis() < 500,
        "{:?}",
        started.elapsed()
    );
    assert!(
        accepts(&g, "[]"),
        "an answer within the bounds still passes"
    );
}

#[test]
fn p13_a_step_stops_when_its_work_runs_out() {
    let g = Grammar::any_object().unwrap();
    let deep = after(&g, &[&b"{\"a\":"[..], &[b'['; 2_000]].concat());
    // The reading is 2,003 frames deep: stepping it and the one made cost 126 each.
    let mut work = 200;
    assert_eq!(deep.step(&g, b'[', &mut work), Err(Overrun::Work));
    let mut work = 1_000;
    assert!(deep.step(&g, b'[', &mut work).is_ok());
    assert_eq!(work, 1_000 - 126 - 126);
}

#[test]
fn a_loop_of_references_starts_values_without_recursing() {
    // `a` is any of `a` itself or null: starting a value looks through the loop once.
    let g = grammar(json!({
        "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}, {"$ref": "#/$defs/b"}]},
                  "b": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "array", "items": {"$ref": "#/$defs/b"}}]}},
        "$ref": "#/$defs/a"
    }));
    assert!(accepts(&g, "null") && accepts(&g, "[[null],[]]"));
    assert!(!accepts(&g, "1"));
}

/// A JSON value of any kind, nested at most 4 deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // Exponents of two digits at most (see MAX_DIGITS).
        any::<f64>()
            .prop_filter("two exponent digits", |f| *f == 0.0
                || (1e-90..1e90).contains(&f.abs()))
            .prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map(any::<String>(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A schema made of every supported keyword, nested at most 3 deep, with repeated
/// alternatives and references to a tree that refers to itself (`#/$defs/tree`).
fn json_schema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({"type": "null"})),
        Just(json!({"type": "boolean"})),
        Just(json!({"type": "integer"})),
        Just(json!({"type": ["number", "null"]})),
        (0u32..3, 0u32..4).prop_map(
            |(min, more)| json!({"type": "string", "minLength": min, "maxLength": min + more})
        ),
        Just(json!({"enum": ["a", "ab", 1, null, [true]]})),
        Just(json!({"const": {"k": [1]}})),
        Just(json!({"$ref": "#/$defs/tree"})),
        Just(json!({})),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            (inner.clone(), 0u32..2, prop::option::of(0u32..3)).prop_map(|(items, min, more)| {
                let mut array = json!({"type": "array", "items": items, "minItems": min});
                if let Some(more) = more {
                    array["maxItems"] = json!(min + more);
                }
                array
            }),
            (
                prop::collection::btree_map(
                    prop::sample::select(vec!["a", "ab", "b"]),
                    inner.clone(),
                    0..3
                ),
                any::<u8>(),
                prop_oneof![Just(json!(false)), Just(json!(true)), inner.clone()],
            )
                .prop_map(|(properties, bits, additional)| {
                    let required: Vec<&str> = properties
                        .keys()
                        .enumerate()
                        .filter(|(i, _)| bits & (1 << i) != 0)
                        .map(|(_, k)| *k)
                        .collect();
                    json!({"type": "object", "properties": properties, "required": required,
                           "additionalProperties": additional})
                }),
            prop::collection::vec(inner.clone(), 1..4).prop_map(|a| json!({"anyOf": a})),
            inner.prop_map(|s| json!({"anyOf": [s.clone(), s], "title": "twice"})),
        ]
    })
    .prop_map(|mut schema| {
        schema["$defs"] = json!({"tree": {"anyOf": [
            {"type": "null"},
            {"type": "array", "items": {"$ref": "#/$defs/tree"}, "maxItems": 2}
        ]}});
        schema
    })
}

/// Whether `value` matches `schema` (inside `root`, which `$ref`s point into): an
/// independent reading of the keywords, to check what the automaton lets through.
fn matches(root: &Value, schema: &Value, value: &Value) -> bool {
    let Some(s) = schema.as_object() else {
        return schema == &json!(true);
    };
    if let Some(reference) = s.get("$ref").and_then(Value::as_str) {
        return matches(root, root.pointer(&reference[1..]).unwrap(), value);
    }
    if let Some(c) = s.get("const") {
        return c == value;
    }
    if let Some(Value::Array(values)) = s.get("enum") {
        return values.contains(value);
    }
    if let Some(Value::Array(alternatives)) = s.get("anyOf") {
        return alternatives.iter().any(|a| matches(root, a, value));
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t],
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
        None => vec!["null", "boolean", "number", "string", "array", "object"],
        Some(other) => panic!("type {other}"),
    };
    let count = |key: &str| s.get(key).and_then(Value::as_u64).map(|n| n as usize);
    types.iter().any(|t| match (*t, value) {
        ("null", Value::Null) | ("boolean", Value::Bool(_)) | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        ("string", Value::String(text)) => {
            let chars = text.chars().count();
            count("minLength").is_none_or(|m| chars >= m)
                && count("maxLength").is_none_or(|m| chars <= m)
        }
        ("array", Value::Array(items)) => {
            count("minItems").is_none_or(|m| items.len() >= m)
                && count("maxItems").is_none_or(|m| items.len() <= m)
                && items
                    .iter()
                    .all(|item| s.get("items").is_none_or(|i| matches(root, i, item)))
        }
        ("object", Value::Object(fields)) => {
            let listed = s.get("properties").and_then(Value::as_object);
            let required = s.get("required").and_then(Value::as_array);
            let additional = s.get("additionalProperties").unwrap_or(&Value::Bool(true));
            required.is_none_or(|r| r.iter().all(|k| fields.contains_key(k.as_str().unwrap())))
                && fields
                    .iter()
                    .all(|(k, v)| match listed.and_then(|l| l.get(k)) {
                        Some(property) => matches(root, property, v),
                        None => matches(root, additional, v),
                    })
        }
        _ => false,
    })
}

/// A walk of up to `steps` bytes chosen at random among those `g` allows, ending about one
/// time in four once it may; the text, and whether it is a whole value. Fails when a state
/// allows no byte and is not complete (a dead end), or a step goes past the bounds.
fn walk(g: &Grammar, seed: u64, steps: usize) -> Result<(Vec<u8>, bool), TestCaseError> {
    let mut rng = crate::sampler::Rng::new(seed);
    let mut state = JsonState::new();
    let mut text = Vec::new();
    for _ in 0..steps {
        let choices: Vec<u8> = (0..=255u8)
            .filter(|&b| !next(&state, g, b).is_dead())
            .collect();
        let complete = state.is_complete(g);
        prop_assert!(
            complete || !choices.is_empty(),
            "stuck after {:?}",
            String::from_utf8_lossy(&text)
        );
        if choices.is_empty() || complete && rng.next_u64().is_multiple_of(4) {
            break;
        }
        let b = choices[(rng.next_u64() % choices.len() as u64) as usize];
        state = next(&state, g, b);
        text.push(b);
    }
    Ok((text, state.is_complete(g)))
}

proptest! {
    #[test]
    fn every_json_value_is_accepted_compact_and_pretty(value in json_value()) {
        let any = grammar(json!({}));
        let compact = value.to_string();
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        prop_assert!(accepts(&any, &compact), "{}", compact);
        prop_assert!(accepts(&any, &pretty), "{}", pretty);
        let object = Value::from_iter([("v".to_string(), value)]).to_string();
        prop_assert!(accepts(&Grammar::any_object().unwrap(), &object), "{}", object);
    }

    /// Bytes chosen at random among those the automaton allows never lead to a dead end:
    /// from every state some byte continues, or the value is complete, and a complete
    /// value parses.
    #[test]
    fn random_walks_never_get_stuck(seed in any::<u64>()) {
        let g = grammar(json!({
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "name": {"type": "string", "maxLength": 4},
                "kind": {"enum": ["a", "ab", 3]},
                "items": {"type": "array", "items": {"type": ["number", "null"]}, "maxItems": 3}
            },
            "required": ["id", "kind"],
            "additionalProperties": false
        }));
        let (text, complete) = walk(&g, seed, 300)?;
        if complete {
            let parsed: Result<Value, _> = serde_json::from_slice(&text);
            prop_assert!(parsed.is_ok(), "{:?}", String::from_utf8_lossy(&text));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random schemas compile; a random walk under one never gets stuck, and every text
    /// it completes parses and matches the schema (read independently, so sharing
    /// identical nodes and flattening anyOfs change nothing a schema means).
    #[test]
    fn random_schemas_are_followed_exactly(schema in json_schema(), seed in any::<u64>()) {
        let g = Grammar::from_schema(&schema).expect("every generated schema can be followed");
        let (text, complete) = walk(&g, seed, 200)?;
        if complete {
            let value: Value = serde_json::from_slice(&text).expect("a whole value parses");
            prop_assert!(matches(&schema, &schema, &value), "{} does not match {}", value, schema);
        }
    }

    /// A schema repeated in an anyOf is the same grammar: identical alternatives are one.
    #[test]
    fn a_repeated_alternative_costs_nothing(schema in json_schema(), copies in 2usize..50) {
        let defs = schema["$defs"].clone();
        let repeated = json!({"$defs": defs, "anyOf": vec![schema.clone(); copies]});
        let once = json!({"$defs": schema["$defs"].clone(), "anyOf": [schema]});
        prop_assert_eq!(grammar(repeated), grammar(once));
    }
}
