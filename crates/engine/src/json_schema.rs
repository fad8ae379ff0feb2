//! What shape an answer must have ([`ResponseFormat`]: free text, any JSON object, or a JSON
//! Schema), and the schema compiled into a [`Grammar`]: a small graph of value kinds that
//! `json_automaton` walks byte by byte.
//!
//! Only the part of JSON Schema that constrains a value's shape is supported: `type` (one or a
//! list), `properties`, `required`, `additionalProperties` (false, true or a schema), `items`,
//! `minItems`/`maxItems`, `minLength`/`maxLength`, `enum`, `const`, `anyOf`, and `$ref` to a
//! place in the same schema (`#/$defs/Name`, as Pydantic writes nested models; a schema may
//! refer to itself). Annotations (`title`, `description`, `default`, `examples`, `$schema`,
//! `$id`, `$comment`) and the `$defs`/`definitions` that `$ref` points into are not constraints
//! themselves; any other keyword is refused by name, so a schema is never silently followed
//! only in part.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Error;

/// The shape an answer must have. By default, free text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "schema", rename_all = "snake_case")]
pub enum ResponseFormat {
    /// Any text.
    #[default]
    Text,
    /// One JSON object, any keys and values (OpenAI's `json_object`, Ollama's `"json"`).
    JsonObject,
    /// One JSON value matching this JSON Schema (OpenAI's `json_schema`, Ollama's schema).
    JsonSchema(Value),
}

impl ResponseFormat {
    /// Whether answers are free text (no constraint).
    pub fn is_text(&self) -> bool {
        *self == ResponseFormat::Text
    }

    /// Checks that the format can be followed (the schema uses only supported keywords and
    /// can be satisfied), so a bad schema fails before any work.
    pub fn validate(&self) -> Result<(), Error> {
        self.grammar().map(|_| ())
    }

    /// The grammar answers must follow; None for free text.
    pub(crate) fn grammar(&self) -> Result<Option<Grammar>, Error> {
        match self {
            ResponseFormat::Text => Ok(None),
            ResponseFormat::JsonObject => Grammar::any_object().map(Some),
            ResponseFormat::JsonSchema(schema) => Grammar::from_schema(schema).map(Some),
        }
    }
}

/// Index of a node in [`Grammar::nodes`].
pub(crate) type NodeId = u32;

/// Most properties one object schema may list (the automaton keeps which it has seen in a
/// 64-bit set).
pub(crate) const MAX_PROPERTIES: usize = 64;

/// One kind of value the grammar allows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    /// Exactly one of these texts, sorted and without repeats: `null`, `true`/`false`, and each
    /// value of an `enum` or `const` as compact JSON.
    Literals(Vec<Vec<u8>>),
    /// A number; with `integer`, one without fraction or exponent.
    Number { integer: bool },
    /// A string of `min..=max` characters.
    String { min: u32, max: Option<u32> },
    /// An array of `min..=max` items, each matching `items`.
    Array {
        items: NodeId,
        min: u32,
        max: Option<u32>,
    },
    /// An object: its listed properties, sorted by key, and what other keys may hold (None:
    /// no other keys).
    Object {
        properties: Vec<Property>,
        /// Bit i set: `properties[i]` must be present.
        required: u64,
        additional: Option<NodeId>,
    },
    /// Any one of these.
    AnyOf(Vec<NodeId>),
}

/// One listed property of an object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Property {
    /// The key as it is written between the quotes (JSON-escaped).
    pub(crate) key: Vec<u8>,
    pub(crate) value: NodeId,
}

/// A schema compiled into nodes; `root` is the answer's value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Grammar {
    pub(crate) nodes: Vec<Node>,
    pub(crate) root: NodeId,
}

/// Keywords that never constrain a value where they stand: descriptions, and the schemas
/// kept for `$ref`.
const ANNOTATIONS: [&str; 9] = [
    "title",
    "description",
    "default",
    "examples",
    "$schema",
    "$id",
    "$comment",
    "$defs",
    "definitions",
];

/// Keywords compiled here.
const SUPPORTED: [&str; 13] = [
    "$ref",
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "enum",
    "const",
    "anyOf",
];

fn refuse(reason: impl Into<String>) -> Error {
    Error::ResponseFormat {
        reason: reason.into(),
    }
}

impl Grammar {
    /// Any JSON object.
    pub(crate) fn any_object() -> Result<Self, Error> {
        let mut compiler = Compiler::new(&Value::Null);
        let any = compiler.any();
        let root = compiler.push(Node::Object {
            properties: Vec::new(),
            required: 0,
            additional: Some(any),
        });
        Ok(Grammar {
            nodes: compiler.nodes,
            root,
        })
    }

    /// The grammar of `schema`, or an error naming the keyword or value it cannot follow.
    pub(crate) fn from_schema(schema: &Value) -> Result<Self, Error> {
        let mut compiler = Compiler::new(schema);
        let root = compiler.schema(schema, "the schema")?;
        let grammar = Grammar {
            nodes: compiler.nodes,
            root,
        };
        if !grammar.every_value_can_end() {
            return Err(refuse(
                "the schema refers to itself so that a value can never end (a required \
                 property, an item of an array that needs items, leads back to it); make that \
                 reference optional or allow it to be null",
            ));
        }
        Ok(grammar)
    }

    /// Whether every node has a finite value, so every value begun can be finished (the
    /// automaton relies on it). Only a schema that refers to itself can fail this: found as
    /// a fixpoint, from "no node can end" up.
    fn every_value_can_end(&self) -> bool {
        let mut ends = vec![false; self.nodes.len()];
        loop {
            let mut changed = false;
            for (i, node) in self.nodes.iter().enumerate() {
                let can = |id: &NodeId| ends[*id as usize];
                let now = match node {
                    Node::Literals(_) | Node::Number { .. } | Node::String { .. } => true,
                    Node::Array { items, min, .. } => *min == 0 || can(items),
                    Node::Object {
                        properties,
                        required,
                        ..
                    } => properties
                        .iter()
                        .enumerate()
                        .all(|(p, property)| required & (1 << p) == 0 || can(&property.value)),
                    Node::AnyOf(alternatives) => alternatives.iter().any(can),
                };
                if now && !ends[i] {
                    ends[i] = true;
                    changed = true;
                }
            }
            if !changed {
                return ends.iter().all(|&e| e);
            }
        }
    }

    pub(crate) fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }
}

struct Compiler<'s> {
    nodes: Vec<Node>,
    /// The node for any JSON value, once made.
    any: Option<NodeId>,
    /// The whole schema, which `$ref`s point into.
    root: &'s Value,
    /// The node of each `$ref` target compiled so far, by JSON pointer.
    refs: HashMap<String, NodeId>,
}

impl<'s> Compiler<'s> {
    fn new(root: &'s Value) -> Self {
        Compiler {
            nodes: Vec::new(),
            any: None,
            root,
            refs: HashMap::new(),
        }
    }

    fn push(&mut self, node: Node) -> NodeId {
        self.nodes.push(node);
        (self.nodes.len() - 1) as NodeId
    }

    /// Any JSON value: one node, whose arrays and objects hold any value again.
    fn any(&mut self) -> NodeId {
        if let Some(any) = self.any {
            return any;
        }
        let any = self.push(Node::AnyOf(Vec::new()));
        self.any = Some(any);
        let kinds = vec![
            self.push(literals(["null"])),
            self.push(literals(["true", "false"])),
            self.push(Node::Number { integer: false }),
            self.push(Node::String { min: 0, max: None }),
            self.push(Node::Array {
                items: any,
                min: 0,
                max: None,
            }),
            self.push(Node::Object {
                properties: Vec::new(),
                required: 0,
                additional: Some(any),
            }),
        ];
        self.nodes[any as usize] = Node::AnyOf(kinds);
        any
    }

    /// Compiles the schema found at `place` (a path in words, for errors).
    fn schema(&mut self, schema: &'s Value, place: &str) -> Result<NodeId, Error> {
        let map = match schema {
            Value::Bool(true) => return Ok(self.any()),
            Value::Bool(false) => {
                return Err(refuse(format!("{place} is `false`: no value can match it")))
            }
            Value::Object(map) => map,
            other => {
                return Err(refuse(format!(
                    "{place} must be an object or a boolean, not {other}"
                )))
            }
        };
        if let Some(keyword) = map
            .keys()
            .find(|k| !SUPPORTED.contains(&k.as_str()) && !ANNOTATIONS.contains(&k.as_str()))
        {
            return Err(refuse(format!(
                "{place} uses the keyword {keyword:?}, which Hearth cannot enforce; supported \
                 keywords: {}",
                SUPPORTED.join(", ")
            )));
        }
        if let Some(reference) = map.get("$ref") {
            if let Some(other) = map
                .keys()
                .find(|k| *k != "$ref" && !ANNOTATIONS.contains(&k.as_str()))
            {
                return Err(refuse(format!(
                    "{place} has {other:?} beside \"$ref\"; move it into the schema the \
                     reference points at"
                )));
            }
            return self.reference(reference, place);
        }
        // `const` and `enum` fix the value, whatever else the schema says.
        if let Some(value) = map.get("const") {
            return Ok(self.push(literals_of(std::slice::from_ref(value))));
        }
        if let Some(values) = map.get("enum") {
            return match values {
                Value::Array(values) if !values.is_empty() => Ok(self.push(literals_of(values))),
                _ => Err(refuse(format!(
                    "{place}: \"enum\" must be a non-empty list of values"
                ))),
            };
        }
        if let Some(alternatives) = map.get("anyOf") {
            let Value::Array(alternatives) = alternatives else {
                return Err(refuse(format!(
                    "{place}: \"anyOf\" must be a list of schemas"
                )));
            };
            if alternatives.is_empty() {
                return Err(refuse(format!("{place}: \"anyOf\" is empty")));
            }
            if map.contains_key("type") {
                return Err(refuse(format!(
                    "{place} has both \"anyOf\" and \"type\"; put the type in each alternative"
                )));
            }
            let ids = alternatives
                .iter()
                .enumerate()
                .map(|(i, s)| self.schema(s, &format!("{place}, anyOf[{i}]")))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(self.push(Node::AnyOf(ids)));
        }
        let types: Vec<&str> = match map.get("type") {
            None => return self.untyped(map, place),
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(list)) if !list.is_empty() => list
                .iter()
                .map(|t| {
                    t.as_str().ok_or_else(|| {
                        refuse(format!("{place}: \"type\" lists {t}, which is not a name"))
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(refuse(format!(
                    "{place}: \"type\" must be a type name or a list of them, not {other}"
                )))
            }
        };
        let mut ids = Vec::with_capacity(types.len());
        for name in types {
            ids.push(self.typed(name, map, place)?);
        }
        Ok(match ids.len() {
            1 => ids[0],
            _ => self.push(Node::AnyOf(ids)),
        })
    }

    /// The node of the schema `reference` points at, compiled once: its node is reserved
    /// before it is compiled, so a schema that refers to itself (a tree) becomes a loop.
    fn reference(&mut self, reference: &Value, place: &str) -> Result<NodeId, Error> {
        let Some(pointer) = reference.as_str().and_then(|r| r.strip_prefix('#')) else {
            return Err(refuse(format!(
                "{place}: \"$ref\" {reference} does not point inside this schema (as \
                 \"#/$defs/Name\" does); Hearth reads no other schema documents"
            )));
        };
        if let Some(&id) = self.refs.get(pointer) {
            return Ok(id);
        }
        let target = self.root.pointer(pointer).ok_or_else(|| {
            refuse(format!(
                "{place}: \"$ref\" {reference} points at nothing in the schema"
            ))
        })?;
        let id = self.push(Node::AnyOf(Vec::new()));
        self.refs.insert(pointer.to_owned(), id);
        let target = self.schema(target, &format!("{place}, {reference}"))?;
        self.nodes[id as usize] = Node::AnyOf(vec![target]);
        Ok(id)
    }

    /// A schema without `type`: what its keywords imply (an object with `properties`, an array
    /// with `items`), else any value.
    fn untyped(&mut self, map: &'s Map<String, Value>, place: &str) -> Result<NodeId, Error> {
        if ["properties", "required", "additionalProperties"]
            .iter()
            .any(|k| map.contains_key(*k))
        {
            self.typed("object", map, place)
        } else if ["items", "minItems", "maxItems"]
            .iter()
            .any(|k| map.contains_key(*k))
        {
            self.typed("array", map, place)
        } else if ["minLength", "maxLength"]
            .iter()
            .any(|k| map.contains_key(*k))
        {
            self.typed("string", map, place)
        } else {
            Ok(self.any())
        }
    }

    fn typed(
        &mut self,
        name: &str,
        map: &'s Map<String, Value>,
        place: &str,
    ) -> Result<NodeId, Error> {
        let node = match name {
            "null" => literals(["null"]),
            "boolean" => literals(["true", "false"]),
            "integer" => Node::Number { integer: true },
            "number" => Node::Number { integer: false },
            "string" => {
                let (min, max) = bounds(map, "minLength", "maxLength", place)?;
                Node::String { min, max }
            }
            "array" => {
                let (min, max) = bounds(map, "minItems", "maxItems", place)?;
                let items = match map.get("items") {
                    None => self.any(),
                    Some(items) => self.schema(items, &format!("{place}, items"))?,
                };
                Node::Array { items, min, max }
            }
            "object" => self.object(map, place)?,
            other => {
                return Err(refuse(format!(
                    "{place}: unknown type {other:?}; use object, array, string, number, \
                     integer, boolean or null"
                )))
            }
        };
        Ok(self.push(node))
    }

    fn object(&mut self, map: &'s Map<String, Value>, place: &str) -> Result<Node, Error> {
        let listed = match map.get("properties") {
            None => None,
            Some(Value::Object(listed)) => Some(listed),
            Some(other) => {
                return Err(refuse(format!(
                    "{place}: \"properties\" must be an object, not {other}"
                )))
            }
        };
        let required: Vec<&str> = match map.get("required") {
            None => Vec::new(),
            Some(Value::Array(names)) => names
                .iter()
                .map(|n| {
                    n.as_str().ok_or_else(|| {
                        refuse(format!(
                            "{place}: \"required\" lists {n}, which is not a name"
                        ))
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(refuse(format!(
                    "{place}: \"required\" must be a list of names, not {other}"
                )))
            }
        };
        let additional = match map.get("additionalProperties") {
            None | Some(Value::Bool(true)) => Some(self.any()),
            Some(Value::Bool(false)) => None,
            Some(schema) => Some(self.schema(schema, &format!("{place}, additionalProperties"))?),
        };
        let mut properties = Vec::with_capacity(listed.map_or(0, Map::len));
        for (name, schema) in listed.into_iter().flatten() {
            let value = self.schema(schema, &format!("{place}, property {name:?}"))?;
            properties.push(Property {
                key: escaped(name),
                value,
            });
        }
        // A required key that is not listed is an additional property that must be there.
        for name in &required {
            if !listed.is_some_and(|l| l.contains_key(*name)) {
                let Some(value) = additional else {
                    return Err(refuse(format!(
                        "{place} requires {name:?}, but it is not in \"properties\" and \
                         \"additionalProperties\" is false, so no object can match"
                    )));
                };
                properties.push(Property {
                    key: escaped(name),
                    value,
                });
            }
        }
        if properties.len() > MAX_PROPERTIES {
            return Err(refuse(format!(
                "{place} lists {} properties; Hearth can enforce at most {MAX_PROPERTIES} per \
                 object",
                properties.len()
            )));
        }
        properties.sort_by(|a, b| a.key.cmp(&b.key));
        properties.dedup_by(|a, b| a.key == b.key);
        let required = properties
            .iter()
            .enumerate()
            .filter(|(_, p)| required.iter().any(|name| escaped(name) == p.key))
            .fold(0u64, |set, (i, _)| set | 1 << i);
        Ok(Node::Object {
            properties,
            required,
            additional,
        })
    }
}

/// `min..=max` read from two count keywords (`minItems`/`maxItems`, `minLength`/`maxLength`).
fn bounds(
    map: &Map<String, Value>,
    min_key: &str,
    max_key: &str,
    place: &str,
) -> Result<(u32, Option<u32>), Error> {
    let count = |key: &str| -> Result<Option<u32>, Error> {
        match map.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| {
                    refuse(format!(
                        "{place}: {key:?} must be a whole number of at least 0, not {v}"
                    ))
                }),
        }
    };
    let (min, max) = (count(min_key)?.unwrap_or(0), count(max_key)?);
    if max.is_some_and(|max| max < min) {
        return Err(refuse(format!(
            "{place}: {min_key:?} ({min}) is more than {max_key:?} ({}), so no value can match",
            max.unwrap_or(0)
        )));
    }
    Ok((min, max))
}

fn literals<'a>(texts: impl IntoIterator<Item = &'a str>) -> Node {
    let mut texts: Vec<Vec<u8>> = texts.into_iter().map(|t| t.as_bytes().to_vec()).collect();
    texts.sort();
    texts.dedup();
    Node::Literals(texts)
}

/// `enum`/`const` values as compact JSON (the one spelling answers must use).
fn literals_of(values: &[Value]) -> Node {
    let texts: Vec<String> = values.iter().map(Value::to_string).collect();
    literals(texts.iter().map(String::as_str))
}

/// `name` as it is written between the quotes of a JSON key.
fn escaped(name: &str) -> Vec<u8> {
    let quoted = Value::from(name).to_string();
    quoted.as_bytes()[1..quoted.len() - 1].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error(schema: Value) -> String {
        Grammar::from_schema(&schema).unwrap_err().to_string()
    }

    #[test]
    fn an_unsupported_keyword_is_named() {
        let e = error(json!({"type": "string", "pattern": "^a+$"}));
        assert!(e.contains("\"pattern\""), "{e}");
        let e = error(
            json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}}),
        );
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
}
