//! Kargo's templates: a string holding `${{ expr }}` or `${% expr %}` (the two delimiters
//! mean the same in Kargo: it scans for whichever comes first and evaluates it the same
//! way). Splitting into text and expressions, and Kargo's reading of the result: a string
//! result is written as is, any other as JSON; the whole string is then read back as a
//! quoted string (quotes stripped, kept a string), a number, a bool, JSON, or else text.

use super::ExprLangError;

/// A delimiter pair Kargo accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delimiter {
    /// `${{ … }}`.
    Braces,
    /// `${% … %}`.
    Percent,
}

impl Delimiter {
    const ALL: [Delimiter; 2] = [Delimiter::Braces, Delimiter::Percent];

    /// The opening text.
    pub fn open(self) -> &'static str {
        match self {
            Delimiter::Braces => "${{",
            Delimiter::Percent => "${%",
        }
    }

    /// The closing text.
    pub fn close(self) -> &'static str {
        match self {
            Delimiter::Braces => "}}",
            Delimiter::Percent => "%}",
        }
    }
}

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Literal text.
    Text(&'a str),
    /// An expression (without its delimiters) and its byte offset in the template.
    Expr {
        /// The expression's source, as written between the delimiters.
        source: &'a str,
        /// Byte offset of `source` in the template.
        offset: usize,
        /// Which delimiters enclosed it.
        delimiter: Delimiter,
    },
}

/// Whether `text` holds an opening delimiter: only such strings are evaluated (so `"42"`
/// stays the string `"42"`).
pub fn has_kargo_expressions(text: &str) -> bool {
    Delimiter::ALL.iter().any(|d| text.contains(d.open()))
}

/// Splits `text` into pieces, as Kargo does: the earliest opening delimiter, up to the
/// first closing one of the same pair.
pub fn split(text: &str) -> Result<Vec<Piece<'_>>, ExprLangError> {
    let mut pieces = Vec::new();
    let mut rest = 0;
    loop {
        let next = Delimiter::ALL
            .iter()
            .filter_map(|d| text[rest..].find(d.open()).map(|i| (rest + i, *d)))
            .min_by_key(|(i, _)| *i);
        let Some((start, delimiter)) = next else {
            if rest < text.len() {
                pieces.push(Piece::Text(&text[rest..]));
            }
            return Ok(pieces);
        };
        if start > rest {
            pieces.push(Piece::Text(&text[rest..start]));
        }
        let body = start + delimiter.open().len();
        let Some(len) = text[body..].find(delimiter.close()) else {
            return Err(ExprLangError::Unterminated {
                text: text.to_owned(),
                open: delimiter.open(),
                close: delimiter.close(),
                offset: start,
            });
        };
        pieces.push(Piece::Expr {
            source: &text[body..body + len],
            offset: body,
            delimiter,
        });
        rest = body + len + delimiter.close().len();
    }
}

/// Kargo's reading of an evaluated template's text as a JSON value.
pub fn coerce(result: String) -> serde_json::Value {
    let (body, newline) = match result.strip_suffix('\n') {
        Some(body) => (body, true),
        None => (result.as_str(), false),
    };
    let restore = |s: &str| {
        let mut s = s.to_owned();
        if newline {
            s.push('\n');
        }
        serde_json::Value::String(s)
    };
    if body.len() > 1 && body.starts_with('"') && body.ends_with('"') {
        return restore(&body[1..body.len() - 1]);
    }
    if let Some(number) = go_parse_float(body) {
        return number;
    }
    if let Some(b) = go_parse_bool(body) {
        return serde_json::Value::Bool(b);
    }
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(body) {
        return value;
    }
    restore(body)
}

/// A number as Go's `strconv.ParseFloat` reads one (decimal forms; `inf` and `NaN`,
/// which JSON cannot hold, stay text). Integers keep integer form.
fn go_parse_float(text: &str) -> Option<serde_json::Value> {
    let plain = text.trim_start_matches(['+', '-']);
    let decimal = !plain.is_empty()
        && plain
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        && plain.starts_with(|c: char| c.is_ascii_digit() || c == '.');
    if !decimal {
        return None;
    }
    if let Ok(i) = text.parse::<i64>() {
        return Some(serde_json::Value::from(i));
    }
    let f = text.parse::<f64>().ok().filter(|f| f.is_finite())?;
    serde_json::Number::from_f64(f).map(serde_json::Value::Number)
}

/// A bool as Go's `strconv.ParseBool` reads one (`1`/`0` are numbers by then).
fn go_parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn splits_both_delimiters_in_order() {
        let pieces = split("a${{ x }}b${% y %}c").unwrap();
        assert_eq!(pieces.len(), 5);
        assert_eq!(pieces[0], Piece::Text("a"));
        assert_eq!(
            pieces[1],
            Piece::Expr {
                source: " x ",
                offset: 4,
                delimiter: Delimiter::Braces
            }
        );
        assert!(matches!(
            pieces[3],
            Piece::Expr {
                source: " y ",
                delimiter: Delimiter::Percent,
                ..
            }
        ));
        assert_eq!(pieces[4], Piece::Text("c"));
        assert!(split("plain").unwrap() == vec![Piece::Text("plain")]);
    }

    #[test]
    fn an_unclosed_expression_names_its_delimiter_and_offset() {
        let err = split("ab${% x }}").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unterminated `${%` at offset 2 of `ab${% x }}`; hint: close the expression with `%}`"
        );
    }

    #[test]
    fn results_are_read_back_as_kargo_does() {
        assert_eq!(coerce("42".into()), json!(42));
        assert_eq!(coerce("1.5".into()), json!(1.5));
        assert_eq!(coerce("true".into()), json!(true));
        assert_eq!(coerce("True".into()), json!(true));
        assert_eq!(coerce("\"true\"".into()), json!("true"));
        assert_eq!(coerce("{\"a\":1}".into()), json!({"a": 1}));
        assert_eq!(coerce("[1,2]".into()), json!([1, 2]));
        assert_eq!(coerce("null".into()), json!(null));
        assert_eq!(coerce("v1.2.3".into()), json!("v1.2.3"));
        assert_eq!(coerce("NaN".into()), json!("NaN"));
        assert_eq!(coerce("inf".into()), json!("inf"));
        assert_eq!(coerce("text\n".into()), json!("text\n"));
        assert_eq!(coerce("\"q\"\n".into()), json!("q\n"));
        assert_eq!(coerce("".into()), json!(""));
    }
}
