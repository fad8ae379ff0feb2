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
//!
//! A schema is data from a client, so compiling it is bounded before any work it could make
//! unbounded, each limit refused by name: how deeply schemas nest ([`MAX_NESTING`], `$ref`s
//! followed included, so the compiler's recursion has a fixed bound), how long a chain of
//! `$ref`s may be ([`MAX_REF_DEPTH`]), how many places they may point at ([`MAX_REFS`]), how
//! many nodes the grammar has ([`MAX_NODES`]) and how many alternatives an `anyOf` has
//! ([`MAX_ALTERNATIVES`]). Identical sub-schemas become one node, so an `anyOf` that repeats
//! one alternative costs one, and no `AnyOf` node lists another, so starting a value never
//! recurses. The automaton bounds the rest at run time (`json_automaton`).

use std::collections::{HashMap, HashSet};

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

/// Most schemas compiled one inside another (a property's schema, an item's, an alternative,
/// the target of a `$ref`), so compiling uses a bounded stack whatever the schema: deep enough
/// for models nested some forty deep as Pydantic writes them.
pub(crate) const MAX_NESTING: usize = 128;

/// Most `$ref`s followed one inside another: a chain of references to references is refused
/// at the first link past this, before it is compiled.
pub(crate) const MAX_REF_DEPTH: usize = 64;

/// Most different places `$ref`s may point at in one schema.
pub(crate) const MAX_REFS: usize = 1_000;

/// Most nodes a grammar may have (identical ones counted once), which bounds the memory of a
/// grammar and the work of checking it.
pub(crate) const MAX_NODES: usize = 10_000;

/// Most different alternatives one `anyOf` may have, once the alternatives of the `anyOf`s
/// and `$ref`s inside it are counted as its own and identical ones once: each is a way the
/// automaton may have to follow at once.
pub(crate) const MAX_ALTERNATIVES: usize = 64;

/// One kind of value the grammar allows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
    /// Any one of these: sorted, without repeats, and (once the grammar is made) none of
    /// them an `AnyOf` itself, so a value starts in one step.
    AnyOf(Vec<NodeId>),
}

/// One listed property of an object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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

    /// The grammar of `schema`, or an error naming the keyword, value or limit it cannot
    /// follow.
    pub(crate) fn from_schema(schema: &Value) -> Result<Self, Error> {
        let mut compiler = Compiler::new(schema);
        let root = compiler.schema(schema)?;
        let mut grammar = Grammar {
            nodes: compiler.nodes,
            root,
        };
        grammar.flatten_any_of()?;
        if !grammar.every_value_can_end() {
            return Err(refuse(
                "the schema refers to itself so that a value can never end (a required \
                 property, an item of an array that needs items, leads back to it); make that \
                 reference optional or allow it to be null",
            ));
        }
        Ok(grammar)
    }

    /// Makes every `AnyOf` list only nodes of other kinds, so that starting a value never
    /// goes through one `AnyOf` to the next (nor round a loop of them, as a `$ref` to an
    /// `anyOf` holding that `$ref` would). The compiler already flattens every `anyOf` whose
    /// parts were finished when it was made; what is left are the references to a `$ref`
    /// still being compiled, which lead only to the few `$ref`s being compiled with it.
    fn flatten_any_of(&mut self) -> Result<(), Error> {
        let is_any_of = |node: &Node| matches!(node, Node::AnyOf(_));
        for i in 0..self.nodes.len() {
            let Node::AnyOf(list) = &self.nodes[i] else {
                continue;
            };
            if !list.iter().any(|&id| is_any_of(self.node(id))) {
                continue;
            }
            let mut seen: HashSet<NodeId> = HashSet::from([i as NodeId]);
            let mut todo = list.clone();
            let mut leaves = Vec::new();
            while let Some(id) = todo.pop() {
                match self.node(id) {
                    Node::AnyOf(more) => {
                        todo.extend(more.iter().filter(|&&m| seen.insert(m)));
                    }
                    _ => leaves.push(id),
                }
                if leaves.len() > MAX_ALTERNATIVES {
                    return Err(too_many_alternatives("an \"anyOf\" that refers to itself"));
                }
            }
            leaves.sort_unstable();
            leaves.dedup();
            self.nodes[i] = Node::AnyOf(leaves);
        }
        Ok(())
    }

    /// Whether every node has a finite value, so every value begun can be finished (the
    /// automaton relies on it). Only a schema that refers to itself can fail this. Found from
    /// the nodes that end by themselves (literals, numbers, strings) up through the nodes
    /// that wait on them, each edge followed once.
    fn every_value_can_end(&self) -> bool {
        // needs[i]: how many more children node i waits for (usize::MAX: it cannot end
        // through its children, as an `AnyOf` with none). waiting[c]: the nodes waiting on c,
        // once per edge.
        let mut needs = vec![0usize; self.nodes.len()];
        let mut waiting: Vec<Vec<NodeId>> = vec![Vec::new(); self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            let mut wait = |child: NodeId| waiting[child as usize].push(i as NodeId);
            needs[i] = match node {
                Node::Literals(_) | Node::Number { .. } | Node::String { .. } => 0,
                Node::Array { min: 0, .. } => 0,
                Node::Array { items, .. } => {
                    wait(*items);
                    1
                }
                Node::Object {
                    properties,
                    required,
                    ..
                } => {
                    let mut count = 0;
                    for (p, property) in properties.iter().enumerate() {
                        if required & (1 << p) != 0 {
                            wait(property.value);
                            count += 1;
                        }
                    }
                    count
                }
                Node::AnyOf(alternatives) => {
                    alternatives.iter().for_each(|&a| wait(a));
                    // Any one alternative is enough.
                    if alternatives.is_empty() {
                        usize::MAX
                    } else {
                        1
                    }
                }
            };
        }
        let mut ended: Vec<NodeId> = (0..self.nodes.len() as NodeId)
            .filter(|&i| needs[i as usize] == 0)
            .collect();
        let mut ends = vec![false; self.nodes.len()];
        for &i in &ended {
            ends[i as usize] = true;
        }
        while let Some(child) = ended.pop() {
            for &parent in &waiting[child as usize] {
                let need = &mut needs[parent as usize];
                if *need == 0 || *need == usize::MAX {
                    continue;
                }
                *need -= 1;
                if *need == 0 {
                    ends[parent as usize] = true;
                    ended.push(parent);
                }
            }
        }
        ends.iter().all(|&e| e)
    }

    pub(crate) fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }
}

fn too_many_alternatives(place: &str) -> Error {
    refuse(format!(
        "{place} has more than {MAX_ALTERNATIVES} different alternatives (counting those of \
         the \"anyOf\"s and \"$ref\"s inside it, identical ones once); Hearth follows at \
         most {MAX_ALTERNATIVES}; merge alternatives, or list fixed values with \"enum\""
    ))
}

/// One step from a schema to a schema inside it, for naming where a problem is.
#[derive(Debug, Clone, Copy)]
enum Step<'s> {
    AnyOf(usize),
    Items,
    AdditionalProperties,
    Property(&'s str),
    /// Followed a `$ref` (its value as written).
    Ref(&'s Value),
}

struct Compiler<'s> {
    nodes: Vec<Node>,
    /// The id of every finished node, so an identical node is made once and shared (the
    /// alternatives of an `anyOf` that repeat one schema become one).
    ids: HashMap<Node, NodeId>,
    /// The node for any JSON value, once made.
    any: Option<NodeId>,
    /// The whole schema, which `$ref`s point into.
    root: &'s Value,
    /// The node of each `$ref` target compiled so far, by JSON pointer.
    refs: HashMap<&'s str, NodeId>,
    /// The way from the root to the schema being compiled (its length is how deeply it
    /// nests), made into words only when an error names the place.
    path: Vec<Step<'s>>,
    /// How many of `path` are `$ref`s.
    refs_followed: usize,
}

impl<'s> Compiler<'s> {
    fn new(root: &'s Value) -> Self {
        Compiler {
            nodes: Vec::new(),
            ids: HashMap::new(),
            any: None,
            root,
            refs: HashMap::new(),
            path: Vec::new(),
            refs_followed: 0,
        }
    }

    /// Where the schema being compiled is, in words ("the schema, property \"a\", items"); a
    /// long way is shortened in the middle.
    fn place(&self) -> String {
        const ENDS: usize = 5;
        let mut place = String::from("the schema");
        for (i, step) in self.path.iter().enumerate() {
            let skipped = self.path.len().saturating_sub(2 * ENDS);
            if skipped > 0 && (ENDS..ENDS + skipped).contains(&i) {
                if i == ENDS {
                    place.push_str(&format!(", … {skipped} more …"));
                }
                continue;
            }
            match step {
                Step::AnyOf(i) => place.push_str(&format!(", anyOf[{i}]")),
                Step::Items => place.push_str(", items"),
                Step::AdditionalProperties => place.push_str(", additionalProperties"),
                Step::Property(name) => place.push_str(&format!(", property {name:?}")),
                Step::Ref(reference) => place.push_str(&format!(", {reference}")),
            }
        }
        place
    }

    /// The id of `node`: the existing one when an identical node was made before.
    fn push(&mut self, node: Node) -> NodeId {
        if let Some(&id) = self.ids.get(&node) {
            return id;
        }
        let id = self.reserve();
        self.nodes[id as usize] = node.clone();
        self.ids.insert(node, id);
        id
    }

    /// A new node to be filled in later (an empty `AnyOf` until then), for a node that may
    /// contain itself: a `$ref` target, or any value.
    fn reserve(&mut self) -> NodeId {
        self.nodes.push(Node::AnyOf(Vec::new()));
        (self.nodes.len() - 1) as NodeId
    }

    /// Any JSON value: one node, whose arrays and objects hold any value again.
    fn any(&mut self) -> NodeId {
        if let Some(any) = self.any {
            return any;
        }
        let any = self.reserve();
        self.any = Some(any);
        let mut kinds = vec![
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
        kinds.sort_unstable();
        self.nodes[any as usize] = Node::AnyOf(kinds);
        any
    }

    /// One node for "any of `ids`": the alternatives of finished `AnyOf`s among them taken in
    /// (an `AnyOf` being made, a `$ref` still being compiled, is kept as it is), repeats
    /// once, and no `AnyOf` around a single alternative.
    fn any_of(&mut self, ids: &[NodeId]) -> Result<NodeId, Error> {
        let mut alternatives = Vec::with_capacity(ids.len());
        for &id in ids {
            match self.node(id) {
                Node::AnyOf(inner) if !inner.is_empty() => alternatives.extend_from_slice(inner),
                _ => alternatives.push(id),
            }
        }
        alternatives.sort_unstable();
        alternatives.dedup();
        if alternatives.len() > MAX_ALTERNATIVES {
            return Err(too_many_alternatives(&self.place()));
        }
        Ok(match alternatives[..] {
            [one] => one,
            _ => self.push(Node::AnyOf(alternatives)),
        })
    }

    fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    /// Compiles `schema`, found one `step` inside the schema being compiled.
    fn nested(&mut self, step: Step<'s>, schema: &'s Value) -> Result<NodeId, Error> {
        self.path.push(step);
        let id = self.schema(schema)?;
        self.path.pop();
        Ok(id)
    }

    /// Compiles the schema at the end of `path`.
    fn schema(&mut self, schema: &'s Value) -> Result<NodeId, Error> {
        if self.path.len() > MAX_NESTING {
            return Err(refuse(format!(
                "{} is nested more than {MAX_NESTING} schemas deep (each \"$ref\" followed \
                 counts as one); Hearth follows at most {MAX_NESTING}; flatten the schema",
                self.place()
            )));
        }
        if self.nodes.len() > MAX_NODES {
            return Err(refuse(format!(
                "the schema is too large: it makes more than {MAX_NODES} grammar nodes \
                 (reached at {}); Hearth follows at most {MAX_NODES}; use a smaller schema",
                self.place()
            )));
        }
        let map = match schema {
            Value::Bool(true) => return Ok(self.any()),
            Value::Bool(false) => {
                return Err(refuse(format!(
                    "{} is `false`: no value can match it",
                    self.place()
                )))
            }
            Value::Object(map) => map,
            other => {
                return Err(refuse(format!(
                    "{} must be an object or a boolean, not {other}",
                    self.place()
                )))
            }
        };
        if let Some(keyword) = map
            .keys()
            .find(|k| !SUPPORTED.contains(&k.as_str()) && !ANNOTATIONS.contains(&k.as_str()))
        {
            return Err(refuse(format!(
                "{} uses the keyword {keyword:?}, which Hearth cannot enforce; supported \
                 keywords: {}",
                self.place(),
                SUPPORTED.join(", ")
            )));
        }
        if let Some(reference) = map.get("$ref") {
            if let Some(other) = map
                .keys()
                .find(|k| *k != "$ref" && !ANNOTATIONS.contains(&k.as_str()))
            {
                return Err(refuse(format!(
                    "{} has {other:?} beside \"$ref\"; move it into the schema the \
                     reference points at",
                    self.place()
                )));
            }
            return self.reference(reference);
        }
        // `const` and `enum` fix the value, whatever else the schema says.
        if let Some(value) = map.get("const") {
            return Ok(self.push(literals_of(std::slice::from_ref(value))));
        }
        if let Some(values) = map.get("enum") {
            return match values {
                Value::Array(values) if !values.is_empty() => Ok(self.push(literals_of(values))),
                _ => Err(refuse(format!(
                    "{}: \"enum\" must be a non-empty list of values",
                    self.place()
                ))),
            };
        }
        if let Some(alternatives) = map.get("anyOf") {
            let Value::Array(alternatives) = alternatives else {
                return Err(refuse(format!(
                    "{}: \"anyOf\" must be a list of schemas",
                    self.place()
                )));
            };
            if alternatives.is_empty() {
                return Err(refuse(format!("{}: \"anyOf\" is empty", self.place())));
            }
            if map.contains_key("type") {
                return Err(refuse(format!(
                    "{} has both \"anyOf\" and \"type\"; put the type in each alternative",
                    self.place()
                )));
            }
            let mut ids = Vec::with_capacity(alternatives.len().min(MAX_ALTERNATIVES));
            for (i, alternative) in alternatives.iter().enumerate() {
                ids.push(self.nested(Step::AnyOf(i), alternative)?);
            }
            return self.any_of(&ids);
        }
        let types: Vec<&str> = match map.get("type") {
            None => return self.untyped(map),
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(list)) if !list.is_empty() => list
                .iter()
                .map(|t| {
                    t.as_str().ok_or_else(|| {
                        refuse(format!(
                            "{}: \"type\" lists {t}, which is not a name",
                            self.place()
                        ))
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(refuse(format!(
                    "{}: \"type\" must be a type name or a list of them, not {other}",
                    self.place()
                )))
            }
        };
        let mut ids = Vec::with_capacity(types.len());
        for name in types {
            ids.push(self.typed(name, map)?);
        }
        self.any_of(&ids)
    }

    /// The node of the schema `reference` points at, compiled once: its node is reserved
    /// before it is compiled, so a schema that refers to itself (a tree) becomes a loop.
    fn reference(&mut self, reference: &'s Value) -> Result<NodeId, Error> {
        let Some(pointer) = reference.as_str().and_then(|r| r.strip_prefix('#')) else {
            return Err(refuse(format!(
                "{}: \"$ref\" {reference} does not point inside this schema (as \
                 \"#/$defs/Name\" does); Hearth reads no other schema documents",
                self.place()
            )));
        };
        if let Some(&id) = self.refs.get(pointer) {
            return Ok(id);
        }
        if self.refs_followed >= MAX_REF_DEPTH {
            return Err(refuse(format!(
                "{}: \"$ref\" {reference} makes a chain of more than {MAX_REF_DEPTH} \"$ref\"s, \
                 each inside the schema the one before points at; Hearth follows at most \
                 {MAX_REF_DEPTH}; point at the schema itself instead",
                self.place()
            )));
        }
        if self.refs.len() >= MAX_REFS {
            return Err(refuse(format!(
                "{}: \"$ref\" {reference} is one more place pointed at than Hearth follows \
                 (at most {MAX_REFS} different ones); use fewer definitions",
                self.place()
            )));
        }
        let target = self.root.pointer(pointer).ok_or_else(|| {
            refuse(format!(
                "{}: \"$ref\" {reference} points at nothing in the schema",
                self.place()
            ))
        })?;
        let id = self.reserve();
        self.refs.insert(pointer, id);
        self.refs_followed += 1;
        let target = self.nested(Step::Ref(reference), target)?;
        self.refs_followed -= 1;
        self.nodes[id as usize] = match self.node(target) {
            Node::AnyOf(inner) if !inner.is_empty() => Node::AnyOf(inner.clone()),
            _ => Node::AnyOf(vec![target]),
        };
        Ok(id)
    }

    /// A schema without `type`: what its keywords imply (an object with `properties`, an array
    /// with `items`), else any value.
    fn untyped(&mut self, map: &'s Map<String, Value>) -> Result<NodeId, Error> {
        if ["properties", "required", "additionalProperties"]
            .iter()
            .any(|k| map.contains_key(*k))
        {
            self.typed("object", map)
        } else if ["items", "minItems", "maxItems"]
            .iter()
            .any(|k| map.contains_key(*k))
        {
            self.typed("array", map)
        } else if ["minLength", "maxLength"]
            .iter()
            .any(|k| map.contains_key(*k))
        {
            self.typed("string", map)
        } else {
            Ok(self.any())
        }
    }

    fn typed(&mut self, name: &str, map: &'s Map<String, Value>) -> Result<NodeId, Error> {
        let node = match name {
            "null" => literals(["null"]),
            "boolean" => literals(["true", "false"]),
            "integer" => Node::Number { integer: true },
            "number" => Node::Number { integer: false },
            "string" => {
                let (min, max) = bounds(map, "minLength", "maxLength", || self.place())?;
                Node::String { min, max }
            }
            "array" => {
                let (min, max) = bounds(map, "minItems", "maxItems", || self.place())?;
                let items = match map.get("items") {
                    None => self.any(),
                    Some(items) => self.nested(Step::Items, items)?,
                };
                Node::Array { items, min, max }
            }
            "object" => self.object(map)?,
            other => {
                return Err(refuse(format!(
                    "{}: unknown type {other:?}; use object, array, string, number, \
                     integer, boolean or null",
                    self.place()
                )))
            }
        };
        Ok(self.push(node))
    }

    fn object(&mut self, map: &'s Map<String, Value>) -> Result<Node, Error> {
        let listed = match map.get("properties") {
            None => None,
            Some(Value::Object(listed)) => Some(listed),
            Some(other) => {
                return Err(refuse(format!(
                    "{}: \"properties\" must be an object, not {other}",
                    self.place()
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
                            "{}: \"required\" lists {n}, which is not a name",
                            self.place()
                        ))
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(refuse(format!(
                    "{}: \"required\" must be a list of names, not {other}",
                    self.place()
                )))
            }
        };
        if listed.map_or(0, Map::len) > MAX_PROPERTIES {
            return Err(too_many_properties(
                &self.place(),
                listed.map_or(0, Map::len),
            ));
        }
        let additional = match map.get("additionalProperties") {
            None | Some(Value::Bool(true)) => Some(self.any()),
            Some(Value::Bool(false)) => None,
            Some(schema) => Some(self.nested(Step::AdditionalProperties, schema)?),
        };
        let mut properties = Vec::with_capacity(listed.map_or(0, Map::len));
        for (name, schema) in listed.into_iter().flatten() {
            let value = self.nested(Step::Property(name), schema)?;
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
                        "{} requires {name:?}, but it is not in \"properties\" and \
                         \"additionalProperties\" is false, so no object can match",
                        self.place()
                    )));
                };
                properties.push(Property {
                    key: escaped(name),
                    value,
                });
            }
        }
        properties.sort_by(|a, b| a.key.cmp(&b.key));
        properties.dedup_by(|a, b| a.key == b.key);
        if properties.len() > MAX_PROPERTIES {
            return Err(too_many_properties(&self.place(), properties.len()));
        }
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

fn too_many_properties(place: &str, count: usize) -> Error {
    refuse(format!(
        "{place} lists {count} properties; Hearth can enforce at most {MAX_PROPERTIES} per \
         object"
    ))
}

/// `min..=max` read from two count keywords (`minItems`/`maxItems`, `minLength`/`maxLength`).
fn bounds(
    map: &Map<String, Value>,
    min_key: &str,
    max_key: &str,
    place: impl Fn() -> String,
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
                        "{}: {key:?} must be a whole number of at least 0, not {v}",
                        place()
                    ))
                }),
        }
    };
    let (min, max) = (count(min_key)?.unwrap_or(0), count(max_key)?);
    if max.is_some_and(|max| max < min) {
        return Err(refuse(format!(
            "{}: {min_key:?} ({min}) is more than {max_key:?} ({}), so no value can match",
            place(),
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
mod tests;
