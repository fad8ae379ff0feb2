use super::*;
use serde_json::json;

fn error(schema: Value) -> String {
    Grammar::from_schema(&schema).unwrap_err().to_string()
}

#[test]
fn an_unsupported_keyword_is_named() {
    let e = error(json!({"type": "string", "pattern": "^a+$"}));
    assert!(e.contains("\"pattern\""), "{e}");
    let e =
        error(json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}}));
    assert!(
        e.contains("\"minimum\"") && e.contains("property \"n\""),
        "{e}"
    );
    let e = error(json!({"not": {"type": "string"}}));
    assert!(e.contains("\"not\""), "{e}");
}

#[test]
fn references_outside_the_schema_or_beside_keywords_are_refused() {
    let e = error(json!({"$ref": "https://example.com/pet.json"}));
    assert!(e.contains("does not point inside"), "{e}");
    let e = error(json!({"$ref": "#/$defs/Missing"}));
    assert!(e.contains("points at nothing"), "{e}");
    let e = error(json!({"$defs": {"A": {}}, "$ref": "#/$defs/A", "type": "object"}));
    assert!(e.contains("beside \"$ref\""), "{e}");
    let e = error(json!({"$defs": {"A": {"pattern": "x"}}, "$ref": "#/$defs/A"}));
    assert!(e.contains("\"pattern\"") && e.contains("#/$defs/A"), "{e}");
}

#[test]
fn a_schema_whose_values_never_end_is_refused() {
    let e = error(json!({
        "$defs": {"A": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"]}},
        "type": "object",
        "properties": {"optional": {"$ref": "#/$defs/A"}}
    }));
    assert!(e.contains("never end"), "{e}");
    let e = error(json!({"type": "array", "items": {"$ref": "#"}, "minItems": 1}));
    assert!(e.contains("never end"), "{e}");
    // A tree whose children are optional ends.
    assert!(Grammar::from_schema(&json!({"type": "array", "items": {"$ref": "#"}})).is_ok());
}

#[test]
fn annotations_are_ignored() {
    let schema = json!({"type": "string", "title": "Name", "description": "a name"});
    assert_eq!(
        Grammar::from_schema(&schema).unwrap(),
        Grammar::from_schema(&json!({"type": "string"})).unwrap()
    );
}

#[test]
fn unsatisfiable_schemas_are_refused() {
    assert!(error(json!({"enum": []})).contains("enum"));
    assert!(error(json!({"anyOf": []})).contains("anyOf"));
    assert!(error(json!({"type": "array", "minItems": 3, "maxItems": 2})).contains("minItems"));
    let e = error(json!({"type": "object", "required": ["a"], "additionalProperties": false}));
    assert!(e.contains("\"a\""), "{e}");
    assert!(error(json!(false)).contains("false"));
    assert!(error(json!({"type": "text"})).contains("unknown type"));
}

#[test]
fn too_many_properties_are_refused() {
    let properties: Map<String, Value> = (0..=MAX_PROPERTIES)
        .map(|i| (format!("p{i}"), json!({})))
        .collect();
    let e = error(json!({"type": "object", "properties": properties}));
    assert!(e.contains("at most 64"), "{e}");
}

#[test]
fn required_keys_become_a_set_over_the_sorted_properties() {
    let g = Grammar::from_schema(&json!({
        "type": "object",
        "properties": {"b": {"type": "string"}, "a": {"type": "integer"}},
        "required": ["b"],
        "additionalProperties": false
    }))
    .unwrap();
    let Node::Object {
        properties,
        required,
        additional,
    } = g.node(g.root)
    else {
        panic!("an object")
    };
    let keys: Vec<&[u8]> = properties.iter().map(|p| &p.key[..]).collect();
    assert_eq!(keys, [b"a", b"b"]);
    assert_eq!(*required, 0b10);
    assert_eq!(*additional, None);
}

#[test]
fn the_format_round_trips_through_json() {
    for format in [
        ResponseFormat::Text,
        ResponseFormat::JsonObject,
        ResponseFormat::JsonSchema(json!({"type": "integer"})),
    ] {
        let text = serde_json::to_string(&format).unwrap();
        assert_eq!(
            serde_json::from_str::<ResponseFormat>(&text).unwrap(),
            format
        );
    }
    assert!(ResponseFormat::default().is_text());
}

/// Runs `f` on a thread with a small stack (a quarter of the 2 MiB a blocking thread of the
/// server has), so a compile whose recursion were not bounded would overflow it.
fn on_a_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(f)
        .unwrap()
        .join()
        .expect("no stack overflow")
}

/// `{"$ref": "#/$defs/a0"}` with `a0` to `a{links - 1}` each pointing at the next, the last
/// at null.
fn ref_chain(links: usize) -> Value {
    let mut defs: Map<String, Value> = (0..links)
        .map(|i| {
            (
                format!("a{i}"),
                json!({"$ref": format!("#/$defs/a{}", i + 1)}),
            )
        })
        .collect();
    defs.insert(format!("a{links}"), json!({"type": "null"}));
    json!({"$ref": "#/$defs/a0", "$defs": defs})
}

#[test]
fn p12_ref_chain_is_refused_not_a_stack_overflow() {
    let e = on_a_small_stack(|| error(ref_chain(100_000)));
    assert!(
        e.contains(&format!("more than {MAX_REF_DEPTH} \"$ref\"s")) && e.contains("#/$defs/a"),
        "{e}"
    );
    assert!(e.len() < 1_000, "the place is shortened: {e}");
    // A chain as long as allowed (the root's reference and 63 links) is followed to its
    // end: one node that is null.
    let g = on_a_small_stack(|| Grammar::from_schema(&ref_chain(MAX_REF_DEPTH - 1)).unwrap());
    assert!(
        matches!(g.node(g.root), Node::AnyOf(leaves) if leaves.len() == 1
            && *g.node(leaves[0]) == literals(["null"])),
        "{:?}",
        g.nodes
    );
    assert!(error(ref_chain(MAX_REF_DEPTH)).contains("chain"));
}

#[test]
fn p12_the_deepest_schema_allowed_compiles_on_a_small_stack() {
    // Items nested to the limit, through a chain of references as long as allowed.
    let mut schema = ref_chain(MAX_REF_DEPTH - 1);
    let mut deep = json!({"type": "null"});
    for _ in 0..MAX_NESTING - MAX_REF_DEPTH {
        deep = json!({"type": "array", "items": deep});
    }
    schema["$defs"][format!("a{}", MAX_REF_DEPTH - 1)] = deep;
    assert!(on_a_small_stack(move || Grammar::from_schema(&schema)).is_ok());
}

#[test]
fn p12_nesting_past_the_limit_is_refused() {
    let mut deep = json!({"type": "null"});
    for _ in 0..MAX_NESTING + 1 {
        deep = json!({"type": "array", "items": deep});
    }
    let e = on_a_small_stack(move || error(deep));
    assert!(
        e.contains(&format!("nested more than {MAX_NESTING}")),
        "{e}"
    );
}

#[test]
fn p12_too_many_ref_targets_are_refused() {
    let defs: Map<String, Value> = (0..=MAX_REFS)
        .map(|i| (format!("d{i}"), json!({"const": i})))
        .collect();
    let refs: Vec<Value> = (0..=MAX_REFS)
        .map(|i| json!({"$ref": format!("#/$defs/d{i}")}))
        .collect();
    // Sixteen references a property, so no anyOf or object is too wide.
    let properties: Map<String, Value> = refs
        .chunks(16)
        .enumerate()
        .map(|(i, chunk)| (format!("p{i}"), json!({"anyOf": chunk})))
        .collect();
    assert!(properties.len() <= MAX_PROPERTIES);
    let e = error(json!({"$defs": defs, "properties": properties}));
    assert!(e.contains(&format!("at most {MAX_REFS} different")), "{e}");
}

#[test]
fn p12_a_grammar_past_its_size_is_refused() {
    // Three objects of 64 properties, each any of 64 different strings: about 12,500 nodes.
    let object = |offset: usize| {
        let properties: Map<String, Value> = (0..MAX_PROPERTIES)
            .map(|p| {
                let strings: Vec<Value> = (0..MAX_ALTERNATIVES)
                    .map(|j| json!({"type": "string", "maxLength": offset + p * 64 + j}))
                    .collect();
                (format!("p{p}"), json!({"anyOf": strings}))
            })
            .collect();
        json!({"type": "object", "properties": properties})
    };
    let e = error(json!({"type": "object", "properties": {
        "a": object(0), "b": object(10_000), "c": object(20_000)
    }}));
    assert!(
        e.contains(&format!("more than {MAX_NODES} grammar nodes")),
        "{e}"
    );
    assert!(
        Grammar::from_schema(&object(0)).is_ok(),
        "one of them is fine"
    );
}

#[test]
fn p13_identical_alternatives_are_one_node() {
    let array = json!({"type": "array", "items": {"$ref": "#/$defs/s"}});
    let schema = json!({"$defs": {"s": {"anyOf": vec![array; 1_000]}}, "$ref": "#/$defs/s"});
    let g = Grammar::from_schema(&schema).unwrap();
    assert!(g.nodes.len() <= 3, "{:?}", g.nodes);
    // Identical sub-schemas anywhere share a node.
    let g = Grammar::from_schema(&json!({"properties": {
        "a": {"type": "string", "maxLength": 3}, "b": {"type": "string", "maxLength": 3, "title": "B"}
    }}))
    .unwrap();
    let Node::Object { properties, .. } = g.node(g.root) else {
        panic!("an object")
    };
    assert_eq!(properties[0].value, properties[1].value);
}

#[test]
fn p13_an_any_of_past_its_alternatives_is_refused() {
    let strings = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| json!({"type": "string", "maxLength": i}))
            .collect()
    };
    assert!(Grammar::from_schema(&json!({"anyOf": strings(MAX_ALTERNATIVES)})).is_ok());
    let e = error(json!({"properties": {"x": {"anyOf": strings(MAX_ALTERNATIVES + 1)}}}));
    assert!(
        e.contains(&format!(
            "more than {MAX_ALTERNATIVES} different alternatives"
        )) && e.contains("property \"x\""),
        "{e}"
    );
    // Alternatives gathered through nested anyOfs and references count too.
    let all = strings(MAX_ALTERNATIVES + 1);
    let (low, high) = all.split_at(40);
    let e = error(json!({
        "$defs": {"high": {"anyOf": high}},
        "anyOf": [{"anyOf": low}, {"$ref": "#/$defs/high"}]
    }));
    assert!(e.contains("different alternatives"), "{e}");
}

#[test]
fn any_of_lists_hold_no_any_of_even_through_references_to_themselves() {
    let schemas = [
        json!({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}}, "$ref": "#/$defs/a"}),
        json!({"$defs": {
            "a": {"anyOf": [{"$ref": "#/$defs/b"}, {"type": "integer"}]},
            "b": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "string"}, {"type": "array", "items": {"$ref": "#/$defs/b"}}]}
        }, "$ref": "#/$defs/a"}),
        json!({"anyOf": [{"anyOf": [{"type": "null"}, {}]}, {"type": ["string", "integer"]}]}),
    ];
    for schema in schemas {
        let g = Grammar::from_schema(&schema).unwrap();
        for node in &g.nodes {
            if let Node::AnyOf(list) = node {
                assert!(
                    list.iter().all(|&id| !matches!(g.node(id), Node::AnyOf(_))),
                    "{schema}: {:?}",
                    g.nodes
                );
            }
        }
    }
    // A loop of references with no value at all is refused.
    let e = error(
        json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
    );
    assert!(e.contains("never end"), "{e}");
}
