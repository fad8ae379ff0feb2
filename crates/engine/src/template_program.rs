//! A chat template compiled to minijinja's instructions, with Hearth's checks woven in.
//!
//! minijinja bounds the work a template does (fuel) but not the shape of the values it builds:
//! a loop that runs `{% set ns.x = [ns.x] %}` 100,000 times costs little fuel and leaves a list
//! nested 100,000 deep, which minijinja's own printing, comparison and dropping then walk by
//! native recursion until the stack overflows. Values can only outlive one expression by being
//! stored (`set`, `with`, loop variables and macro arguments are all `StoreLocal`; `set ns.x`
//! is `SetAttr`), so the compiled program calls a check at each store: [`STORE_CHECK`] on the
//! value before a `StoreLocal`, and [`NAMESPACE_CHECK`] on the whole namespace after a
//! `SetAttr` (which also catches a namespace made to hold itself). Raw template text is emitted
//! through the formatter like every other output, so one counter bounds all output.
//!
//! The checks themselves live in `template_values`; this module only places the calls.

use std::collections::BTreeMap;
use std::sync::Arc;

use minijinja::machinery::{CompiledTemplate, Instruction, Instructions, TemplateConfig};
use minijinja::syntax::SyntaxConfig;
use minijinja::{AutoEscape, Value};

/// The function called with a value about to be stored in a variable; it returns the value.
pub(crate) const STORE_CHECK: &str = "hearth:store";
/// The function called with a namespace about to be assigned to; it returns the namespace.
pub(crate) const NAMESPACE_REMEMBER: &str = "hearth:namespace";
/// The function called with the attribute's name after the assignment, to check its value.
pub(crate) const NAMESPACE_CHECK: &str = "hearth:namespace-stored";

/// A compiled template: the root instructions and those of its blocks.
pub(crate) struct Program<'source> {
    pub(crate) instructions: Instructions<'source>,
    pub(crate) blocks: BTreeMap<&'source str, Instructions<'source>>,
}

/// Compiles `source` as minijinja would, then adds the checks this module describes.
pub(crate) fn compile<'source>(
    source: &'source str,
    syntax: &SyntaxConfig,
) -> Result<Program<'source>, minijinja::Error> {
    let config = TemplateConfig {
        syntax_config: syntax.clone(),
        default_auto_escape: Arc::new(|_| AutoEscape::None),
    };
    let compiled = CompiledTemplate::new("chat_template", source, &config)?;
    Ok(Program {
        instructions: with_checks(&compiled.instructions),
        blocks: compiled
            .blocks
            .iter()
            .map(|(name, block)| (*name, with_checks(block)))
            .collect(),
    })
}

/// The instructions placed before and after `instruction`.
fn around<'s>(instruction: &Instruction<'s>) -> (Vec<Instruction<'s>>, Vec<Instruction<'s>>) {
    match *instruction {
        Instruction::StoreLocal(_) => (
            vec![Instruction::CallFunction(STORE_CHECK, Some(1))],
            vec![],
        ),
        // Before `SetAttr` the namespace is on top of the stack, the value under it; after it,
        // the check reads the attribute back and walks it (through the namespace, if the value
        // holds it: a namespace made to hold itself is nested without end).
        Instruction::SetAttr(name) => (
            vec![Instruction::CallFunction(NAMESPACE_REMEMBER, Some(1))],
            vec![
                Instruction::LoadConst(Value::from(name)),
                Instruction::CallFunction(NAMESPACE_CHECK, Some(1)),
                Instruction::DiscardTop,
            ],
        ),
        // `EmitRaw` becomes `LoadConst` + `Emit` (see `replacement`).
        Instruction::EmitRaw(_) => (vec![], vec![Instruction::Emit]),
        _ => (vec![], vec![]),
    }
}

/// What `instruction` becomes, its jump targets mapped through `new_index`.
fn replacement<'s>(instruction: &Instruction<'s>, new_index: &[u32]) -> Instruction<'s> {
    let at = |target: u32| new_index.get(target as usize).copied().unwrap_or(target);
    match *instruction {
        Instruction::EmitRaw(text) => Instruction::LoadConst(Value::from_safe_string(text.into())),
        Instruction::Jump(t) => Instruction::Jump(at(t)),
        Instruction::JumpIfFalse(t) => Instruction::JumpIfFalse(at(t)),
        Instruction::JumpIfFalseOrPop(t) => Instruction::JumpIfFalseOrPop(at(t)),
        Instruction::JumpIfTrueOrPop(t) => Instruction::JumpIfTrueOrPop(at(t)),
        Instruction::Iterate(t) => Instruction::Iterate(at(t)),
        Instruction::BuildMacro(name, t, flags) => Instruction::BuildMacro(name, at(t), flags),
        ref other => other.clone(),
    }
}

/// `old` with the checks added: every jump target moves to where its instruction now starts
/// (the start of the checks placed before it).
fn with_checks<'s>(old: &Instructions<'s>) -> Instructions<'s> {
    let count = (0..).take_while(|&i| old.get(i).is_some()).count() as u32;
    let mut new_index = Vec::with_capacity(count as usize + 1);
    let mut next = 0u32;
    for i in 0..count {
        new_index.push(next);
        let (before, after) = around(old.get(i).expect("counted"));
        next += (before.len() + 1 + after.len()) as u32;
    }
    // A jump to the end stays at the end.
    new_index.push(next);

    let mut new = Instructions::new(old.name(), old.source());
    for i in 0..count {
        let instruction = old.get(i).expect("counted");
        let (before, after) = around(instruction);
        let added = before
            .into_iter()
            .chain(std::iter::once(replacement(instruction, &new_index)))
            .chain(after);
        for each in added {
            // Keep the source location, so errors still point at the template's line.
            match (old.get_span(i), old.get_line(i)) {
                (Some(span), _) => new.add_with_span(each, span),
                (None, Some(line)) => new.add_with_line(each, line as u16),
                (None, None) => new.add(each),
            };
        }
    }
    new
}
