//! Retrieval: the passages of some documents that best answer a question.
//!
//! - Keyword: FTS5's `bm25()` over the trigram index. The question becomes an OR of its words
//!   (English function words dropped), each matched as a substring, so "install" also finds
//!   "installation"; a run of CJK characters, written without spaces, becomes its overlapping
//!   three-character pieces. A question with no piece of three characters or more (a one- or
//!   two-character Chinese word, which the trigram index cannot look up) is answered by a
//!   substring scan of the documents' passages instead, ranked by how many of its words a
//!   passage holds; a question with both fuses the two lists by reciprocal rank.
//! - Semantic: the question's vector against every stored passage vector of the same model
//!   (a dot product of unit vectors is their cosine).
//! - Combined: reciprocal rank fusion of the two lists, the semantic list weighted twice
//!   (score = 1 / (60 + keyword rank) + 2 / (60 + semantic rank)). Measured on the bench's
//!   question set (bench/documents/fusion.py): plain RRF 0.58, weight 1.5 0.62, weight 2 0.66,
//!   weight 3 0.64, recall@5, against 0.52 for keywords and 0.62 for embeddings alone.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use rusqlite::params;

use crate::embedding::EmbeddingModel;
use crate::extract::Place;
use crate::library::PASSAGE_COLUMNS;
use crate::library::{passage_row, vector_from_bytes, DocumentId, Library, LibraryError};
use crate::passages::is_cjk;

/// How passages are ranked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranking {
    /// BM25 over the keyword index only; needs no model.
    Keyword,
    /// Cosine similarity of embeddings only.
    Semantic,
    /// Both, fused by reciprocal rank (the semantic list weighted twice).
    Combined,
}

/// One passage found for a question.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub document: DocumentId,
    /// The document's path.
    pub path: PathBuf,
    pub title: Option<String>,
    /// Index of its section in the extracted document.
    pub section: usize,
    /// Where in the document: page, heading or the whole file.
    pub place: Place,
    /// Characters `char_start..char_end` of its section's text.
    pub char_start: usize,
    pub char_end: usize,
    pub text: String,
    /// Read by OCR from a picture of the page: a citation says "read from a scan".
    pub from_scan: bool,
    /// The ranking's score, higher is better: BM25 for keyword (the count of short words held,
    /// or a fused reciprocal-rank sum, for questions with short CJK words), the cosine for
    /// semantic, the fused reciprocal-rank sum for combined.
    pub score: f64,
    /// Its rank (from 1) in the keyword list and in the semantic list, where it was in them.
    pub keyword_rank: Option<usize>,
    pub semantic_rank: Option<usize>,
}

/// How many passages each list contributes to the fusion.
const FUSION_DEPTH: usize = 50;
/// Reciprocal rank fusion's constant (Cormack et al. 2009).
const RRF_K: f64 = 60.0;

/// Reciprocal rank fusion's share of the item at `index` (from 0) of a ranked list.
fn reciprocal_rank(index: usize) -> f64 {
    1.0 / (RRF_K + (index + 1) as f64)
}

/// The semantic list's weight in the fusion (the keyword list's is 1): chosen by measurement,
/// see the module's notes.
const SEMANTIC_WEIGHT: f64 = 2.0;

/// The `limit` passages of `documents` that best answer `question`. `Semantic` and `Combined`
/// need `embedder` (without one, `Combined` falls back to keywords alone and `Semantic` finds
/// nothing); passages not embedded yet are found by keyword only.
pub fn search(
    library: &Library,
    question: &str,
    documents: &[DocumentId],
    ranking: Ranking,
    embedder: Option<&dyn EmbeddingModel>,
    limit: usize,
) -> Result<Vec<Hit>, LibraryError> {
    let depth = limit.max(FUSION_DEPTH);
    let keyword = match ranking {
        Ranking::Semantic => Vec::new(),
        _ => keyword_ranking(library, question, documents, depth)?,
    };
    let semantic = match (ranking, embedder) {
        (Ranking::Keyword, _) | (_, None) => Vec::new(),
        (_, Some(embedder)) => semantic_ranking(library, question, documents, embedder, depth)?,
    };
    let mut scored: Vec<(i64, f64, Option<usize>, Option<usize>)> = match ranking {
        Ranking::Keyword => keyword
            .iter()
            .enumerate()
            .map(|(i, &(id, score))| (id, score, Some(i + 1), None))
            .collect(),
        Ranking::Semantic => semantic
            .iter()
            .enumerate()
            .map(|(i, &(id, score))| (id, score, None, Some(i + 1)))
            .collect(),
        Ranking::Combined => {
            let mut fused: HashMap<i64, (f64, Option<usize>, Option<usize>)> = HashMap::new();
            for (i, &(id, _)) in keyword.iter().enumerate() {
                let entry = fused.entry(id).or_default();
                entry.0 += reciprocal_rank(i);
                entry.1 = Some(i + 1);
            }
            for (i, &(id, _)) in semantic.iter().enumerate() {
                let entry = fused.entry(id).or_default();
                entry.0 += SEMANTIC_WEIGHT * reciprocal_rank(i);
                entry.2 = Some(i + 1);
            }
            let mut fused: Vec<_> = fused
                .into_iter()
                .map(|(id, (score, k, s))| (id, score, k, s))
                .collect();
            // Ties (same fused score) keep the keyword order, then the passage order.
            fused.sort_by(|a, b| {
                b.1.total_cmp(&a.1)
                    .then(a.2.unwrap_or(usize::MAX).cmp(&b.2.unwrap_or(usize::MAX)))
                    .then(a.0.cmp(&b.0))
            });
            fused
        }
    };
    scored.truncate(limit);
    hits(library, &scored)
}

/// The passages for these scored ids, with their documents, in the same order.
fn hits(
    library: &Library,
    scored: &[(i64, f64, Option<usize>, Option<usize>)],
) -> Result<Vec<Hit>, LibraryError> {
    let err = |e| library.err(e);
    let mut passage = library
        .conn
        .prepare_cached(&format!("{PASSAGE_COLUMNS} WHERE p.id = ?1"))
        .map_err(err)?;
    let mut document = library
        .conn
        .prepare_cached("SELECT path, title FROM documents WHERE id = ?1")
        .map_err(err)?;
    let mut hits = Vec::with_capacity(scored.len());
    for &(id, score, keyword_rank, semantic_rank) in scored {
        let p = passage.query_row([id], passage_row).map_err(err)?;
        let (path, title): (String, Option<String>) = document
            .query_row([p.document], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(err)?;
        hits.push(Hit {
            document: p.document,
            path: PathBuf::from(path),
            title,
            section: p.section,
            place: p.place,
            char_start: p.char_start,
            char_end: p.char_end,
            text: p.text,
            from_scan: p.from_scan,
            score,
            keyword_rank,
            semantic_rank,
        });
    }
    Ok(hits)
}

/// English words too common to say what a question is about.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been",
    "before", "but", "by", "can", "could", "did", "do", "does", "doing", "for", "from", "had",
    "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "no", "not",
    "of", "on", "one", "or", "our", "should", "so", "some", "such", "than", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "those", "to", "too", "use", "used", "was",
    "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with",
    "would", "you", "your",
];

/// A question's words for the keyword index: `long` ones (three characters or more) go to
/// FTS5; `short` ones can only be found by a substring scan.
#[derive(Debug, Default, PartialEq, Eq)]
struct Terms {
    long: Vec<String>,
    short: Vec<String>,
}

fn terms(question: &str) -> Terms {
    let mut terms = Terms::default();
    let mut word = String::new();
    let mut cjk = String::new();
    let flush_word = |word: &mut String, terms: &mut Terms| {
        let w = word.to_lowercase();
        word.clear();
        if w.is_empty() || STOPWORDS.contains(&w.as_str()) {
            return;
        }
        if w.chars().count() >= 3 {
            terms.long.push(w);
        } else {
            terms.short.push(w);
        }
    };
    let flush_cjk = |run: &mut String, terms: &mut Terms| {
        let chars: Vec<char> = run.chars().collect();
        run.clear();
        match chars.len() {
            0 => {}
            1 | 2 => terms.short.push(chars.iter().collect()),
            _ => terms
                .long
                .extend(chars.windows(3).map(|w| w.iter().collect::<String>())),
        }
    };
    for c in question.chars() {
        if is_cjk(c) && c.is_alphanumeric() {
            flush_word(&mut word, &mut terms);
            cjk.push(c);
        } else if c.is_alphanumeric() || c == '_' {
            flush_cjk(&mut cjk, &mut terms);
            word.push(c);
        } else {
            flush_word(&mut word, &mut terms);
            flush_cjk(&mut cjk, &mut terms);
        }
    }
    flush_word(&mut word, &mut terms);
    flush_cjk(&mut cjk, &mut terms);
    keep_first_distinct(&mut terms.long);
    keep_first_distinct(&mut terms.short);
    terms
}

/// The most distinct words of each kind a question is searched by. Each becomes a clause of
/// the query; a question pasted from a long text keeps its first words.
const MAX_TERMS: usize = 64;

/// Keeps the first `MAX_TERMS` distinct words of the question, sorted.
fn keep_first_distinct(words: &mut Vec<String>) {
    let mut seen = HashSet::new();
    words.retain(|word| seen.len() < MAX_TERMS && seen.insert(word.clone()));
    words.sort();
}

/// `(passage id, score)`, best first: -bm25 over the trigram index; for a question of short
/// words only, how many of them a passage holds; for a question with both, the two lists fused
/// by reciprocal rank (so 安全 in "安全 Shell" still counts).
fn keyword_ranking(
    library: &Library,
    question: &str,
    documents: &[DocumentId],
    depth: usize,
) -> Result<Vec<(i64, f64)>, LibraryError> {
    let terms = terms(question);
    let scope = scope_json(documents);
    if terms.long.is_empty() {
        return substring_ranking(library, &terms.short, &scope, depth);
    }
    let trigram = trigram_ranking(library, &terms.long, &scope, depth)?;
    // Short English words left after the function words ("id", "ls") would match inside
    // almost any passage; only short CJK words are worth a scan.
    let short_cjk: Vec<String> = terms
        .short
        .into_iter()
        .filter(|t| t.chars().any(is_cjk))
        .collect();
    if short_cjk.is_empty() {
        return Ok(trigram);
    }
    let substring = substring_ranking(library, &short_cjk, &scope, depth)?;
    let mut fused: HashMap<i64, f64> = HashMap::new();
    for list in [&trigram, &substring] {
        for (i, &(id, _)) in list.iter().enumerate() {
            *fused.entry(id).or_default() += reciprocal_rank(i);
        }
    }
    let mut fused: Vec<(i64, f64)> = fused.into_iter().collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    fused.truncate(depth);
    Ok(fused)
}

/// BM25's constants, as FTS5's `bm25()` has them (Robertson and Zaragoza's usual values).
const BM25_K1: f64 = 1.2;
const BM25_B: f64 = 0.75;

/// `(passage id, BM25)` for passages of the documents searched holding any of `long` (words of
/// three characters or more, each matched as a substring by the trigram index), best first.
///
/// The index finds the passages (FTS5's MATCH, so a word is matched as FTS5 matches it:
/// case and diacritics folded), but the statistics are those of the documents searched, not of
/// the whole library, which FTS5's own `bm25()` takes: a word's rarity (how many passages of
/// these documents hold it) and the average passage length, so that files elsewhere in the
/// library, attached to other conversations, do not move these ranks. The formula is FTS5's:
/// for each word, `idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len / avglen))` with
/// `idf = ln((N - n + 0.5) / (n + 0.5))` (1e-6 where that is not positive), `f` the word's
/// occurrences in the passage (overlapping, after lower-casing; at least 1, the index having
/// matched it, for a word that differs only by its diacritics), `len` the passage's length in
/// characters.
fn trigram_ranking(
    library: &Library,
    long: &[String],
    scope: &str,
    depth: usize,
) -> Result<Vec<(i64, f64)>, LibraryError> {
    let err = |e| library.err(e);
    let (passages, total_chars): (i64, f64) = library
        .conn
        .prepare_cached(
            "SELECT count(*), total(length(text)) FROM passages
             WHERE document_id IN (SELECT value FROM json_each(?1))",
        )
        .map_err(err)?
        .query_row([scope], |row| Ok((row.get(0)?, row.get(1)?)))
        .map_err(err)?;
    if passages == 0 {
        return Ok(Vec::new());
    }
    let passages = passages as f64;
    let average = (total_chars / passages).max(1.0);
    let mut matching = library
        .conn
        .prepare_cached(
            "SELECT p.id, p.text FROM passages_fts JOIN passages p ON p.id = passages_fts.rowid
             WHERE passages_fts MATCH ?1
               AND p.document_id IN (SELECT value FROM json_each(?2))",
        )
        .map_err(err)?;
    // Each passage's lower-cased text and length, read once.
    let mut texts: HashMap<i64, (String, f64)> = HashMap::new();
    let mut scores: HashMap<i64, f64> = HashMap::new();
    for term in long {
        let phrase = format!("\"{}\"", term.replace('"', "\"\""));
        let ids: Vec<(i64, String)> = matching
            .query_map(params![phrase, scope], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?;
        if ids.is_empty() {
            continue;
        }
        let held = ids.len() as f64;
        let idf = ((passages - held + 0.5) / (held + 0.5)).ln();
        let idf = if idf > 0.0 { idf } else { 1e-6 };
        for (id, text) in ids {
            let (lower, length) = texts.entry(id).or_insert_with(|| {
                let length = text.chars().count() as f64;
                (text.to_lowercase(), length)
            });
            let f = occurrences(lower, term).max(1) as f64;
            let norm = BM25_K1 * (1.0 - BM25_B + BM25_B * *length / average);
            *scores.entry(id).or_default() += idf * f * (BM25_K1 + 1.0) / (f + norm);
        }
    }
    let mut ranked: Vec<(i64, f64)> = scores.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(depth);
    Ok(ranked)
}

/// How many times `word` occurs in `text`, overlapping occurrences counted (as FTS5 counts a
/// phrase's instances).
fn occurrences(text: &str, word: &str) -> usize {
    if word.is_empty() {
        return 0;
    }
    let mut count = 0;
    let mut from = 0;
    while let Some(at) = text[from..].find(word) {
        count += 1;
        // Past the first character of this occurrence, to a character boundary.
        let step = text[from + at..].chars().next().map_or(1, char::len_utf8);
        from += at + step;
    }
    count
}

/// `(passage id, words held)` for passages holding any of `short` (words the trigram index
/// cannot look up), found by scanning the documents' passages, most words first.
fn substring_ranking(
    library: &Library,
    short: &[String],
    scope: &str,
    depth: usize,
) -> Result<Vec<(i64, f64)>, LibraryError> {
    if short.is_empty() {
        return Ok(Vec::new());
    }
    let err = |e| library.err(e);
    let holds = short
        .iter()
        .map(|t| format!("(instr(lower(p.text), '{}') > 0)", t.replace('\'', "''")))
        .collect::<Vec<_>>()
        .join(" + ");
    let mut statement = library
        .conn
        .prepare(&format!(
            "SELECT p.id, {holds} AS held FROM passages p
             WHERE p.document_id IN (SELECT value FROM json_each(?1)) AND held > 0
             ORDER BY held DESC, p.id LIMIT ?2"
        ))
        .map_err(err)?;
    let rows = statement
        .query_map(params![scope, depth as i64], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, f64>(1)?))
        })
        .map_err(err)?;
    rows.collect::<Result<_, _>>().map_err(err)
}

/// `(passage id, cosine)`, best first.
fn semantic_ranking(
    library: &Library,
    question: &str,
    documents: &[DocumentId],
    embedder: &dyn EmbeddingModel,
    depth: usize,
) -> Result<Vec<(i64, f64)>, LibraryError> {
    let err = |e| library.err(e);
    // The question's own vector: a model trained with a query instruction reads it first.
    let query = embedder
        .embed_query(question)
        .map_err(|message| LibraryError::Embedding {
            path: PathBuf::from("(the question)"),
            message,
        })?;
    let mut statement = library
        .conn
        .prepare_cached(
            "SELECT v.passage_id, v.vector FROM vectors v JOIN passages p ON p.id = v.passage_id
             WHERE v.model = ?1 AND p.document_id IN (SELECT value FROM json_each(?2))",
        )
        .map_err(err)?;
    let mut rows = statement
        .query(params![embedder.model_id(), scope_json(documents)])
        .map_err(err)?;
    let mut scored = Vec::new();
    while let Some(row) = rows.next().map_err(err)? {
        let id: i64 = row.get(0).map_err(err)?;
        let bytes = row.get_ref(1).map_err(err)?.as_blob().unwrap_or_default();
        let vector = vector_from_bytes(bytes);
        let cosine: f32 = vector.iter().zip(&query).map(|(a, b)| a * b).sum();
        scored.push((id, cosine as f64));
    }
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(depth);
    Ok(scored)
}

fn scope_json(documents: &[DocumentId]) -> String {
    format!(
        "[{}]",
        documents
            .iter()
            .map(|id| id.to_string())
            .collect::<Vec<_>>()
            .join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(library: &Library, name: &str, passages: &[&str]) -> DocumentId {
        let file = crate::library::FileState {
            path: PathBuf::from(format!("/files/{name}")),
            size: 1,
            mtime_ns: 1,
            sha256: name.to_owned(),
        };
        let passages: Vec<crate::library::NewPassage> = passages
            .iter()
            .map(|text| crate::library::NewPassage {
                section: 0,
                place: Place::Whole,
                char_start: 0,
                char_end: text.chars().count(),
                text: (*text).to_owned(),
                from_scan: false,
            })
            .collect();
        library.store(&file, "text", None, &passages).unwrap()
    }

    fn ranked(library: &Library, question: &str, documents: &[DocumentId]) -> Vec<(String, f64)> {
        search(library, question, documents, Ranking::Keyword, None, 10)
            .unwrap()
            .into_iter()
            .map(|hit| (hit.text, hit.score))
            .collect()
    }

    #[test]
    fn keyword_ranks_of_a_file_do_not_move_when_unrelated_files_join_the_library() {
        let dir = tempfile::tempdir().unwrap();
        let library = Library::open(&dir.path().join("documents.db")).unwrap();
        let lease = store(
            &library,
            "lease.txt",
            &[
                "The deposit is returned within two weeks of the tenancy ending.",
                "Pets are allowed with the landlord's written consent; the deposit covers damage.",
                "The tenancy renews each year unless either side gives notice.",
                "Rent is paid on the first day of each month.",
            ],
        );
        let question = "When is the deposit returned after the tenancy?";
        let alone = ranked(&library, question, &[lease]);
        assert_eq!(alone.len(), 3, "{alone:?}");
        // Another file, in which "tenancy" is everywhere and "deposit" nowhere: with the
        // library's statistics "tenancy" would become the common word and the passage that
        // only mentions the deposit would rise.
        let other: Vec<String> = (0..40)
            .map(|i| format!("Tenancy law note {i}: a tenancy is a tenancy, whatever the tenancy."))
            .collect();
        let other: Vec<&str> = other.iter().map(String::as_str).collect();
        let unrelated = store(&library, "tenancy-law.txt", &other);
        assert_eq!(ranked(&library, question, &[lease]), alone);
        // Both files searched: the statistics are both files', and the law notes take part.
        let both = ranked(&library, question, &[lease, unrelated]);
        assert_ne!(both, alone);
        assert_eq!(
            both[0].0, alone[0].0,
            "the passage that answers stays first"
        );
    }

    #[test]
    fn occurrences_count_overlaps_and_stay_on_character_boundaries() {
        assert_eq!(occurrences("aaaa", "aaa"), 2);
        assert_eq!(occurrences("ééé x ééé", "éé"), 4);
        assert_eq!(occurrences("tenancy", "lease"), 0);
        assert_eq!(occurrences("abc", ""), 0);
    }

    #[test]
    fn english_questions_keep_their_content_words() {
        let t = terms("How do I remove a package, completely?");
        assert_eq!(t.long, ["completely", "package", "remove"]);
        assert!(t.short.is_empty(), "{:?}", t.short);
    }

    #[test]
    fn chinese_questions_become_overlapping_trigrams() {
        let t = terms("如何安装软件包？");
        assert_eq!(t.long, ["何安装", "如何安", "安装软", "装软件", "软件包"]);
        let short = terms("安装");
        assert!(short.long.is_empty(), "two characters are below a trigram");
        assert_eq!(short.short, ["安装"]);
    }

    #[test]
    fn p10_a_question_keeps_its_first_distinct_words_only() {
        let question: Vec<String> = (0..1200)
            .map(|n| {
                format!(
                    "{}{}",
                    (b'a' + (n / 26 % 26) as u8) as char,
                    (b'a' + (n % 26) as u8) as char
                )
            })
            .collect();
        let t = terms(&question.join(" "));
        assert_eq!(t.short.len(), MAX_TERMS);
        assert!(t.long.is_empty());
    }
}
