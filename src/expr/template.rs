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
        let mut cursor = Cursor::default();
        while let Some(found) = text[rest..].find(OPEN) {
            let open = rest + found;
            if open > rest {
                segments.push(Segment::Text(text[rest..open].to_owned()));
            }
            let start = open + OPEN.len();
            let (line, column) = cursor.advance(text, open);
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

/// A position in a text, moved forward only: finding the line and column of each `${{` costs
/// the text's length once in all, not once per expression (a string of 100,000 expressions
/// would otherwise take minutes).
#[derive(Debug, Default)]
struct Cursor {
    /// The byte offset reached.
    at: usize,
    /// Newlines before it.
    newlines: usize,
    /// Characters between the last newline (or the start) and it.
    column: usize,
}

impl Cursor {
    /// 1-based line and character column of byte offset `to` (at or after the last one).
    fn advance(&mut self, text: &str, to: usize) -> (usize, usize) {
        let skipped = &text[self.at..to];
        match skipped.rfind('\n') {
            Some(last) => {
                self.newlines += skipped.matches('\n').count();
                self.column = skipped[last + 1..].chars().count();
            }
            None => self.column += skipped.chars().count(),
        }
        self.at = to;
        (self.newlines + 1, self.column + 1)
    }
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

/// How deeply `expr` (CEL source) nests and how many operators it has, with the byte
/// offsets where each limit would be passed. Each `(`, `[` or `{` opens a level until it
/// closes, and each `?` of a conditional opens one until its enclosing bracket closes;
/// operators are the arithmetic, comparison, logical, `.`, index, call and `?` ones (a
/// chain of N of them is N levels deep in CEL's syntax tree). String literals do not count.
///
/// CEL's parser and interpreter recurse once per level: a crafted expression nested
/// thousands deep would overflow the stack, so the compiler refuses expressions past
/// [`MAX_NESTING`] or [`MAX_OPERATORS`] before parsing them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Shape {
    /// The deepest nesting.
    pub(crate) depth: usize,
    /// Where nesting first passes [`MAX_NESTING`] (or the deepest point).
    pub(crate) depth_at: usize,
    /// How many operators.
    pub(crate) operators: usize,
    /// Where the operators first pass [`MAX_OPERATORS`].
    pub(crate) operators_at: usize,
}

/// See [`Shape`].
pub(crate) fn shape(expr: &str) -> Shape {
    let bytes = expr.as_bytes();
    // The conditionals (`?`) open at each bracket level, innermost last.
    let mut levels: Vec<usize> = vec![0];
    let mut shape = Shape::default();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let mut operator = true;
        match bytes[i] {
            b'\'' | b'"' => {
                i = skip_string(bytes, i).unwrap_or(bytes.len());
                continue;
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                levels.push(0);
            }
            b'?' => {
                depth += 1;
                if let Some(level) = levels.last_mut() {
                    *level += 1;
                }
            }
            b')' | b']' | b'}' => {
                operator = false;
                if levels.len() > 1 {
                    depth -= levels.pop().unwrap_or(0) + 1;
                }
            }
            b'=' | b'!' | b'<' | b'>' | b'&' | b'|' => {
                // `==`, `!=`, `<=`, `>=`, `&&`, `||` are one operator.
                if matches!(bytes.get(i + 1), Some(b'=' | b'&' | b'|')) {
                    i += 1;
                }
            }
            b'+' | b'-' | b'*' | b'/' | b'%' | b'.' => {}
            _ => operator = false,
        }
        if depth > shape.depth {
            shape.depth = depth;
            if depth <= MAX_NESTING + 1 {
                shape.depth_at = i;
            }
        }
        if operator {
            shape.operators += 1;
            if shape.operators <= MAX_OPERATORS + 1 {
                shape.operators_at = i;
            }
        }
        i += 1;
    }
    shape
}

/// The deepest nesting of brackets and conditionals an expression may have (see [`Shape`]).
pub(crate) const MAX_NESTING: usize = 32;

/// The most operators an expression may have (see [`Shape`]).
pub(crate) const MAX_OPERATORS: usize = 500;

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

    /// Found by fuzzing: each expression's position was counted from the start of the
    /// text, so 100,000 expressions in one string took minutes to split.
    #[test]
    fn fuzz_template_with_a_hundred_thousand_expressions_is_split_in_one_pass() {
        let text = "a\n${{ 1 }}é${{ 2 }}".repeat(50_000);
        let template = Template::parse(&text).unwrap();
        let exprs: Vec<_> = template.expressions().collect();
        assert_eq!(exprs.len(), 100_000);
        let positions = |i: usize| (exprs[i].line, exprs[i].column);
        assert_eq!(positions(0), (2, 1));
        assert_eq!(positions(1), (2, 10));
        assert_eq!(positions(99_999), (50_001, 10));
        let err = Template::parse("x\n ${{ 1 }} ${{ 2").unwrap_err();
        assert_eq!(err.position(), Some((2, 11)));
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
