//! `${{ … }}` templates: splitting a string into literal text and expressions, and the
//! rules for turning expression results back into text.
//!
//! A `}}` inside a CEL string literal (`'…'`, `"…"`, triple-quoted, raw) or closing a map
//! literal (`{"a": {"b": 1}}`) does not end the expression. This module knows nothing of
//! CEL's grammar beyond that: compiling and evaluating live in `compile.rs` and `eval.rs`.

use serde_json::Value;

use super::ExprError;

const OPEN: &str = "${{";

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// Text copied as is.
    Text(String),
    /// An expression, evaluated.
    Expr(ExprSegment),
}

/// An expression found between `${{` and `}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprSegment {
    /// The CEL source, trimmed of surrounding whitespace.
    pub source: String,
    /// Line of the `${{` in the template, from 1.
    pub line: usize,
    /// Column (in characters) of the `${{` in its line, from 1.
    pub column: usize,
}

/// A parsed string: literal text and expressions, in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Template {
    segments: Vec<Segment>,
}

/// Whether `text` contains a `${{`, and so needs parsing at all.
pub fn has_expressions(text: &str) -> bool {
    text.contains(OPEN)
}

impl Template {
    /// Splits `text` into literal text and `${{ }}` expressions.
    ///
    /// Fails on a `${{` without its `}}`, with its line and column.
    pub fn parse(text: &str) -> Result<Self, ExprError> {
        let mut segments = Vec::new();
        let mut rest = 0;
        while let Some(found) = text[rest..].find(OPEN) {
            let open = rest + found;
            if open > rest {
                segments.push(Segment::Text(text[rest..open].to_owned()));
            }
            let start = open + OPEN.len();
            let (line, column) = position(text, open);
            let close = find_close(text, start).ok_or_else(|| ExprError::Unterminated {
                field: None,
                text: text.to_owned(),
                line,
                column,
            })?;
            segments.push(Segment::Expr(ExprSegment {
                source: text[start..close].trim().to_owned(),
                line,
                column,
            }));
            rest = close + 2;
        }
        if rest < text.len() {
            segments.push(Segment::Text(text[rest..].to_owned()));
        }
        Ok(Self { segments })
    }

    /// The pieces, in order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The expressions, in order.
    pub fn expressions(&self) -> impl Iterator<Item = &ExprSegment> {
        self.segments.iter().filter_map(|segment| match segment {
            Segment::Expr(expr) => Some(expr),
            Segment::Text(_) => None,
        })
    }

    /// The expression, when the whole template is exactly one `${{ }}` (no text around it,
    /// not even whitespace): its result keeps its type.
    pub fn single_expression(&self) -> Option<&ExprSegment> {
        match self.segments.as_slice() {
            [Segment::Expr(expr)] => Some(expr),
            _ => None,
        }
    }
}

/// The text an expression's result contributes to a template with other text: strings as
/// they are, everything else as JSON (`1`, `true`, `null`, `{"a":1}`, `[1,2]`).
pub fn to_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// 1-based line and character column of byte offset `at` in `text`.
fn position(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// The byte offset of the `}}` closing an expression that starts at `start`, skipping string
/// literals and balanced braces. When a string literal is itself unterminated, the first `}}`
/// closes the expression, and CEL reports the string.
fn find_close(text: &str, start: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = start;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' | b'"' => match skip_string(bytes, i) {
                Some(end) => {
                    i = end;
                    continue;
                }
                None => return text[start..].find("}}").map(|at| start + at),
            },
            b'{' => depth += 1,
            b'}' if depth > 0 => depth -= 1,
            b'}' if bytes.get(i + 1) == Some(&b'}') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// The offset just past the string literal opening at `open`, or `None` if it never closes.
fn skip_string(bytes: &[u8], open: usize) -> Option<usize> {
    let quote = bytes[open];
    let raw = bytes[..open]
        .iter()
        .rev()
        .take_while(|b| matches!(b, b'r' | b'R' | b'b' | b'B'))
        .take(2)
        .any(|b| matches!(b, b'r' | b'R'));
    let triple = bytes.get(open + 1) == Some(&quote) && bytes.get(open + 2) == Some(&quote);
    let mut i = if triple { open + 3 } else { open + 1 };
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\\' && !raw {
            i += 2;
            continue;
        }
        if b == quote {
            if !triple {
                return Some(i + 1);
            }
            if bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote) {
                return Some(i + 3);
            }
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exprs(text: &str) -> Vec<String> {
        Template::parse(text)
            .unwrap()
            .expressions()
            .map(|e| e.source.clone())
            .collect()
    }

    #[test]
    fn literal_text_is_one_segment() {
        let t = Template::parse("just text }} and {").unwrap();
        assert_eq!(t.segments(), [Segment::Text("just text }} and {".into())]);
        assert!(t.single_expression().is_none());
        assert!(Template::parse("").unwrap().segments().is_empty());
    }

    #[test]
    fn splits_text_and_expressions() {
        let t = Template::parse("v${{ vars.a }}-${{vars.b}}!").unwrap();
        assert_eq!(t.segments().len(), 5);
        assert_eq!(exprs("v${{ vars.a }}-${{vars.b}}!"), ["vars.a", "vars.b"]);
        let single = Template::parse("${{ vars.a }}").unwrap();
        assert_eq!(single.single_expression().unwrap().source, "vars.a");
        assert!(
            Template::parse(" ${{ vars.a }}")
                .unwrap()
                .single_expression()
                .is_none()
        );
    }

    #[test]
    fn braces_inside_strings_and_maps_do_not_close() {
        assert_eq!(exprs(r#"${{ "a}}b" + 'c}}' }}"#), [r#""a}}b" + 'c}}'"#]);
        assert_eq!(exprs(r#"${{ {"a": {"b": 1}} }}"#), [r#"{"a": {"b": 1}}"#]);
        assert_eq!(exprs(r#"${{ "es\"}}c" }}"#), [r#""es\"}}c""#]);
        assert_eq!(exprs(r#"${{ r'\'}}x' }}"#), [r#"r'\'"#]);
        assert_eq!(exprs("${{ '''a'}}b''' }}"), ["'''a'}}b'''"]);
    }

    #[test]
    fn an_unterminated_string_leaves_it_to_cel() {
        assert_eq!(exprs("${{ 'abc }} rest"), ["'abc"]);
    }

    #[test]
    fn unterminated_expression_reports_line_and_column() {
        let err = Template::parse("image: ${{ vars.a }} tag: ${{ vars.b").unwrap_err();
        assert_eq!(err.position(), Some((1, 27)));
        let err = Template::parse("one\ntwo ${{ {'a': 1} ").unwrap_err();
        assert!(matches!(
            err,
            ExprError::Unterminated {
                line: 2,
                column: 5,
                ..
            }
        ));
    }

    #[test]
    fn results_become_text() {
        assert_eq!(to_text(&Value::from("s")), "s");
        assert_eq!(to_text(&Value::from(2)), "2");
        assert_eq!(to_text(&Value::from(true)), "true");
        assert_eq!(to_text(&serde_json::json!({"a": [1]})), r#"{"a":[1]}"#);
    }
}
