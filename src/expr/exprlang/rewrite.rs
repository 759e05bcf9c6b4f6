//! Source rewrites that make the `expr-lang` crate read what Go's expr-lang (and so Kargo)
//! reads, applied before compiling: map literals become `fromPairs([[key, value], …])`
//! (the crate only takes literal values in a map literal: `{a: vars.x}` would not
//! compile), and Kargo's semver methods `.Major()` become fields. Also refuses a range
//! with literal bounds past Go expr-lang's memory budget. Offsets of errors in the
//! rewritten text map back to the source.

use super::functions::KARGO_SEMVER_FIELDS;
use super::lexer::{Token, TokenKind};

/// The most elements a range may have, as Go expr-lang's default memory budget.
pub(crate) const MAX_RANGE: i64 = 1_000_000;

/// A rewritten source and how its offsets map back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rewrite {
    /// The text to compile.
    pub(crate) text: String,
    /// Each edit: (source start, source end, rewritten start, rewritten end).
    edits: Vec<(usize, usize, usize, usize)>,
}

impl Rewrite {
    /// The offset in the source of `offset` in the rewritten text.
    pub(crate) fn source_offset(&self, offset: usize) -> usize {
        let mut shift: isize = 0;
        for &(start, end, new_start, new_end) in &self.edits {
            if offset < new_start {
                break;
            }
            if offset < new_end {
                return start;
            }
            shift = new_end as isize - end as isize;
        }
        (offset as isize - shift).max(0) as usize
    }
}

/// The rewrites of `source`, whose `tokens` are given.
pub(crate) fn rewrite(source: &str, tokens: &[Token]) -> Rewrite {
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    method_edits(tokens, &mut edits);
    map_edits(tokens, &mut edits);
    edits.sort_by_key(|e| e.0);
    let mut text = String::with_capacity(source.len() + 16 * edits.len());
    let mut mapped = Vec::with_capacity(edits.len());
    let mut copied = 0;
    for (start, end, replacement) in edits {
        if start < copied {
            continue; // overlapping edits cannot come from valid source; keep the first
        }
        text.push_str(&source[copied..start]);
        let new_start = text.len();
        text.push_str(&replacement);
        mapped.push((start, end, new_start, text.len()));
        copied = end;
    }
    text.push_str(&source[copied..]);
    Rewrite {
        text,
        edits: mapped,
    }
}

/// `.Major()` → `.Major` (and the other semver fields).
fn method_edits(tokens: &[Token], edits: &mut Vec<(usize, usize, String)>) {
    for w in tokens.windows(4) {
        let method = matches!(w[0].text.as_str(), "." | "?.")
            && w[1].kind == TokenKind::Ident
            && KARGO_SEMVER_FIELDS.contains(&w[1].text.as_str())
            && w[2].text == "("
            && w[3].text == ")";
        if method {
            edits.push((w[2].offset, w[3].offset + 1, String::new()));
        }
    }
}

/// One open bracket while reading map literals.
struct Frame {
    map: bool,
    expect_key: bool,
    open_entry: bool,
}

/// `{k: v, "s": w}` → `fromPairs([["k", v], ["s", w]])`.
fn map_edits(tokens: &[Token], edits: &mut Vec<(usize, usize, String)>) {
    let text = |i: usize| tokens.get(i).map_or("", |t| t.text.as_str());
    let mut frames: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i];
        let top_is_map = frames.last().is_some_and(|f| f.map);
        match (token.kind, token.text.as_str()) {
            (TokenKind::Punct, "{") => {
                let key = tokens.get(i + 1).is_some_and(is_key) && text(i + 2) == ":";
                if key {
                    edits.push((token.offset, token.offset + 1, "fromPairs([".into()));
                }
                frames.push(Frame {
                    map: key,
                    expect_key: true,
                    open_entry: false,
                });
            }
            (TokenKind::Punct, "(" | "[") => frames.push(Frame {
                map: false,
                expect_key: false,
                open_entry: false,
            }),
            (TokenKind::Punct, ")" | "]") => {
                frames.pop();
            }
            (TokenKind::Punct, "}") => {
                if let Some(frame) = frames.pop().filter(|f| f.map) {
                    let close = if frame.open_entry { "]])" } else { "])" };
                    edits.push((token.offset, token.offset + 1, close.into()));
                }
            }
            (TokenKind::Punct, ",") if top_is_map => {
                edits.push((token.offset, token.offset + 1, "],".into()));
                if let Some(frame) = frames.last_mut() {
                    frame.expect_key = true;
                    frame.open_entry = false;
                }
            }
            _ if top_is_map
                && frames.last().is_some_and(|f| f.expect_key)
                && is_key(token)
                && text(i + 1) == ":" =>
            {
                let key = match token.kind {
                    TokenKind::Ident => format!("[\"{}\",", token.text),
                    _ => format!("[{},", token.text),
                };
                let colon = &tokens[i + 1];
                edits.push((token.offset, colon.offset + 1, key));
                if let Some(frame) = frames.last_mut() {
                    frame.expect_key = false;
                    frame.open_entry = true;
                }
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
}

fn is_key(token: &Token) -> bool {
    match token.kind {
        TokenKind::Ident => !token.text.starts_with(['#', '$']),
        TokenKind::Literal => token.text.starts_with(['"', '\'', '`']),
        TokenKind::Punct => false,
    }
}

/// The offset of a range `a..b` with literal bounds longer than [`MAX_RANGE`], if any.
pub(crate) fn oversized_range(tokens: &[Token]) -> Option<usize> {
    let int = |t: &Token| -> Option<i64> {
        (t.kind == TokenKind::Literal)
            .then(|| t.text.replace('_', "").parse().ok())
            .flatten()
    };
    tokens.windows(3).find_map(|w| {
        let (a, b) = (int(&w[0])?, int(&w[2])?);
        (w[1].text == ".." && b.saturating_sub(a) >= MAX_RANGE).then_some(w[0].offset)
    })
}

#[cfg(test)]
mod tests {
    use super::super::lexer::tokenize;
    use super::*;

    fn rewritten(source: &str) -> String {
        rewrite(source, &tokenize(source)).text
    }

    #[test]
    fn map_literals_become_pairs() {
        assert_eq!(
            rewritten("{a: vars.x, 'b': -1}"),
            "fromPairs([[\"a\", vars.x], ['b', -1]])"
        );
        assert_eq!(
            rewritten("{a: {b: [1]},}"),
            "fromPairs([[\"a\", fromPairs([[\"b\", [1]]])],])"
        );
        assert_eq!(
            rewritten("{a: x ? y : z}"),
            "fromPairs([[\"a\", x ? y : z]])"
        );
        assert_eq!(rewritten("{}"), "{}");
        assert_eq!(rewritten("filter(xs, {# > 1})"), "filter(xs, {# > 1})");
        assert_eq!(rewritten("if a { b } else { c }"), "if a { b } else { c }");
    }

    #[test]
    fn semver_methods_become_fields() {
        assert_eq!(
            rewritten("semverParse(v).Major() + 1"),
            "semverParse(v).Major + 1"
        );
        assert_eq!(rewritten("x.Major(1)"), "x.Major(1)");
    }

    #[test]
    fn offsets_map_back_to_the_source() {
        let source = "{a: 1} + (";
        let r = rewrite(source, &tokenize(source));
        assert_eq!(r.text, "fromPairs([[\"a\", 1]]) + (");
        assert_eq!(r.source_offset(r.text.len()), source.len());
        assert_eq!(r.source_offset(0), 0);
        assert_eq!(
            r.source_offset(r.text.find('+').unwrap()),
            source.find('+').unwrap()
        );
    }

    #[test]
    fn ranges_past_the_budget_are_found() {
        assert_eq!(oversized_range(&tokenize("1..10")), None);
        assert_eq!(oversized_range(&tokenize("x + 0..1_000_000")), Some(4));
    }
}
