//! Reads a YAML stream into JSON documents and remembers, for every value, the line it was
//! written on ([`LineIndex`]), so that later checks can point at the offending line.
//!
//! Plain scalars are resolved with the YAML 1.2 core schema (`null`/`~`, `true`/`false`,
//! integers, floats, else strings); quoted and block scalars are always strings. Aliases,
//! complex keys, duplicate keys and unknown tags are reported, not guessed at. This module
//! knows nothing about Dray's kinds.

use std::collections::HashMap;

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use super::error::Issue;
use super::path::FieldPath;

/// The line on which each value of a document was written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LineIndex {
    lines: HashMap<FieldPath, usize>,
    start: usize,
}

impl LineIndex {
    /// The line of `path`, or of its nearest ancestor that was written, or of the document.
    pub(crate) fn line(&self, path: &FieldPath) -> usize {
        let mut current = Some(path.clone());
        while let Some(p) = current {
            if let Some(line) = self.lines.get(&p) {
                return *line;
            }
            current = p.parent();
        }
        self.start
    }

    /// The line on which the document's content starts.
    pub(crate) fn start(&self) -> usize {
        self.start
    }

    fn record(&mut self, path: FieldPath, line: usize) {
        self.lines.entry(path).or_insert(line);
    }
}

/// One non-empty document of a YAML stream.
#[derive(Debug, Clone)]
pub(crate) struct Document {
    /// Its position in the stream, counting from 1 (empty documents count too).
    pub(crate) number: usize,
    /// Its content.
    pub(crate) value: Value,
    /// Where each value was written.
    pub(crate) lines: LineIndex,
    /// Problems found while reading it (aliases, duplicate keys, tags).
    pub(crate) problems: Vec<Issue>,
    /// Whether the content is unreliable (an alias or a complex key was replaced).
    pub(crate) is_broken: bool,
}

/// A YAML syntax error: the stream cannot be read past this point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    /// 1-based line.
    pub(crate) line: usize,
    /// 1-based column.
    pub(crate) column: usize,
    /// The document being read, if one had started.
    pub(crate) document: Option<usize>,
    /// The parser's explanation.
    pub(crate) message: String,
}

/// The documents read from one stream, and the syntax error that stopped reading, if any.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stream {
    /// Documents completed before any syntax error.
    pub(crate) documents: Vec<Document>,
    /// The error that stopped reading.
    pub(crate) error: Option<SyntaxError>,
}

/// Reads every document of `text`. Never panics: a panic inside the YAML parser becomes a
/// syntax error on line 1.
pub(crate) fn parse(text: &str) -> Stream {
    std::panic::catch_unwind(|| parse_events(text)).unwrap_or_else(|_| Stream {
        documents: Vec::new(),
        error: Some(SyntaxError {
            line: 1,
            column: 1,
            document: None,
            message: "the YAML parser failed on this input".to_owned(),
        }),
    })
}

/// How deeply mappings and sequences may nest. Reading stops past it: a crafted document
/// nested thousands deep would otherwise cost time quadratic in its depth (every value
/// records its path), and JSON stores of the result read back at most 128 levels.
const MAX_DEPTH: usize = 64;

fn too_deep() -> String {
    format!(
        "mappings and sequences nest more than {MAX_DEPTH} deep here; no resource needs that \
         many levels: flatten the value"
    )
}

fn parse_events(text: &str) -> Stream {
    let mut parser = Parser::new_from_str(text);
    let mut builder = Builder::default();
    loop {
        match parser.next_token() {
            Err(e) => {
                let error = SyntaxError {
                    line: e.marker().line(),
                    column: e.marker().col() + 1,
                    document: builder.current.as_ref().map(|d| d.number),
                    // The scanner's own limit (255 flow levels) can come first.
                    message: if e.info() == "recursion limit exceeded" {
                        too_deep()
                    } else {
                        e.info().to_owned()
                    },
                };
                return Stream {
                    documents: builder.documents,
                    error: Some(error),
                };
            }
            Ok((Event::StreamEnd, _)) => break,
            Ok((event, mark)) => {
                builder.on_event(event, mark);
                if builder.stack.len() > MAX_DEPTH {
                    let error = SyntaxError {
                        line: mark.line(),
                        column: mark.col() + 1,
                        document: builder.current.as_ref().map(|d| d.number),
                        message: too_deep(),
                    };
                    return Stream {
                        documents: builder.documents,
                        error: Some(error),
                    };
                }
            }
        }
    }
    Stream {
        documents: builder.documents,
        error: None,
    }
}

/// An open collection.
#[derive(Debug)]
enum Frame {
    Map {
        path: FieldPath,
        line: usize,
        map: Map<String, Value>,
        key: Option<(String, usize)>,
    },
    Seq {
        path: FieldPath,
        line: usize,
        items: Vec<Value>,
    },
}

/// Where the node that starts now goes.
enum Slot {
    /// It is the key of a mapping entry.
    Key,
    /// It is a value at this path, written on this line.
    Value(FieldPath, usize),
}

#[derive(Debug)]
struct InProgress {
    number: usize,
    value: Option<Value>,
    lines: LineIndex,
    problems: Vec<Issue>,
    is_broken: bool,
}

#[derive(Debug, Default)]
struct Builder {
    stack: Vec<Frame>,
    current: Option<InProgress>,
    documents: Vec<Document>,
    count: usize,
}

impl Builder {
    fn on_event(&mut self, event: Event, mark: Marker) {
        match event {
            Event::DocumentStart => {
                self.count += 1;
                self.stack.clear();
                self.current = Some(InProgress {
                    number: self.count,
                    value: None,
                    lines: LineIndex {
                        lines: HashMap::new(),
                        start: mark.line(),
                    },
                    problems: Vec::new(),
                    is_broken: false,
                });
            }
            Event::DocumentEnd => self.end_document(),
            Event::Scalar(text, style, _anchor, tag) => self.scalar(text, style, tag, mark),
            Event::Alias(_) => {
                self.problem(
                    Issue::new(
                        FieldPath::root(),
                        "YAML aliases (`*name`) are not supported",
                    )
                    .hint("write the value out in full instead of referring to an anchor")
                    .at_line(mark.line()),
                    true,
                );
                match self.slot(mark) {
                    Slot::Key => self.set_key("*alias".to_owned(), mark.line()),
                    Slot::Value(..) => self.finish(Value::Null, mark.line()),
                }
            }
            Event::MappingStart(_, ref tag) | Event::SequenceStart(_, ref tag) => {
                let is_map = matches!(event, Event::MappingStart(..));
                self.check_collection_tag(tag.as_ref(), is_map, mark);
                let (path, line) = match self.slot(mark) {
                    Slot::Key => (FieldPath::root(), mark.line()),
                    Slot::Value(path, line) => (path, line),
                };
                self.push(is_map, path, line);
            }
            Event::MappingEnd | Event::SequenceEnd => self.pop(),
            Event::StreamStart | Event::StreamEnd | Event::Nothing => {}
        }
    }

    fn slot(&mut self, mark: Marker) -> Slot {
        let slot = match self.stack.last() {
            None => Slot::Value(FieldPath::root(), mark.line()),
            Some(Frame::Map { key: None, .. }) => Slot::Key,
            Some(Frame::Map {
                path,
                key: Some((k, line)),
                ..
            }) => Slot::Value(path.key(k), *line),
            Some(Frame::Seq { path, items, .. }) => {
                Slot::Value(path.index(items.len()), mark.line())
            }
        };
        if let (Slot::Value(path, line), Some(doc)) = (&slot, self.current.as_mut()) {
            if path.is_root() {
                doc.lines.start = *line;
            }
            doc.lines.record(path.clone(), *line);
        }
        slot
    }

    fn scalar(&mut self, text: String, style: TScalarStyle, tag: Option<Tag>, mark: Marker) {
        match self.slot(mark) {
            Slot::Key => self.set_key(text, mark.line()),
            Slot::Value(path, line) => {
                let value = match tag {
                    None if style == TScalarStyle::Plain => resolve_plain(&text),
                    None => Value::String(text),
                    Some(tag) => match resolve_tagged(&text, &tag) {
                        Ok(value) => value,
                        Err(message) => {
                            let issue = Issue::new(path, message).at_line(line).hint(
                                "remove the tag; Dray reads plain YAML (`!!str` may force a string)",
                            );
                            self.problem(issue, false);
                            Value::String(text)
                        }
                    },
                };
                self.finish(value, line);
            }
        }
    }

    fn check_collection_tag(&mut self, tag: Option<&Tag>, is_map: bool, mark: Marker) {
        let Some(tag) = tag else { return };
        let expected = if is_map { "map" } else { "seq" };
        if !(is_core(tag) && tag.suffix == expected) {
            let issue = Issue::new(
                FieldPath::root(),
                format!("YAML tag `{}` is not supported", show(tag)),
            )
            .hint("remove the tag")
            .at_line(mark.line());
            self.problem(issue, false);
        }
    }

    fn set_key(&mut self, key: String, line: usize) {
        let mut duplicate = None;
        if let Some(Frame::Map {
            path,
            map,
            key: slot,
            ..
        }) = self.stack.last_mut()
        {
            if map.contains_key(&key) {
                duplicate = Some(path.key(&key));
            }
            *slot = Some((key.clone(), line));
        }
        if let Some(path) = duplicate {
            let issue = Issue::new(
                path,
                format!("the key `{key}` appears twice in one mapping"),
            )
            .hint("remove one of them; YAML does not allow a key twice")
            .at_line(line);
            self.problem(issue, false);
        }
    }

    fn push(&mut self, is_map: bool, path: FieldPath, line: usize) {
        let frame = if is_map {
            Frame::Map {
                path,
                line,
                map: Map::new(),
                key: None,
            }
        } else {
            Frame::Seq {
                path,
                line,
                items: Vec::new(),
            }
        };
        self.stack.push(frame);
    }

    fn pop(&mut self) {
        match self.stack.pop() {
            Some(Frame::Map { map, line, .. }) => self.finish(Value::Object(map), line),
            Some(Frame::Seq { items, line, .. }) => self.finish(Value::Array(items), line),
            None => {}
        }
    }

    /// Places a completed value into its parent (or makes it the document).
    fn finish(&mut self, value: Value, line: usize) {
        match self.stack.last_mut() {
            None => {
                if let Some(doc) = self.current.as_mut() {
                    doc.value = Some(value);
                }
            }
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map { map, key, .. }) => match key.take() {
                Some((k, _)) => {
                    map.insert(k, value);
                }
                None => {
                    let issue =
                        Issue::new(FieldPath::root(), "complex mapping keys are not supported")
                            .hint("use a plain string as the key")
                            .at_line(line);
                    self.problem(issue, true);
                    self.set_key(value.to_string(), line);
                }
            },
        }
    }

    fn problem(&mut self, issue: Issue, breaks: bool) {
        if let Some(doc) = self.current.as_mut() {
            doc.problems.push(issue);
            doc.is_broken |= breaks;
        }
    }

    fn end_document(&mut self) {
        self.stack.clear();
        let Some(doc) = self.current.take() else {
            return;
        };
        let value = doc.value.unwrap_or(Value::Null);
        if value.is_null() && doc.problems.is_empty() {
            return;
        }
        self.documents.push(Document {
            number: doc.number,
            value,
            lines: doc.lines,
            problems: doc.problems,
            is_broken: doc.is_broken,
        });
    }
}

fn is_core(tag: &Tag) -> bool {
    tag.handle == "tag:yaml.org,2002:" || tag.handle == "!!"
}

fn show(tag: &Tag) -> String {
    if is_core(tag) {
        format!("!!{}", tag.suffix)
    } else {
        format!("{}{}", tag.handle, tag.suffix)
    }
}

/// Resolves a scalar that carries a tag: only the core schema's own tags are accepted.
fn resolve_tagged(text: &str, tag: &Tag) -> Result<Value, String> {
    if !is_core(tag) {
        return Err(format!("YAML tag `{}` is not supported", show(tag)));
    }
    let value = resolve_plain(text);
    let fits = match tag.suffix.as_str() {
        "str" => return Ok(Value::String(text.to_owned())),
        "null" => value.is_null(),
        "bool" => value.is_boolean(),
        "int" => value.is_i64() || value.is_u64(),
        "float" => value.is_number(),
        _ => return Err(format!("YAML tag `{}` is not supported", show(tag))),
    };
    if fits {
        Ok(value)
    } else {
        Err(format!("`{text}` is not a valid `{}`", show(tag)))
    }
}

/// Resolves a plain scalar with the YAML 1.2 core schema.
pub(crate) fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    if let Some(n) = resolve_int(text) {
        return Value::Number(n);
    }
    if is_float(text) {
        if let Some(n) = text.parse::<f64>().ok().and_then(Number::from_f64) {
            return Value::Number(n);
        }
    }
    Value::String(text.to_owned())
}

fn resolve_int(text: &str) -> Option<Number> {
    if let Some(octal) = text.strip_prefix("0o") {
        return u64::from_str_radix(octal, 8).ok().map(Number::from);
    }
    if let Some(hex) = text.strip_prefix("0x") {
        return u64::from_str_radix(hex, 16).ok().map(Number::from);
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let unsigned = text.strip_prefix('+').unwrap_or(text);
    if let Ok(i) = unsigned.parse::<i64>() {
        return Some(Number::from(i));
    }
    if let Ok(u) = unsigned.parse::<u64>() {
        return Some(Number::from(u));
    }
    unsigned.parse::<f64>().ok().and_then(Number::from_f64)
}

/// `[-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?` (infinities and NaN
/// stay strings: JSON cannot hold them).
fn is_float(text: &str) -> bool {
    let s = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let all_digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => {
            all_digits(int) && all_digits(frac) && (!int.is_empty() || !frac.is_empty())
        }
        None => !mantissa.is_empty() && all_digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && all_digits(e)
    });
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn one(text: &str) -> Document {
        let stream = parse(text);
        assert_eq!(stream.error, None);
        assert_eq!(stream.documents.len(), 1);
        stream.documents.into_iter().next().unwrap()
    }

    #[test]
    fn resolves_scalars_with_the_core_schema() {
        let doc = one(
            "a: ~\nb: null\nc: true\nd: False\ne: 42\nf: -7\ng: 0x1F\nh: 0o17\ni: 1.5\nj: 1e3\n\
             k: .5\nl: yes\nm: '42'\nn: \"true\"\no: |\n  text\np: 1.2.3\nq: .inf\nr: 007\ns: !!str 5\n",
        );
        assert_eq!(
            doc.value,
            json!({"a": null, "b": null, "c": true, "d": false, "e": 42, "f": -7, "g": 31,
                   "h": 15, "i": 1.5, "j": 1000.0, "k": 0.5, "l": "yes", "m": "42", "n": "true",
                   "o": "text\n", "p": "1.2.3", "q": ".inf", "r": 7, "s": "5"})
        );
        assert!(doc.problems.is_empty());
    }

    #[test]
    fn indexes_the_line_of_every_field_and_item() {
        let doc = one(
            "# comment\napiVersion: v1\nspec:\n  requestedFreight:\n  - origin:\n      name: app\n    sources:\n      stages: [dev,\n        qa]\n",
        );
        let rf = FieldPath::of(&["spec", "requestedFreight"]);
        assert_eq!(doc.lines.start(), 2);
        assert_eq!(doc.lines.line(&FieldPath::of(&["apiVersion"])), 2);
        assert_eq!(doc.lines.line(&FieldPath::of(&["spec"])), 3);
        assert_eq!(doc.lines.line(&rf.index(0)), 5);
        assert_eq!(doc.lines.line(&rf.index(0).key("origin").key("name")), 6);
        assert_eq!(
            doc.lines
                .line(&rf.index(0).key("sources").key("stages").index(0)),
            8
        );
        assert_eq!(
            doc.lines
                .line(&rf.index(0).key("sources").key("stages").index(1)),
            9
        );
        // Unknown paths fall back to their nearest written ancestor.
        assert_eq!(doc.lines.line(&rf.index(0).key("origin").key("kind")), 5);
        assert_eq!(doc.lines.line(&FieldPath::of(&["nope"])), 2);
    }

    #[test]
    fn splits_documents_and_skips_empty_ones() {
        let stream = parse("---\na: 1\n---\n# only a comment\n---\nb: 2\n...\n---\n");
        assert_eq!(stream.error, None);
        let numbers: Vec<_> = stream.documents.iter().map(|d| d.number).collect();
        assert_eq!(numbers, vec![1, 3]);
        assert_eq!(stream.documents[1].lines.start(), 6);
        assert_eq!(stream.documents[1].value, json!({"b": 2}));
    }

    #[test]
    fn reports_syntax_errors_with_line_and_column_and_keeps_earlier_documents() {
        let stream = parse("a: 1\n---\nb: [1, 2\nc: 3\n");
        assert_eq!(stream.documents.len(), 1);
        let error = stream.error.unwrap();
        assert_eq!(error.document, Some(2));
        assert_eq!(error.line, 4);
        assert!(!error.message.is_empty());

        let stream = parse("a: b: c\n");
        let error = stream.error.unwrap();
        assert_eq!((error.line, error.column), (1, 5));
    }

    #[test]
    fn rejects_aliases_complex_keys_duplicates_and_foreign_tags() {
        let doc = one("a: &x 1\nb: *x\n");
        assert!(doc.is_broken);
        assert_eq!(doc.problems[0].line, Some(2));
        assert!(doc.problems[0].message.contains("aliases"));

        let doc = one("? [a, b]\n: 1\n");
        assert!(doc.is_broken);

        let doc = one("a: 1\nb: 2\na: 3\n");
        assert!(!doc.is_broken);
        assert_eq!(doc.problems.len(), 1);
        assert_eq!(doc.problems[0].line, Some(3));
        assert_eq!(doc.problems[0].path, FieldPath::of(&["a"]));

        let doc = one("a: !Ref x\nb: !!int nope\n");
        assert_eq!(doc.problems.len(), 2);
        assert_eq!(doc.problems[1].line, Some(2));
    }

    #[test]
    fn survives_odd_input() {
        for text in [
            "",
            "\n",
            "---",
            "- a\n- b",
            "{",
            "]",
            "a:\n\t- b",
            "\u{feff}a: 1",
            "!!",
            "&a *a",
        ] {
            let _ = parse(text);
        }
    }

    /// Found by fuzzing: 10,000 nested block sequences took 45 s to read (every value
    /// records its path), and the result could not have been read back from the store.
    #[test]
    fn fuzz_yaml_nested_ten_thousand_deep_is_a_quick_error_not_a_stall() {
        let deep =
            |open: &str, close: &str, n: usize| format!("{}1{}", open.repeat(n), close.repeat(n));
        for text in [
            deep("- ", "", 10_000),
            deep("[", "]", 10_000),
            deep("{a: ", "}", 10_000),
            (0..1_000)
                .map(|i| format!("{}a:\n", " ".repeat(i)))
                .collect(),
        ] {
            let stream = parse(&text);
            let error = stream.error.expect("a syntax error");
            assert!(
                error.message.contains("nest more than 64 deep"),
                "{}",
                error.message
            );
            assert!(error.line <= 66, "{error:?}");
        }
        // The limit itself is fine.
        let stream = parse(&deep("[", "]", MAX_DEPTH));
        assert!(stream.error.is_none(), "{:?}", stream.error);
        assert_eq!(stream.documents.len(), 1);
    }
}
