//! The user's own files: their text, extracted per format with the place each part came from
//! (`extract`), split into passages, indexed and searched so that an answer can cite them.

pub mod extract;

pub use extract::{extract, ExtractError, ExtractLimits, Extracted, Format, Place, Section};
