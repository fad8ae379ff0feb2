//! Tests of `citations`: hostile markers, entries per page, scores without markers.

use super::*;

fn three(n: usize) -> bool {
    (1..=3).contains(&n)
}

fn cites(answer: &str) -> Vec<usize> {
    cited(answer, &three)
}

#[test]
fn the_marker_forms_a_model_writes_are_citations() {
    assert_eq!(cites("Rent is 900 [1]."), [1]);
    assert_eq!(cites("Both [1][2] agree."), [1, 2]);
    assert_eq!(cites("Both [1, 2] and [3; 1]."), [1, 2, 3]);
    assert_eq!(cites("Spaced [ 2 ,3 ]."), [2, 3]);
    assert_eq!(
        cites("租金是900欧元【1】，通知期三个月【２，３】。"),
        [1, 2, 3]
    );
    assert_eq!(cites("见【1、2】"), [1, 2]);
    assert_eq!(cites("A range [1-3]."), [1, 2, 3]);
    assert_eq!(cites("An en dash [2–3]."), [2, 3]);
    assert_eq!(cites("Escaped \\[2\\] shows as [2]."), [2]);
    assert_eq!(cites("Padded [01]."), [1]);
}

#[test]
fn numbers_are_in_the_order_first_cited_and_each_once() {
    assert_eq!(cites("[3] then [1] then [3][1] again"), [3, 1]);
}

#[test]
fn code_is_no_citation() {
    assert!(cites("```\nlet a = b[1];\n```\n").is_empty());
    assert!(cites("~~~python\nx[2]\n~~~").is_empty());
    assert!(
        cites("   ```rust\n x[1]\n   ```").is_empty(),
        "an indented fence"
    );
    assert!(cites("Before\n```\nnever closed [1]\nstill code [2]").is_empty());
    assert!(cites("Use `a[1]` and ``b [2] ` c``.").is_empty());
    assert_eq!(
        cites("```\n[1]\n```\nAfter the block [2]."),
        [2],
        "prose after a closed block"
    );
    assert_eq!(
        cites("````\n```\n[1]\n````\n[3]"),
        [3],
        "a shorter fence does not close a longer one"
    );
    assert_eq!(cites("An unmatched ` backtick [1]."), [1]);
    assert_eq!(
        cites("Code `never closed\n\nnext paragraph [2]"),
        [2],
        "inline code never crosses a blank line"
    );
    assert_eq!(
        cites("```a` [1]"),
        [1],
        "a backtick in the info string: no fence"
    );
}

#[test]
fn links_are_no_citations() {
    assert!(cites("See [1](https://example.com/1).").is_empty());
    assert!(cites("See ![2](image.png).").is_empty());
    assert!(cites("[1]: https://example.com").is_empty());
    assert!(cites("  [2]: https://example.com \"title\"").is_empty());
    assert!(cites("See [the spec][1].").is_empty());
    assert_eq!(cites("Not at the start [1]: a colon."), [1]);
}

#[test]
fn numbers_no_passage_has_are_no_citations() {
    assert!(cites("[0] [4] [9] [123] [1234]").is_empty());
    assert!(cites("[12345] [99999999999999999999999999999]").is_empty());
    assert_eq!(cites("[9, 2]"), [2], "the known number of a group counts");
    assert!(
        cites("[1-100] [3-1] [1-]").is_empty(),
        "ranges too wide, backwards, open"
    );
}

#[test]
fn what_is_not_a_marker_is_text() {
    for text in [
        "[1 2]", "[1,]", "[1】", "【1]", "[a1]", "[1a]", "[]", "[ ]", "[-1]", "[1.5]", "[", "【",
        "[1", "[１", "]", "】]", "\\", "[1,", "[2-",
    ] {
        assert!(cites(text).is_empty(), "{text:?}");
    }
}

#[test]
fn thinking_is_no_citation() {
    assert_eq!(
        cites("<think>passage [2] looks good</think>Rent is 900 [1]."),
        [1]
    );
    assert!(cites("<think>still thinking about [1]").is_empty());
    assert_eq!(cites("Before [3] <think>[1]"), [3]);
    // A model that thinks twice (gpt-oss between tool calls): neither section cites.
    assert_eq!(
        cites("<think>[2]</think>Rent [1].<think>check [2]</think>Due on the 1st [3]."),
        [1, 3]
    );
    assert_eq!(cites("<think>[2]</think>Rent [1].<think>still [3]"), [1]);
}

#[test]
fn hostile_sizes_end_quickly() {
    let many = "[1]".repeat(100_000);
    assert_eq!(cites(&many), [1]);
    let open = "[".repeat(200_000);
    assert!(cites(&open).is_empty());
    let ticks = "`a``b".repeat(20_000);
    assert!(cites(&ticks).is_empty());
    let fences = "```\n".repeat(10_000);
    assert!(cites(&fences).is_empty());
    let group = format!("[{}1]", "1, ".repeat(50_000));
    assert_eq!(cites(&group), [1]);
}

/// A passage of `document`, at `place`, numbered `number`.
fn passage(number: usize, document: i64, place: &str, text: &str) -> Source {
    let page = place.strip_prefix("page ").and_then(|p| p.parse().ok());
    Source {
        number,
        document_id: document,
        name: format!("file{document}.pdf"),
        place: place.to_owned(),
        page,
        section: number,
        char_start: 0,
        char_end: text.chars().count(),
        text: text.to_owned(),
        from_scan: false,
        used: SourceUse::Given,
        numbers: Vec::new(),
        read_whole: false,
    }
}

/// (number, numbers, place, use) of each entry.
fn summary(sources: &[Source]) -> Vec<(usize, Vec<usize>, String, SourceUse)> {
    sources
        .iter()
        .map(|s| (s.number, s.all_numbers(), s.place.clone(), s.used))
        .collect()
}

fn spec() -> Vec<Source> {
    vec![
        passage(1, 1, "page 15", "The default weight value is 50."),
        passage(2, 1, "page 7", "Globs are matched case-insensitively."),
        passage(3, 1, "page 15", "The maximum weight is 100."),
        passage(4, 1, "page 3", "Magic rules have a priority."),
    ]
}

#[test]
fn cited_entries_come_first_one_per_page_then_also_read() {
    let sorted = sort_sources("The maximum is 100 [3], see also [2].", &spec());
    assert_eq!(
        summary(&sorted),
        [
            (1, vec![1, 3], "page 15".into(), SourceUse::Cited),
            (2, vec![2], "page 7".into(), SourceUse::Cited),
            (4, vec![4], "page 3".into(), SourceUse::AlsoRead),
        ]
    );
    assert_eq!(
        sorted[0].text,
        "The default weight value is 50.\n\nThe maximum weight is 100."
    );
    assert_eq!(sorted[0].page, Some(15));
    // Sorting the saved entries again (a continued answer) keeps them.
    let again = sort_sources("The maximum is 100 [3], see also [2].", &sorted);
    assert_eq!(summary(&again), summary(&sorted));
}

#[test]
fn markers_of_no_passage_leave_the_ranking_to_the_words() {
    let sorted = sort_sources("The default weight value is 50 [7].", &spec());
    assert_eq!(sorted[0].used, SourceUse::ProbablyUsed);
    assert_eq!(sorted[0].place, "page 15");
}

fn tenancy_and_holiday() -> Vec<Source> {
    let mut given = vec![
        passage(
            1,
            2,
            "section “Summer holiday plan”",
            "We fly to Lisbon on 3 August and stay two weeks.",
        ),
        passage(
            2,
            2,
            "section “Budget”",
            "The budget for the holiday is 2400 euros, hotel included.",
        ),
        passage(
            3,
            3,
            "section “Rent”",
            "The tenant pays a monthly rent of 900 euros on the first day of each month.",
        ),
        passage(
            4,
            3,
            "section “Notice”",
            "Either party may end the tenancy with three months of written notice.",
        ),
        passage(
            5,
            3,
            "section “Pets”",
            "The tenant may keep a cat or small dog with the landlord's consent.",
        ),
    ];
    for p in &mut given {
        p.read_whole = true;
    }
    given
}

#[test]
fn without_markers_the_passages_holding_the_answer_are_probably_used() {
    let answer = "The monthly rent is 900 euros, and you must give three months of written notice to end the tenancy.";
    let sorted = sort_sources(answer, &tenancy_and_holiday());
    let used: Vec<(usize, SourceUse)> = sorted.iter().map(|s| (s.number, s.used)).collect();
    assert_eq!(
        used[..2].iter().map(|u| u.1).collect::<Vec<_>>(),
        [SourceUse::ProbablyUsed; 2],
        "{used:?}"
    );
    let mut probable: Vec<usize> = used[..2].iter().map(|u| u.0).collect();
    probable.sort_unstable();
    assert_eq!(probable, [3, 4], "rent and notice: {used:?}");
    // The rest is read: each file given whole says so once.
    let rest: Vec<(usize, Vec<usize>, String, SourceUse)> = summary(&sorted[2..]);
    assert_eq!(
        rest,
        [
            (1, vec![1, 2], String::new(), SourceUse::AlsoRead),
            (5, vec![5], String::new(), SourceUse::AlsoRead),
        ]
    );
    assert!(sorted[2].read_whole && sorted[2].page.is_none());
}

#[test]
fn a_greeting_has_no_sources() {
    for greeting in [
        "Hello! I'm Hearth, your private assistant. How can I help you today?",
        "你好！我是 Hearth，一个乐于助人的AI助手，可以回答你的问题。",
        "Hallo! Ich bin Hearth, dein Assistent. Wie kann ich dir heute helfen?",
        "",
    ] {
        let sorted = sort_sources(greeting, &tenancy_and_holiday());
        assert!(
            sorted.iter().all(|s| s.used == SourceUse::AlsoRead),
            "{greeting}: {:?}",
            summary(&sorted)
        );
    }
}

#[test]
fn an_answer_in_chinese_is_scored_by_pairs_of_characters() {
    let given = vec![
        passage(1, 4, "page 1", "租客每月一日支付房租九百欧元。"),
        passage(2, 4, "page 2", "暑假我们飞往里斯本，住两个星期。"),
    ];
    let sorted = sort_sources("房租是每月九百欧元，每月一日支付。", &given);
    assert_eq!(
        summary(&sorted),
        [
            (1, vec![1], "page 1".into(), SourceUse::ProbablyUsed),
            (2, vec![2], "page 2".into(), SourceUse::AlsoRead),
        ]
    );
}

#[test]
fn a_short_file_read_whole_and_cited_lists_the_rest_once() {
    let sorted = sort_sources("Rent is 900 euros [3].", &tenancy_and_holiday());
    assert_eq!(
        summary(&sorted),
        [
            (3, vec![3], "section “Rent”".into(), SourceUse::Cited),
            (1, vec![1, 2], String::new(), SourceUse::AlsoRead),
            (4, vec![4, 5], String::new(), SourceUse::AlsoRead),
        ]
    );
}

#[test]
fn overlapping_passages_of_one_section_are_joined_where_they_overlap() {
    let mut a = passage(1, 1, "page 2", "abcdefghij");
    let mut b = passage(2, 1, "page 2", "fghijklmno");
    a.section = 0;
    b.section = 0;
    b.char_start = 5;
    b.char_end = 15;
    let sorted = sort_sources("See [2].", &[a, b]);
    assert_eq!(sorted.len(), 1);
    assert_eq!(sorted[0].text, "abcdefghijklmno");
    assert_eq!((sorted[0].char_start, sorted[0].char_end), (0, 15));
    assert_eq!(sorted[0].all_numbers(), [1, 2]);
}

#[test]
fn the_score_is_the_weighted_share_of_the_answers_words() {
    let texts = vec!["rent 900 euros".to_owned(), "hotel euros".to_owned()];
    let scores = support("Rent: 900 euros.", &texts);
    assert!((scores[0].share - 1.0).abs() < 1e-9, "{scores:?}");
    assert_eq!(scores[0].shared, 3);
    assert_eq!(scores[1].shared, 1);
    assert!(
        scores[1].share < 0.3,
        "a word every passage holds weighs little: {scores:?}"
    );
    assert_eq!(support("", &texts)[0].share, 0.0);
    assert!(support("rent", &[]).is_empty());
}
